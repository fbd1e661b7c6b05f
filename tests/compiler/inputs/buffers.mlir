// A model with an intermediate buffer of 33 MiB (above the largest size malloc keeps in its
// heap, so it maps and unmaps it on every call): t = exp(x) has two readers (a row sum and a
// scale), so it is not fused away and the library allocates and frees it on every call.
#id = affine_map<(i, j) -> (i, j)>
#row = affine_map<(i, j) -> (i)>
func.func @forward(%x: tensor<2048x4224xf32>) -> (tensor<2048xf32>, tensor<2048x4224xf32>) {
  %zero = arith.constant 0.000000e+00 : f32
  %two = arith.constant 2.000000e+00 : f32
  %e = tensor.empty() : tensor<2048x4224xf32>
  %t = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<2048x4224xf32>) outs(%e : tensor<2048x4224xf32>) {
  ^bb0(%a: f32, %o: f32):
    %v = math.exp %a : f32
    linalg.yield %v : f32
  } -> tensor<2048x4224xf32>
  %es = tensor.empty() : tensor<2048xf32>
  %fs = linalg.fill ins(%zero : f32) outs(%es : tensor<2048xf32>) -> tensor<2048xf32>
  %s = linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]}
      ins(%t : tensor<2048x4224xf32>) outs(%fs : tensor<2048xf32>) {
  ^bb0(%a: f32, %o: f32):
    %v = arith.addf %o, %a : f32
    linalg.yield %v : f32
  } -> tensor<2048xf32>
  %eu = tensor.empty() : tensor<2048x4224xf32>
  %u = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%t : tensor<2048x4224xf32>) outs(%eu : tensor<2048x4224xf32>) {
  ^bb0(%a: f32, %o: f32):
    %v = arith.mulf %a, %two : f32
    linalg.yield %v : f32
  } -> tensor<2048x4224xf32>
  return %s, %u : tensor<2048xf32>, tensor<2048x4224xf32>
}
