// tanh, erf and 1 + tanh (the tanh GELU's) on f32, elementwise over [4096]: the host code
// computes them inline around a vectorisable exp (compiler/hostcode.h), to within a few units
// in the last place of libm's.
#id = affine_map<(d0) -> (d0)>
func.func @forward(%x: tensor<4096xf32>) -> (tensor<4096xf32>, tensor<4096xf32>, tensor<4096xf32>) {
  %e = tensor.empty() : tensor<4096xf32>
  %t = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]}
      ins(%x : tensor<4096xf32>) outs(%e : tensor<4096xf32>) {
  ^bb0(%a: f32, %o: f32):
    %v = math.tanh %a : f32
    linalg.yield %v : f32
  } -> tensor<4096xf32>
  %e2 = tensor.empty() : tensor<4096xf32>
  %r = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]}
      ins(%x : tensor<4096xf32>) outs(%e2 : tensor<4096xf32>) {
  ^bb0(%a: f32, %o: f32):
    %v = math.erf %a : f32
    linalg.yield %v : f32
  } -> tensor<4096xf32>
  %one = arith.constant 1.000000e+00 : f32
  %e3 = tensor.empty() : tensor<4096xf32>
  %g = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel"]}
      ins(%x : tensor<4096xf32>) outs(%e3 : tensor<4096xf32>) {
  ^bb0(%a: f32, %o: f32):
    %v = math.tanh %a : f32
    %w = arith.addf %v, %one : f32
    linalg.yield %w : f32
  } -> tensor<4096xf32>
  return %t, %r, %g : tensor<4096xf32>, tensor<4096xf32>, tensor<4096xf32>
}
