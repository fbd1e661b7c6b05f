// One GEMV y = x W, W [1024x1024] f32, with the weight stored both ways: [in, out] (what
// torch.onnx.export writes for nn.Linear as MatMul: the reduction's index is W's first) and
// [out, in] (Gemm with transB).  The host code reads each weight with unit stride in its
// innermost loop, so both run at memory speed: neither is much slower than the other.
#x = affine_map<(m, n, k) -> (m, k)>
#w_in_out = affine_map<(m, n, k) -> (k, n)>
#w_out_in = affine_map<(m, n, k) -> (n, k)>
#y = affine_map<(m, n, k) -> (m, n)>
func.func @forward(%x: tensor<1x1024xf32>, %wa: tensor<1024x1024xf32>, %wb: tensor<1024x1024xf32>)
    -> (tensor<1x1024xf32>, tensor<1x1024xf32>) {
  %zero = arith.constant 0.000000e+00 : f32
  %e = tensor.empty() : tensor<1x1024xf32>
  %fa = linalg.fill ins(%zero : f32) outs(%e : tensor<1x1024xf32>) -> tensor<1x1024xf32>
  %ya = linalg.generic {indexing_maps = [#x, #w_in_out, #y], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%x, %wa : tensor<1x1024xf32>, tensor<1024x1024xf32>) outs(%fa : tensor<1x1024xf32>) {
  ^bb0(%p: f32, %q: f32, %c: f32):
    %m = arith.mulf %p, %q : f32
    %s = arith.addf %c, %m : f32
    linalg.yield %s : f32
  } -> tensor<1x1024xf32>
  %e2 = tensor.empty() : tensor<1x1024xf32>
  %fb = linalg.fill ins(%zero : f32) outs(%e2 : tensor<1x1024xf32>) -> tensor<1x1024xf32>
  %yb = linalg.generic {indexing_maps = [#x, #w_out_in, #y], iterator_types = ["parallel", "parallel", "reduction"]}
      ins(%x, %wb : tensor<1x1024xf32>, tensor<1024x1024xf32>) outs(%fb : tensor<1x1024xf32>) {
  ^bb0(%p: f32, %q: f32, %c: f32):
    %m = arith.mulf %p, %q : f32
    %s = arith.addf %c, %m : f32
    linalg.yield %s : f32
  } -> tensor<1x1024xf32>
  return %ya, %yb : tensor<1x1024xf32>, tensor<1x1024xf32>
}
