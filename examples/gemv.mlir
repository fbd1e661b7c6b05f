// gemv: y = A x, A [1024x1024] f32, x [1024] (aten.mv): 1 loop nest, fill of y in it.
// The matvec nest reads A, x and y (its accumulator): 4,194,304 + 4,096 + 4,096 bytes.
func.func @forward(%a: tensor<1024x1024xf32>, %x: tensor<1024xf32>) -> tensor<1024xf32> {
  %zero = arith.constant 0.000000e+00 : f32
  %e = tensor.empty() : tensor<1024xf32>
  %f = linalg.fill ins(%zero : f32) outs(%e : tensor<1024xf32>) -> tensor<1024xf32>
  %y = linalg.matvec ins(%a, %x : tensor<1024x1024xf32>, tensor<1024xf32>) outs(%f : tensor<1024xf32>) -> tensor<1024xf32>
  return %y : tensor<1024xf32>
}
