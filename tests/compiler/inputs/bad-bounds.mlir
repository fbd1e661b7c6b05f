// Refused: the loop around a nest has a bound read from a tensor at run time.
#map = affine_map<(d0) -> (d0)>
func.func @forward(%n: tensor<i64>, %x: tensor<64xf32>) -> tensor<64xf32> {
  %c0 = arith.constant 0 : index
  %c1 = arith.constant 1 : index
  %ni = tensor.extract %n[] : tensor<i64>
  %ub = arith.index_cast %ni : i64 to index
  %r = scf.for %i = %c0 to %ub step %c1 iter_args(%acc = %x) -> (tensor<64xf32>) {
    %e = tensor.empty() : tensor<64xf32>
    %y = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel"]}
        ins(%acc : tensor<64xf32>) outs(%e : tensor<64xf32>) {
    ^bb0(%in: f32, %o: f32):
      %v = math.exp %in : f32
      linalg.yield %v : f32
    } -> tensor<64xf32>
    scf.yield %y : tensor<64xf32>
  }
  return %r : tensor<64xf32>
}
