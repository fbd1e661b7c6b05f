// mac: multiply-accumulate into the accumulator passed in, acc += a * b, [262144] f32.
// One loop nest; acc is read and written (role inout).
#map = affine_map<(d0) -> (d0)>
func.func @forward(%a: tensor<262144xf32>, %b: tensor<262144xf32>, %acc: tensor<262144xf32>) -> tensor<262144xf32> {
  %r = linalg.generic {indexing_maps = [#map, #map, #map], iterator_types = ["parallel"]}
      ins(%a, %b : tensor<262144xf32>, tensor<262144xf32>) outs(%acc : tensor<262144xf32>) {
  ^bb0(%x: f32, %y: f32, %o: f32):
    %p = arith.mulf %x, %y : f32
    %s = arith.addf %o, %p : f32
    linalg.yield %s : f32
  } -> tensor<262144xf32>
  return %r : tensor<262144xf32>
}
