// A 64 KiB weight (128x128 f32, the smallest constant --weights zero replaces) and a 512-byte
// bias that stays real: y = x W + b.
#map = affine_map<(d0, d1) -> (d0, d1)>
func.func @forward(%x: tensor<1x128xf32>) -> tensor<1x128xf32> {
  %w = arith.constant dense<0.5> : tensor<128x128xf32>
  %b = arith.constant dense<1.5> : tensor<1x128xf32>
  %zero = arith.constant 0.000000e+00 : f32
  %e = tensor.empty() : tensor<1x128xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<1x128xf32>) -> tensor<1x128xf32>
  %m = linalg.matmul ins(%x, %w : tensor<1x128xf32>, tensor<128x128xf32>)
      outs(%z : tensor<1x128xf32>) -> tensor<1x128xf32>
  %e2 = tensor.empty() : tensor<1x128xf32>
  %r = linalg.generic {indexing_maps = [#map, #map, #map], iterator_types = ["parallel", "parallel"]}
      ins(%m, %b : tensor<1x128xf32>, tensor<1x128xf32>) outs(%e2 : tensor<1x128xf32>) {
  ^bb0(%p: f32, %q: f32, %o: f32):
    %v = arith.addf %p, %q : f32
    linalg.yield %v : f32
  } -> tensor<1x128xf32>
  return %r : tensor<1x128xf32>
}
