// A private helper called twice: inlining makes two nests (one per call), both located at the
// helper's op; the canonicalizer the inliner would run by default must not fold them.
#map = affine_map<(d0) -> (d0)>
func.func private @scale(%x: tensor<256xf32>) -> tensor<256xf32> {
  %c = arith.constant 1.000000e+00 : f32
  %e = tensor.empty() : tensor<256xf32>
  %r = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel"]}
      ins(%x : tensor<256xf32>) outs(%e : tensor<256xf32>) {
  ^bb0(%a: f32, %o: f32):
    %m = arith.mulf %a, %c : f32
    linalg.yield %m : f32
  } -> tensor<256xf32>
  return %r : tensor<256xf32>
}
func.func @forward(%x: tensor<256xf32>) -> tensor<256xf32> {
  %y = func.call @scale(%x) : (tensor<256xf32>) -> tensor<256xf32>
  %z = func.call @scale(%y) : (tensor<256xf32>) -> tensor<256xf32>
  return %z : tensor<256xf32>
}
