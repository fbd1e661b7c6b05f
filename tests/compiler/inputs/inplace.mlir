// In place: the second op's outs is the first op's result, so after bufferization one
// allocation (an intermediate memref.alloc) is both read (ins) and written (outs) by region 1.
#map = affine_map<(d0) -> (d0)>
func.func @forward(%x: tensor<1024xf32>, %b: tensor<1024xf32>) -> tensor<1024xf32> {
  %two = arith.constant 2.000000e+00 : f32
  %e = tensor.empty() : tensor<1024xf32>
  %t = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel"]}
      ins(%x : tensor<1024xf32>) outs(%e : tensor<1024xf32>) {
  ^bb0(%in: f32, %o: f32):
    %v = math.exp %in : f32
    linalg.yield %v : f32
  } -> tensor<1024xf32>
  %u = linalg.generic {indexing_maps = [#map, #map, #map], iterator_types = ["parallel"]}
      ins(%t, %b : tensor<1024xf32>, tensor<1024xf32>) outs(%t : tensor<1024xf32>) {
  ^bb0(%in: f32, %c: f32, %o: f32):
    %v = arith.addf %in, %c : f32
    linalg.yield %v : f32
  } -> tensor<1024xf32>
  %e2 = tensor.empty() : tensor<1024xf32>
  %w = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel"]}
      ins(%u : tensor<1024xf32>) outs(%e2 : tensor<1024xf32>) {
  ^bb0(%in: f32, %o: f32):
    %v = arith.mulf %in, %two : f32
    linalg.yield %v : f32
  } -> tensor<1024xf32>
  return %w : tensor<1024xf32>
}
