// exp: elementwise e^x, [256x1024] f32.  One loop nest.
#map = affine_map<(d0, d1) -> (d0, d1)>
func.func @forward(%x: tensor<256x1024xf32>) -> tensor<256x1024xf32> {
  %e = tensor.empty() : tensor<256x1024xf32>
  %r = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<256x1024xf32>) outs(%e : tensor<256x1024xf32>) {
  ^bb0(%in: f32, %o: f32):
    %s = math.exp %in : f32
    linalg.yield %s : f32
  } -> tensor<256x1024xf32>
  return %r : tensor<256x1024xf32>
}
