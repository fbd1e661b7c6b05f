// The same tensor returned twice (what an exporter makes of an Identity output): each result
// is its own out-param, both hold x * x.
#map = affine_map<(d0) -> (d0)>
func.func @forward(%x: tensor<64xf32>) -> (tensor<64xf32>, tensor<64xf32>) {
  %e = tensor.empty() : tensor<64xf32>
  %r = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel"]}
      ins(%x : tensor<64xf32>) outs(%e : tensor<64xf32>) {
  ^bb0(%a: f32, %o: f32):
    %m = arith.mulf %a, %a : f32
    linalg.yield %m : f32
  } -> tensor<64xf32>
  return %r, %r : tensor<64xf32>, tensor<64xf32>
}
