// add: elementwise a + b, [256x1024] f32 (Torch-MLIR's form of aten.add.Tensor).
// One loop nest: scf.parallel over 256x1024.
#map = affine_map<(d0, d1) -> (d0, d1)>
func.func @forward(%a: tensor<256x1024xf32>, %b: tensor<256x1024xf32>) -> tensor<256x1024xf32> {
  %e = tensor.empty() : tensor<256x1024xf32>
  %r = linalg.generic {indexing_maps = [#map, #map, #map], iterator_types = ["parallel", "parallel"]}
      ins(%a, %b : tensor<256x1024xf32>, tensor<256x1024xf32>) outs(%e : tensor<256x1024xf32>) {
  ^bb0(%x: f32, %y: f32, %o: f32):
    %s = arith.addf %x, %y : f32
    linalg.yield %s : f32
  } -> tensor<256x1024xf32>
  return %r : tensor<256x1024xf32>
}
