// relu: max(x, 0), [512x512] f32 (aten.relu as Torch-MLIR lowers it: compare and select).
// One loop nest.
#map = affine_map<(d0, d1) -> (d0, d1)>
func.func @forward(%x: tensor<512x512xf32>) -> tensor<512x512xf32> {
  %zero = arith.constant 0.000000e+00 : f32
  %e = tensor.empty() : tensor<512x512xf32>
  %r = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<512x512xf32>) outs(%e : tensor<512x512xf32>) {
  ^bb0(%in: f32, %o: f32):
    %gt = arith.cmpf ugt, %in, %zero : f32
    %s = arith.select %gt, %in, %zero : f32
    linalg.yield %s : f32
  } -> tensor<512x512xf32>
  return %r : tensor<512x512xf32>
}
