// Refused: a scalar argument (a model library passes every argument as a buffer).
#map = affine_map<(d0) -> (d0)>
func.func @forward(%x: tensor<16xf32>, %s: f32) -> tensor<16xf32> {
  %e = tensor.empty() : tensor<16xf32>
  %y = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel"]}
      ins(%x : tensor<16xf32>) outs(%e : tensor<16xf32>) {
  ^bb0(%in: f32, %o: f32):
    %v = arith.mulf %in, %s : f32
    linalg.yield %v : f32
  } -> tensor<16xf32>
  return %y : tensor<16xf32>
}
