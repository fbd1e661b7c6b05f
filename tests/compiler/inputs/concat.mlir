// tensor.concat (what exporters make of Concat) along dimension 1: [4x8] and [4x24] into
// [4x32], then doubled.  The concatenation is data movement (copies), not a loop nest.
#map = affine_map<(d0, d1) -> (d0, d1)>
func.func @forward(%a: tensor<4x8xf32>, %b: tensor<4x24xf32>) -> tensor<4x32xf32> {
  %c = tensor.concat dim(1) %a, %b : (tensor<4x8xf32>, tensor<4x24xf32>) -> tensor<4x32xf32>
  %e = tensor.empty() : tensor<4x32xf32>
  %r = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel"]}
      ins(%c : tensor<4x32xf32>) outs(%e : tensor<4x32xf32>) {
  ^bb0(%x: f32, %o: f32):
    %d = arith.addf %x, %x : f32
    linalg.yield %d : f32
  } -> tensor<4x32xf32>
  return %r : tensor<4x32xf32>
}
