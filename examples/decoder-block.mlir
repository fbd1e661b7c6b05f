// decoder-block: one LLaMA/GPT-J-shaped transformer decoder block, one decode step at batch 1
// (the thin GEMMs [1x256] x [256xN] that make such models memory-bound), f32:
//   hidden 256, 4 heads x 64, a KV cache of 64 positions per head, SwiGLU FFN of 688,
//   RMSNorm with constant weights (ones, folded into the scaling nests' payloads).
// The new token's K and V would be appended to the cache; the block attends over the cache as
// given (the cache update is a copy, not a loop nest).
// 17 loop nests, in program order (fills are the first step of their nests; the scaling of the
//    0- 1 rms1 (sum of squares, scale)            scores is fused into softmax's max, the
//    2    qkv (matmul 1x256x768)                  first residual add into the nests reading it):
//    3    scores (q.K per head)                    4- 7 softmax over the cache (4 nests)
//    8    context (p.V per head)                   9    out projection (matmul)
//   10-11 rms2 (x + out computed again in each)   12-13 gate and up projections
//   14    silu(gate) * up                         15    down projection     16 residual add
#id2 = affine_map<(d0, d1) -> (d0, d1)>
#row2 = affine_map<(d0, d1) -> (d0)>
#col2 = affine_map<(d0, d1) -> (d1)>
#hd = affine_map<(h, t, d) -> (h, d)>
#htd = affine_map<(h, t, d) -> (h, t, d)>
#ht = affine_map<(h, t, d) -> (h, t)>
#c_p = affine_map<(h, d, t) -> (h, t)>
#c_v = affine_map<(h, d, t) -> (h, t, d)>
#c_o = affine_map<(h, d, t) -> (h, d)>
func.func @forward(%x: tensor<1x256xf32>, %w_qkv: tensor<256x768xf32>,
                   %k_cache: tensor<4x64x64xf32>, %v_cache: tensor<4x64x64xf32>,
                   %w_o: tensor<256x256xf32>, %w_gate: tensor<256x688xf32>,
                   %w_up: tensor<256x688xf32>, %w_down: tensor<688x256xf32>) -> tensor<1x256xf32> {
  %g1 = arith.constant dense<1.000000e+00> : tensor<256xf32>
  %g2 = arith.constant dense<1.000000e+00> : tensor<256xf32>
  %zero = arith.constant 0.000000e+00 : f32
  %one = arith.constant 1.000000e+00 : f32
  %ninf = arith.constant 0xFF800000 : f32
  %n = arith.constant 2.560000e+02 : f32
  %eps = arith.constant 9.99999997E-7 : f32
  %scale = arith.constant 1.250000e-01 : f32

  // ---- attention RMSNorm
  %e0 = tensor.empty() : tensor<1xf32>
  %ss0 = linalg.fill {pim.name = "rms1.fill"} ins(%zero : f32) outs(%e0 : tensor<1xf32>) -> tensor<1xf32>
  %ss = linalg.generic {indexing_maps = [#id2, #row2], iterator_types = ["parallel", "reduction"], pim.name = "rms1.sumsq"}
      ins(%x : tensor<1x256xf32>) outs(%ss0 : tensor<1xf32>) {
  ^bb0(%in: f32, %acc: f32):
    %sq = arith.mulf %in, %in : f32
    %a = arith.addf %sq, %acc : f32
    linalg.yield %a : f32
  } -> tensor<1xf32>
  %e1 = tensor.empty() : tensor<1x256xf32>
  %xn = linalg.generic {indexing_maps = [#id2, #row2, #col2, #id2], iterator_types = ["parallel", "parallel"], pim.name = "rms1.scale"}
      ins(%x, %ss, %g1 : tensor<1x256xf32>, tensor<1xf32>, tensor<256xf32>) outs(%e1 : tensor<1x256xf32>) {
  ^bb0(%in: f32, %s: f32, %g: f32, %o: f32):
    %m = arith.divf %s, %n : f32
    %p = arith.addf %m, %eps : f32
    %r = math.rsqrt %p : f32
    %v = arith.mulf %in, %r : f32
    %v2 = arith.mulf %v, %g : f32
    linalg.yield %v2 : f32
  } -> tensor<1x256xf32>

  // ---- QKV projection; q is the first 256 columns, viewed as 4 heads x 64
  %e2 = tensor.empty() : tensor<1x768xf32>
  %qkv0 = linalg.fill {pim.name = "qkv.fill"} ins(%zero : f32) outs(%e2 : tensor<1x768xf32>) -> tensor<1x768xf32>
  %qkv = linalg.matmul {pim.name = "qkv.matmul"} ins(%xn, %w_qkv : tensor<1x256xf32>, tensor<256x768xf32>) outs(%qkv0 : tensor<1x768xf32>) -> tensor<1x768xf32>
  %q = tensor.extract_slice %qkv[0, 0] [1, 256] [1, 1] : tensor<1x768xf32> to tensor<256xf32>
  %q4 = tensor.expand_shape %q [[0, 1]] output_shape [4, 64] : tensor<256xf32> into tensor<4x64xf32>

  // ---- scores[h, t] = q[h, :] . K[h, t, :] / sqrt(64)
  %e3 = tensor.empty() : tensor<4x64xf32>
  %s0 = linalg.fill {pim.name = "scores.fill"} ins(%zero : f32) outs(%e3 : tensor<4x64xf32>) -> tensor<4x64xf32>
  %s = linalg.generic {indexing_maps = [#hd, #htd, #ht], iterator_types = ["parallel", "parallel", "reduction"], pim.name = "scores.qk"}
      ins(%q4, %k_cache : tensor<4x64xf32>, tensor<4x64x64xf32>) outs(%s0 : tensor<4x64xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %p = arith.mulf %a, %b : f32
    %r = arith.addf %acc, %p : f32
    linalg.yield %r : f32
  } -> tensor<4x64xf32>
  %e4 = tensor.empty() : tensor<4x64xf32>
  %sc = linalg.generic {indexing_maps = [#id2, #id2], iterator_types = ["parallel", "parallel"], pim.name = "scores.scale"}
      ins(%s : tensor<4x64xf32>) outs(%e4 : tensor<4x64xf32>) {
  ^bb0(%in: f32, %o: f32):
    %r = arith.mulf %in, %scale : f32
    linalg.yield %r : f32
  } -> tensor<4x64xf32>

  // ---- softmax over the cache positions
  %e5 = tensor.empty() : tensor<4xf32>
  %m0 = linalg.fill {pim.name = "softmax.fill_max"} ins(%ninf : f32) outs(%e5 : tensor<4xf32>) -> tensor<4xf32>
  %mx = linalg.generic {indexing_maps = [#id2, #row2], iterator_types = ["parallel", "reduction"], pim.name = "softmax.max"}
      ins(%sc : tensor<4x64xf32>) outs(%m0 : tensor<4xf32>) {
  ^bb0(%in: f32, %m: f32):
    %r = arith.maximumf %in, %m : f32
    linalg.yield %r : f32
  } -> tensor<4xf32>
  %e6 = tensor.empty() : tensor<4x64xf32>
  %ex = linalg.generic {indexing_maps = [#id2, #row2, #id2], iterator_types = ["parallel", "parallel"], pim.name = "softmax.exp"}
      ins(%sc, %mx : tensor<4x64xf32>, tensor<4xf32>) outs(%e6 : tensor<4x64xf32>) {
  ^bb0(%in: f32, %m: f32, %o: f32):
    %d = arith.subf %in, %m : f32
    %r = math.exp %d : f32
    linalg.yield %r : f32
  } -> tensor<4x64xf32>
  %e7 = tensor.empty() : tensor<4xf32>
  %z0 = linalg.fill {pim.name = "softmax.fill_sum"} ins(%zero : f32) outs(%e7 : tensor<4xf32>) -> tensor<4xf32>
  %sum = linalg.generic {indexing_maps = [#id2, #row2], iterator_types = ["parallel", "reduction"], pim.name = "softmax.sum"}
      ins(%ex : tensor<4x64xf32>) outs(%z0 : tensor<4xf32>) {
  ^bb0(%in: f32, %acc: f32):
    %r = arith.addf %in, %acc : f32
    linalg.yield %r : f32
  } -> tensor<4xf32>
  %e8 = tensor.empty() : tensor<4x64xf32>
  %p = linalg.generic {indexing_maps = [#id2, #row2, #id2], iterator_types = ["parallel", "parallel"], pim.name = "softmax.div"}
      ins(%ex, %sum : tensor<4x64xf32>, tensor<4xf32>) outs(%e8 : tensor<4x64xf32>) {
  ^bb0(%in: f32, %t: f32, %o: f32):
    %r = arith.divf %in, %t : f32
    linalg.yield %r : f32
  } -> tensor<4x64xf32>

  // ---- context[h, d] = sum_t p[h, t] V[h, t, d], back to [1x256]
  %e9 = tensor.empty() : tensor<4x64xf32>
  %c0 = linalg.fill {pim.name = "context.fill"} ins(%zero : f32) outs(%e9 : tensor<4x64xf32>) -> tensor<4x64xf32>
  %ctx = linalg.generic {indexing_maps = [#c_p, #c_v, #c_o], iterator_types = ["parallel", "parallel", "reduction"], pim.name = "context.pv"}
      ins(%p, %v_cache : tensor<4x64xf32>, tensor<4x64x64xf32>) outs(%c0 : tensor<4x64xf32>) {
  ^bb0(%a: f32, %b: f32, %acc: f32):
    %m = arith.mulf %a, %b : f32
    %r = arith.addf %acc, %m : f32
    linalg.yield %r : f32
  } -> tensor<4x64xf32>
  %ctx1 = tensor.collapse_shape %ctx [[0, 1]] : tensor<4x64xf32> into tensor<256xf32>
  %ctx2 = tensor.expand_shape %ctx1 [[0, 1]] output_shape [1, 256] : tensor<256xf32> into tensor<1x256xf32>

  // ---- output projection and residual
  %e10 = tensor.empty() : tensor<1x256xf32>
  %o0 = linalg.fill {pim.name = "out.fill"} ins(%zero : f32) outs(%e10 : tensor<1x256xf32>) -> tensor<1x256xf32>
  %o = linalg.matmul {pim.name = "out.matmul"} ins(%ctx2, %w_o : tensor<1x256xf32>, tensor<256x256xf32>) outs(%o0 : tensor<1x256xf32>) -> tensor<1x256xf32>
  %e11 = tensor.empty() : tensor<1x256xf32>
  %h1 = linalg.generic {indexing_maps = [#id2, #id2, #id2], iterator_types = ["parallel", "parallel"], pim.name = "residual1"}
      ins(%x, %o : tensor<1x256xf32>, tensor<1x256xf32>) outs(%e11 : tensor<1x256xf32>) {
  ^bb0(%a: f32, %b: f32, %out: f32):
    %r = arith.addf %a, %b : f32
    linalg.yield %r : f32
  } -> tensor<1x256xf32>

  // ---- FFN RMSNorm
  %e12 = tensor.empty() : tensor<1xf32>
  %tt0 = linalg.fill {pim.name = "rms2.fill"} ins(%zero : f32) outs(%e12 : tensor<1xf32>) -> tensor<1xf32>
  %tt = linalg.generic {indexing_maps = [#id2, #row2], iterator_types = ["parallel", "reduction"], pim.name = "rms2.sumsq"}
      ins(%h1 : tensor<1x256xf32>) outs(%tt0 : tensor<1xf32>) {
  ^bb0(%in: f32, %acc: f32):
    %sq = arith.mulf %in, %in : f32
    %a = arith.addf %sq, %acc : f32
    linalg.yield %a : f32
  } -> tensor<1xf32>
  %e13 = tensor.empty() : tensor<1x256xf32>
  %hn = linalg.generic {indexing_maps = [#id2, #row2, #col2, #id2], iterator_types = ["parallel", "parallel"], pim.name = "rms2.scale"}
      ins(%h1, %tt, %g2 : tensor<1x256xf32>, tensor<1xf32>, tensor<256xf32>) outs(%e13 : tensor<1x256xf32>) {
  ^bb0(%in: f32, %t: f32, %g: f32, %out: f32):
    %m = arith.divf %t, %n : f32
    %pp = arith.addf %m, %eps : f32
    %r = math.rsqrt %pp : f32
    %v = arith.mulf %in, %r : f32
    %v2 = arith.mulf %v, %g : f32
    linalg.yield %v2 : f32
  } -> tensor<1x256xf32>

  // ---- SwiGLU FFN
  %e14 = tensor.empty() : tensor<1x688xf32>
  %gt0 = linalg.fill {pim.name = "gate.fill"} ins(%zero : f32) outs(%e14 : tensor<1x688xf32>) -> tensor<1x688xf32>
  %gate = linalg.matmul {pim.name = "gate.matmul"} ins(%hn, %w_gate : tensor<1x256xf32>, tensor<256x688xf32>) outs(%gt0 : tensor<1x688xf32>) -> tensor<1x688xf32>
  %e15 = tensor.empty() : tensor<1x688xf32>
  %up0 = linalg.fill {pim.name = "up.fill"} ins(%zero : f32) outs(%e15 : tensor<1x688xf32>) -> tensor<1x688xf32>
  %up = linalg.matmul {pim.name = "up.matmul"} ins(%hn, %w_up : tensor<1x256xf32>, tensor<256x688xf32>) outs(%up0 : tensor<1x688xf32>) -> tensor<1x688xf32>
  %e16 = tensor.empty() : tensor<1x688xf32>
  %act = linalg.generic {indexing_maps = [#id2, #id2, #id2], iterator_types = ["parallel", "parallel"], pim.name = "swiglu"}
      ins(%gate, %up : tensor<1x688xf32>, tensor<1x688xf32>) outs(%e16 : tensor<1x688xf32>) {
  ^bb0(%g: f32, %u: f32, %out: f32):
    %ng = arith.negf %g : f32
    %en = math.exp %ng : f32
    %den = arith.addf %en, %one : f32
    %sg = arith.divf %g, %den : f32
    %r = arith.mulf %sg, %u : f32
    linalg.yield %r : f32
  } -> tensor<1x688xf32>
  %e17 = tensor.empty() : tensor<1x256xf32>
  %dn0 = linalg.fill {pim.name = "down.fill"} ins(%zero : f32) outs(%e17 : tensor<1x256xf32>) -> tensor<1x256xf32>
  %dn = linalg.matmul {pim.name = "down.matmul"} ins(%act, %w_down : tensor<1x688xf32>, tensor<688x256xf32>) outs(%dn0 : tensor<1x256xf32>) -> tensor<1x256xf32>
  %e18 = tensor.empty() : tensor<1x256xf32>
  %y = linalg.generic {indexing_maps = [#id2, #id2, #id2], iterator_types = ["parallel", "parallel"], pim.name = "residual2"}
      ins(%h1, %dn : tensor<1x256xf32>, tensor<1x256xf32>) outs(%e18 : tensor<1x256xf32>) {
  ^bb0(%a: f32, %b: f32, %out: f32):
    %r = arith.addf %a, %b : f32
    linalg.yield %r : f32
  } -> tensor<1x256xf32>
  return %y : tensor<1x256xf32>
}
