// softmax over the last dim of [16x512] f32, in the form Torch-MLIR's decomposition of
// aten._softmax gives (max with indices, sub, exp, sum, div): 4 loop nests --
//   max+argmax (after its fills of -inf and 0 indices), exp(x - max), sum (after its fill), div.
#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0, 0)>
func.func @forward(%x: tensor<16x512xf32>) -> tensor<16x512xf32> {
  %ninf = arith.constant 0xFF800000 : f32
  %zero = arith.constant 0.000000e+00 : f32
  %zi = arith.constant 0 : i64
  %e1 = tensor.empty() : tensor<16x1xf32>
  %m0 = linalg.fill ins(%ninf : f32) outs(%e1 : tensor<16x1xf32>) -> tensor<16x1xf32>
  %ei = tensor.empty() : tensor<16x1xi64>
  %i0 = linalg.fill ins(%zi : i64) outs(%ei : tensor<16x1xi64>) -> tensor<16x1xi64>
  %mx:2 = linalg.generic {indexing_maps = [#id, #row, #row], iterator_types = ["parallel", "reduction"]}
      ins(%x : tensor<16x512xf32>) outs(%m0, %i0 : tensor<16x1xf32>, tensor<16x1xi64>) {
  ^bb0(%in: f32, %m: f32, %i: i64):
    %j = linalg.index 1 : index
    %ji = arith.index_cast %j : index to i64
    %gt = arith.cmpf ogt, %in, %m : f32
    %nm = arith.select %gt, %in, %m : f32
    %ni = arith.select %gt, %ji, %i : i64
    linalg.yield %nm, %ni : f32, i64
  } -> (tensor<16x1xf32>, tensor<16x1xi64>)
  %e2 = tensor.empty() : tensor<16x512xf32>
  %sub = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]}
      ins(%x, %mx#0 : tensor<16x512xf32>, tensor<16x1xf32>) outs(%e2 : tensor<16x512xf32>) {
  ^bb0(%in: f32, %m: f32, %o: f32):
    %d = arith.subf %in, %m : f32
    linalg.yield %d : f32
  } -> tensor<16x512xf32>
  %e3 = tensor.empty() : tensor<16x512xf32>
  %exp = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%sub : tensor<16x512xf32>) outs(%e3 : tensor<16x512xf32>) {
  ^bb0(%in: f32, %o: f32):
    %v = math.exp %in : f32
    linalg.yield %v : f32
  } -> tensor<16x512xf32>
  %e4 = tensor.empty() : tensor<16x1xf32>
  %s0 = linalg.fill ins(%zero : f32) outs(%e4 : tensor<16x1xf32>) -> tensor<16x1xf32>
  %sum = linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]}
      ins(%exp : tensor<16x512xf32>) outs(%s0 : tensor<16x1xf32>) {
  ^bb0(%in: f32, %acc: f32):
    %a = arith.addf %in, %acc : f32
    linalg.yield %a : f32
  } -> tensor<16x1xf32>
  %e5 = tensor.empty() : tensor<16x512xf32>
  %div = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"]}
      ins(%exp, %sum : tensor<16x512xf32>, tensor<16x1xf32>) outs(%e5 : tensor<16x512xf32>) {
  ^bb0(%in: f32, %s: f32, %o: f32):
    %q = arith.divf %in, %s : f32
    linalg.yield %q : f32
  } -> tensor<16x512xf32>
  return %div : tensor<16x512xf32>
}
