// An embedding lookup: 8 rows of a [1000x64] f32 table, gathered by tensor.extract in the
// payload.  The table is no operand of the generic op, yet the nest reads 8 x 64 x 4 = 2048
// bytes of it (plus the 64 bytes of ids).
#ids = affine_map<(d0, d1) -> (d0)>
#out = affine_map<(d0, d1) -> (d0, d1)>
func.func @forward(%table: tensor<1000x64xf32>, %ids: tensor<8xi64>) -> tensor<8x64xf32> {
  %e = tensor.empty() : tensor<8x64xf32>
  %r = linalg.generic {indexing_maps = [#ids, #out], iterator_types = ["parallel", "parallel"]}
      ins(%ids : tensor<8xi64>) outs(%e : tensor<8x64xf32>) {
  ^bb0(%id: i64, %o: f32):
    %i = arith.index_cast %id : i64 to index
    %j = linalg.index 1 : index
    %v = tensor.extract %table[%i, %j] : tensor<1000x64xf32>
    linalg.yield %v : f32
  } -> tensor<8x64xf32>
  return %r : tensor<8x64xf32>
}
