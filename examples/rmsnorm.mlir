// rmsnorm (LLaMA) over the last dim of [16x512] f32, weight a constant (a memref.global after
// bufferization), eps 1e-6: 2 loop nests -- sum of squares (fill folded in), y = x * rsqrt(ss/512 + eps) * w.
#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
#col = affine_map<(d0, d1) -> (d1)>
func.func @forward(%x: tensor<16x512xf32>) -> tensor<16x512xf32> {
  %w = arith.constant dense<1.000000e+00> : tensor<512xf32>
  %zero = arith.constant 0.000000e+00 : f32
  %n = arith.constant 5.120000e+02 : f32
  %eps = arith.constant 9.99999997E-7 : f32
  %e0 = tensor.empty() : tensor<16xf32>
  %s0 = linalg.fill ins(%zero : f32) outs(%e0 : tensor<16xf32>) -> tensor<16xf32>
  %ss = linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]}
      ins(%x : tensor<16x512xf32>) outs(%s0 : tensor<16xf32>) {
  ^bb0(%in: f32, %acc: f32):
    %sq = arith.mulf %in, %in : f32
    %a = arith.addf %sq, %acc : f32
    linalg.yield %a : f32
  } -> tensor<16xf32>
  %e1 = tensor.empty() : tensor<16x512xf32>
  %y = linalg.generic {indexing_maps = [#id, #row, #col, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x, %ss, %w : tensor<16x512xf32>, tensor<16xf32>, tensor<512xf32>) outs(%e1 : tensor<16x512xf32>) {
  ^bb0(%in: f32, %s: f32, %g: f32, %o: f32):
    %m = arith.divf %s, %n : f32
    %p = arith.addf %m, %eps : f32
    %r = math.rsqrt %p : f32
    %v = arith.mulf %in, %r : f32
    %v2 = arith.mulf %v, %g : f32
    linalg.yield %v2 : f32
  } -> tensor<16x512xf32>
  return %y : tensor<16x512xf32>
}
