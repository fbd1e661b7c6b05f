// nn.Linear as torch.onnx.export writes it: a GEMV into a zero-filled accumulator, then a bias
// add.  y1's product has no other reader, so its accumulator starts from the bias and the add
// is no nest of its own (one region); y2's product is also a result of the function, so its
// add stays a nest (two regions).
#x = affine_map<(m, n, k) -> (m, k)>
#w = affine_map<(m, n, k) -> (k, n)>
#y = affine_map<(m, n, k) -> (m, n)>
#id = affine_map<(m, n) -> (m, n)>
#bias = affine_map<(m, n) -> (n)>
func.func @forward(%x: tensor<1x64xf32>, %w1: tensor<64x32xf32>, %w2: tensor<64x32xf32>, %b: tensor<32xf32>)
    -> (tensor<1x32xf32>, tensor<1x32xf32>, tensor<1x32xf32>) {
  %zero = arith.constant 0.000000e+00 : f32
  %e = tensor.empty() : tensor<1x32xf32>
  %f1 = linalg.fill ins(%zero : f32) outs(%e : tensor<1x32xf32>) -> tensor<1x32xf32>
  %p1 = linalg.generic {indexing_maps = [#x, #w, #y], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%x, %w1 : tensor<1x64xf32>, tensor<64x32xf32>) outs(%f1 : tensor<1x32xf32>) {
  ^bb0(%p: f32, %q: f32, %c: f32):
    %m = arith.mulf %p, %q : f32
    %s = arith.addf %c, %m : f32
    linalg.yield %s : f32
  } -> tensor<1x32xf32>
  %e1 = tensor.empty() : tensor<1x32xf32>
  %y1 = linalg.generic {indexing_maps = [#bias, #id, #id], iterator_types = ["parallel", "parallel"]}
      ins(%b, %p1 : tensor<32xf32>, tensor<1x32xf32>) outs(%e1 : tensor<1x32xf32>) {
  ^bb0(%u: f32, %v: f32, %o: f32):
    %s = arith.addf %u, %v : f32
    linalg.yield %s : f32
  } -> tensor<1x32xf32>
  %e2 = tensor.empty() : tensor<1x32xf32>
  %f2 = linalg.fill ins(%zero : f32) outs(%e2 : tensor<1x32xf32>) -> tensor<1x32xf32>
  %p2 = linalg.generic {indexing_maps = [#x, #w, #y], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%x, %w2 : tensor<1x64xf32>, tensor<64x32xf32>) outs(%f2 : tensor<1x32xf32>) {
  ^bb0(%p: f32, %q: f32, %c: f32):
    %m = arith.mulf %p, %q : f32
    %s = arith.addf %c, %m : f32
    linalg.yield %s : f32
  } -> tensor<1x32xf32>
  %e3 = tensor.empty() : tensor<1x32xf32>
  %y2 = linalg.generic {indexing_maps = [#id, #bias, #id], iterator_types = ["parallel", "parallel"]}
      ins(%p2, %b : tensor<1x32xf32>, tensor<32xf32>) outs(%e3 : tensor<1x32xf32>) {
  ^bb0(%u: f32, %v: f32, %o: f32):
    %s = arith.addf %u, %v : f32
    linalg.yield %s : f32
  } -> tensor<1x32xf32>
  return %y1, %y2, %p2 : tensor<1x32xf32>, tensor<1x32xf32>, tensor<1x32xf32>
}
