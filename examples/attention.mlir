// attention: one head of scaled dot-product attention, seq 64, head dim 64, f32, in the shape
// Torch-MLIR gives it (transpose, mm, div, the softmax of softmax.mlir, mm): 8 loop nests --
// transpose K, Q K^T, scale, softmax (4), P V (fills folded into their nests, sub into exp).
#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0, 0)>
func.func @forward(%q: tensor<64x64xf32>, %k: tensor<64x64xf32>, %v: tensor<64x64xf32>) -> tensor<64x64xf32> {
  %zero = arith.constant 0.000000e+00 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %zi = arith.constant 0 : i64
  %sqrt_d = arith.constant 8.000000e+00 : f32
  %et = tensor.empty() : tensor<64x64xf32>
  %kt = linalg.transpose {pim.name = "k.transpose"} ins(%k : tensor<64x64xf32>) outs(%et : tensor<64x64xf32>) permutation = [1, 0]
  %e0 = tensor.empty() : tensor<64x64xf32>
  %f0 = linalg.fill {pim.name = "scores.fill"} ins(%zero : f32) outs(%e0 : tensor<64x64xf32>) -> tensor<64x64xf32>
  %s = linalg.matmul {pim.name = "scores.matmul"} ins(%q, %kt : tensor<64x64xf32>, tensor<64x64xf32>) outs(%f0 : tensor<64x64xf32>) -> tensor<64x64xf32>
  %e1 = tensor.empty() : tensor<64x64xf32>
  %sc = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"], pim.name = "scores.scale"}
      ins(%s : tensor<64x64xf32>) outs(%e1 : tensor<64x64xf32>) {
  ^bb0(%in: f32, %o: f32):
    %d = arith.divf %in, %sqrt_d : f32
    linalg.yield %d : f32
  } -> tensor<64x64xf32>
  %e2 = tensor.empty() : tensor<64x1xf32>
  %m0 = linalg.fill {pim.name = "softmax.fill_max"} ins(%ninf : f32) outs(%e2 : tensor<64x1xf32>) -> tensor<64x1xf32>
  %ei = tensor.empty() : tensor<64x1xi64>
  %i0 = linalg.fill {pim.name = "softmax.fill_idx"} ins(%zi : i64) outs(%ei : tensor<64x1xi64>) -> tensor<64x1xi64>
  %mx:2 = linalg.generic {indexing_maps = [#id, #row, #row], iterator_types = ["parallel", "reduction"], pim.name = "softmax.max"}
      ins(%sc : tensor<64x64xf32>) outs(%m0, %i0 : tensor<64x1xf32>, tensor<64x1xi64>) {
  ^bb0(%in: f32, %m: f32, %i: i64):
    %j = linalg.index 1 : index
    %ji = arith.index_cast %j : index to i64
    %gt = arith.cmpf ogt, %in, %m : f32
    %nm = arith.select %gt, %in, %m : f32
    %ni = arith.select %gt, %ji, %i : i64
    linalg.yield %nm, %ni : f32, i64
  } -> (tensor<64x1xf32>, tensor<64x1xi64>)
  %e3 = tensor.empty() : tensor<64x64xf32>
  %sub = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"], pim.name = "softmax.sub"}
      ins(%sc, %mx#0 : tensor<64x64xf32>, tensor<64x1xf32>) outs(%e3 : tensor<64x64xf32>) {
  ^bb0(%in: f32, %m: f32, %o: f32):
    %d = arith.subf %in, %m : f32
    linalg.yield %d : f32
  } -> tensor<64x64xf32>
  %e4 = tensor.empty() : tensor<64x64xf32>
  %exp = linalg.generic {indexing_maps = [#id, #id], iterator_types = ["parallel", "parallel"], pim.name = "softmax.exp"}
      ins(%sub : tensor<64x64xf32>) outs(%e4 : tensor<64x64xf32>) {
  ^bb0(%in: f32, %o: f32):
    %x = math.exp %in : f32
    linalg.yield %x : f32
  } -> tensor<64x64xf32>
  %e5 = tensor.empty() : tensor<64x1xf32>
  %s0 = linalg.fill {pim.name = "softmax.fill_sum"} ins(%zero : f32) outs(%e5 : tensor<64x1xf32>) -> tensor<64x1xf32>
  %sum = linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"], pim.name = "softmax.sum"}
      ins(%exp : tensor<64x64xf32>) outs(%s0 : tensor<64x1xf32>) {
  ^bb0(%in: f32, %acc: f32):
    %a = arith.addf %in, %acc : f32
    linalg.yield %a : f32
  } -> tensor<64x1xf32>
  %e6 = tensor.empty() : tensor<64x64xf32>
  %p = linalg.generic {indexing_maps = [#id, #row, #id], iterator_types = ["parallel", "parallel"], pim.name = "softmax.div"}
      ins(%exp, %sum : tensor<64x64xf32>, tensor<64x1xf32>) outs(%e6 : tensor<64x64xf32>) {
  ^bb0(%in: f32, %t: f32, %o: f32):
    %d = arith.divf %in, %t : f32
    linalg.yield %d : f32
  } -> tensor<64x64xf32>
  %e7 = tensor.empty() : tensor<64x64xf32>
  %f1 = linalg.fill {pim.name = "context.fill"} ins(%zero : f32) outs(%e7 : tensor<64x64xf32>) -> tensor<64x64xf32>
  %o = linalg.matmul {pim.name = "context.matmul"} ins(%p, %v : tensor<64x64xf32>, tensor<64x64xf32>) outs(%f1 : tensor<64x64xf32>) -> tensor<64x64xf32>
  return %o : tensor<64x64xf32>
}
