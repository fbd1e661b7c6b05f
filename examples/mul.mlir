// mul: elementwise a * b, [256x1024] f32, written with the named op linalg.mul.
// One loop nest.
func.func @forward(%a: tensor<256x1024xf32>, %b: tensor<256x1024xf32>) -> tensor<256x1024xf32> {
  %e = tensor.empty() : tensor<256x1024xf32>
  %r = linalg.mul ins(%a, %b : tensor<256x1024xf32>, tensor<256x1024xf32>)
      outs(%e : tensor<256x1024xf32>) -> tensor<256x1024xf32>
  return %r : tensor<256x1024xf32>
}
