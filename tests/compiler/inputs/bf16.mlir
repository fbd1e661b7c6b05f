// bf16 arithmetic (a matmul accumulating in bf16, then an add and an exp): x86 has no bf16
// instructions and Debian 12's libgcc has no __truncsfbf2, so the library must do the
// arithmetic in f32 and round with integer operations.  Small integers stay exact in bf16:
// with a = 1, b[k][j] = (k + j) % 3 and c = 0.5, out = exp(0) * (sum_k b[k][j] + 0.5).
#map = affine_map<(d0, d1) -> (d0, d1)>
func.func @forward(%a: tensor<16x32xbf16>, %b: tensor<32x8xbf16>, %c: tensor<16x8xbf16>)
    -> tensor<16x8xbf16> {
  %zero = arith.constant 0.000000e+00 : bf16
  %e = tensor.empty() : tensor<16x8xbf16>
  %z = linalg.fill ins(%zero : bf16) outs(%e : tensor<16x8xbf16>) -> tensor<16x8xbf16>
  %m = linalg.matmul ins(%a, %b : tensor<16x32xbf16>, tensor<32x8xbf16>)
      outs(%z : tensor<16x8xbf16>) -> tensor<16x8xbf16>
  %e2 = tensor.empty() : tensor<16x8xbf16>
  %r = linalg.generic {indexing_maps = [#map, #map, #map], iterator_types = ["parallel", "parallel"]}
      ins(%m, %c : tensor<16x8xbf16>, tensor<16x8xbf16>) outs(%e2 : tensor<16x8xbf16>) {
  ^bb0(%x: bf16, %y: bf16, %o: bf16):
    %s = arith.addf %x, %y : bf16
    %one = math.exp %zero : bf16
    %p = arith.mulf %s, %one : bf16
    linalg.yield %p : bf16
  } -> tensor<16x8xbf16>
  return %r : tensor<16x8xbf16>
}
