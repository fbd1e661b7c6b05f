// layernorm over the last dim of [16x512] f32 with gamma and beta, eps 1e-5: 4 loop nests --
//   sum (its zero fill folded in), mean = sum/512, sum of squared deviations (fill folded in),
//   rstd = rsqrt(var + eps) fused into
//   y = (x - mean) * rstd * gamma + beta.
#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
#col = affine_map<(d0, d1) -> (d1)>
#v = affine_map<(d0) -> (d0)>
func.func @forward(%x: tensor<16x512xf32>, %gamma: tensor<512xf32>, %beta: tensor<512xf32>) -> tensor<16x512xf32> {
  %zero = arith.constant 0.000000e+00 : f32
  %n = arith.constant 5.120000e+02 : f32
  %eps = arith.constant 9.99999974E-6 : f32
  %e0 = tensor.empty() : tensor<16xf32>
  %s0 = linalg.fill ins(%zero : f32) outs(%e0 : tensor<16xf32>) -> tensor<16xf32>
  %sum = linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]}
      ins(%x : tensor<16x512xf32>) outs(%s0 : tensor<16xf32>) {
  ^bb0(%in: f32, %acc: f32):
    %a = arith.addf %in, %acc : f32
    linalg.yield %a : f32
  } -> tensor<16xf32>
  %e1 = tensor.empty() : tensor<16xf32>
  %mean = linalg.generic {indexing_maps = [#v, #v], iterator_types = ["parallel"]}
      ins(%sum : tensor<16xf32>) outs(%e1 : tensor<16xf32>) {
  ^bb0(%in: f32, %o: f32):
    %q = arith.divf %in, %n : f32
    linalg.yield %q : f32
  } -> tensor<16xf32>
  %e2 = tensor.empty() : tensor<16xf32>
  %v0 = linalg.fill ins(%zero : f32) outs(%e2 : tensor<16xf32>) -> tensor<16xf32>
  %var = linalg.generic {indexing_maps = [#id, #row, #row], iterator_types = ["parallel", "reduction"]}
      ins(%x, %mean : tensor<16x512xf32>, tensor<16xf32>) outs(%v0 : tensor<16xf32>) {
  ^bb0(%in: f32, %m: f32, %acc: f32):
    %d = arith.subf %in, %m : f32
    %d2 = arith.mulf %d, %d : f32
    %a = arith.addf %d2, %acc : f32
    linalg.yield %a : f32
  } -> tensor<16xf32>
  %e3 = tensor.empty() : tensor<16xf32>
  %rstd = linalg.generic {indexing_maps = [#v, #v], iterator_types = ["parallel"]}
      ins(%var : tensor<16xf32>) outs(%e3 : tensor<16xf32>) {
  ^bb0(%in: f32, %o: f32):
    %q = arith.divf %in, %n : f32
    %p = arith.addf %q, %eps : f32
    %r = math.rsqrt %p : f32
    linalg.yield %r : f32
  } -> tensor<16xf32>
  %e4 = tensor.empty() : tensor<16x512xf32>
  %y = linalg.generic {indexing_maps = [#id, #row, #row, #col, #col, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x, %mean, %rstd, %gamma, %beta : tensor<16x512xf32>, tensor<16xf32>, tensor<16xf32>, tensor<512xf32>, tensor<512xf32>)
      outs(%e4 : tensor<16x512xf32>) {
  ^bb0(%in: f32, %m: f32, %r: f32, %g: f32, %b: f32, %o: f32):
    %d = arith.subf %in, %m : f32
    %n1 = arith.mulf %d, %r : f32
    %n2 = arith.mulf %n1, %g : f32
    %n3 = arith.addf %n2, %b : f32
    linalg.yield %n3 : f32
  } -> tensor<16x512xf32>
  return %y : tensor<16x512xf32>
}
