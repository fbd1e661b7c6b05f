// gelu: the tanh approximation GPT-J uses,
//   0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))), [256x1024] f32.  One loop nest.
#map = affine_map<(d0, d1) -> (d0, d1)>
func.func @forward(%x: tensor<256x1024xf32>) -> tensor<256x1024xf32> {
  %half = arith.constant 5.000000e-01 : f32
  %one = arith.constant 1.000000e+00 : f32
  %k = arith.constant 0.797884583 : f32
  %c = arith.constant 4.471500e-02 : f32
  %e = tensor.empty() : tensor<256x1024xf32>
  %r = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<256x1024xf32>) outs(%e : tensor<256x1024xf32>) {
  ^bb0(%in: f32, %o: f32):
    %x2 = arith.mulf %in, %in : f32
    %x3 = arith.mulf %x2, %in : f32
    %t0 = arith.mulf %x3, %c : f32
    %t1 = arith.addf %in, %t0 : f32
    %t2 = arith.mulf %t1, %k : f32
    %t3 = math.tanh %t2 : f32
    %t4 = arith.addf %t3, %one : f32
    %t5 = arith.mulf %in, %half : f32
    %s = arith.mulf %t5, %t4 : f32
    linalg.yield %s : f32
  } -> tensor<256x1024xf32>
  return %r : tensor<256x1024xf32>
}
