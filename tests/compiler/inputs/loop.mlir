// Nests inside loops: region 0 runs in an scf.for of 4 iterations, region 1 in a nested
// scf.for of 3 (0 to 6 step 2), so 12 times per run; region 2 after the loops, once.
// Hooks per run: 4 x (0, 1, 1, 1), then 2.
#map = affine_map<(d0) -> (d0)>
func.func @forward(%a: tensor<64xf32>, %b: tensor<64xf32>) -> tensor<64xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %c2 = arith.constant 2 : index
  %c4 = arith.constant 4 : index
  %c6 = arith.constant 6 : index
  %half = arith.constant 5.000000e-01 : f32
  %r = scf.for %i = %c0 to %c4 step %c1 iter_args(%acc = %a) -> (tensor<64xf32>) {
    %e = tensor.empty() : tensor<64xf32>
    %s = linalg.generic {indexing_maps = [#map, #map, #map], iterator_types = ["parallel"]}
        ins(%acc, %b : tensor<64xf32>, tensor<64xf32>) outs(%e : tensor<64xf32>) {
    ^bb0(%x: f32, %y: f32, %o: f32):
      %v = arith.addf %x, %y : f32
      linalg.yield %v : f32
    } -> tensor<64xf32>
    %r2 = scf.for %j = %c0 to %c6 step %c2 iter_args(%t = %s) -> (tensor<64xf32>) {
      %e2 = tensor.empty() : tensor<64xf32>
      %u = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel"]}
          ins(%t : tensor<64xf32>) outs(%e2 : tensor<64xf32>) {
      ^bb0(%x: f32, %o: f32):
        %v = math.tanh %x : f32
        linalg.yield %v : f32
      } -> tensor<64xf32>
      scf.yield %u : tensor<64xf32>
    }
    scf.yield %r2 : tensor<64xf32>
  }
  %e3 = tensor.empty() : tensor<64xf32>
  %o = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel"]}
      ins(%r : tensor<64xf32>) outs(%e3 : tensor<64xf32>) {
  ^bb0(%x: f32, %o: f32):
    %v = arith.mulf %x, %half : f32
    linalg.yield %v : f32
  } -> tensor<64xf32>
  return %o : tensor<64xf32>
}
