// Locations as the ONNX importer gives them: every op made for node NODE of type TYPE is at
// loc("NODE"("TYPE")).  The MatMul node makes two nests (the matmul, its accumulator's fill folded
// in, and a scaling), one operator; the
// Add node one; the Relu node's op is reached through an inlined call (a CallSiteLoc) and the
// Mul node's through a FusedLoc with a file location.  The last op has a plain location.
#map = affine_map<(d0, d1) -> (d0, d1)>
func.func private @relu(%x: tensor<1x32xf32>) -> tensor<1x32xf32> {
  %zero = arith.constant 0.000000e+00 : f32 loc(#relu)
  %e = tensor.empty() : tensor<1x32xf32> loc(#relu)
  %r = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel"]}
      ins(%x : tensor<1x32xf32>) outs(%e : tensor<1x32xf32>) {
  ^bb0(%a: f32, %o: f32):
    %m = arith.maximumf %a, %zero : f32
    linalg.yield %m : f32
  } -> tensor<1x32xf32> loc(#relu)
  return %r : tensor<1x32xf32>
}
func.func @forward(%x: tensor<1x64xf32>, %w: tensor<64x32xf32>, %b: tensor<1x32xf32>)
    -> tensor<1x32xf32> {
  %zero = arith.constant 0.000000e+00 : f32 loc(#mm)
  %e = tensor.empty() : tensor<1x32xf32> loc(#mm)
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<1x32xf32>) -> tensor<1x32xf32> loc(#mm)
  %m = linalg.matmul ins(%x, %w : tensor<1x64xf32>, tensor<64x32xf32>)
      outs(%z : tensor<1x32xf32>) -> tensor<1x32xf32> loc(#mm)
  %half = arith.constant 5.000000e-01 : f32 loc(#mm)
  %e1 = tensor.empty() : tensor<1x32xf32> loc(#mm)
  %ms = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel"]}
      ins(%m : tensor<1x32xf32>) outs(%e1 : tensor<1x32xf32>) {
  ^bb0(%p: f32, %o: f32):
    %v = arith.mulf %p, %half : f32
    linalg.yield %v : f32
  } -> tensor<1x32xf32> loc(#mm)
  %e2 = tensor.empty() : tensor<1x32xf32> loc(#add)
  %s = linalg.generic {indexing_maps = [#map, #map, #map], iterator_types = ["parallel", "parallel"]}
      ins(%ms, %b : tensor<1x32xf32>, tensor<1x32xf32>) outs(%e2 : tensor<1x32xf32>) {
  ^bb0(%p: f32, %q: f32, %o: f32):
    %v = arith.addf %p, %q : f32
    linalg.yield %v : f32
  } -> tensor<1x32xf32> loc(#add)
  %r = func.call @relu(%s) : (tensor<1x32xf32>) -> tensor<1x32xf32>
  %e3 = tensor.empty() : tensor<1x32xf32>
  %t = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel"]}
      ins(%r : tensor<1x32xf32>) outs(%e3 : tensor<1x32xf32>) {
  ^bb0(%p: f32, %o: f32):
    %v = arith.mulf %p, %p : f32
    linalg.yield %v : f32
  } -> tensor<1x32xf32> loc(fused["exported.py":7:3, "/h.0/mlp/Mul"("Mul")])
  %e4 = tensor.empty() : tensor<1x32xf32>
  %u = linalg.generic {indexing_maps = [#map, #map], iterator_types = ["parallel", "parallel"]}
      ins(%t : tensor<1x32xf32>) outs(%e4 : tensor<1x32xf32>) {
  ^bb0(%p: f32, %o: f32):
    %v = arith.negf %p : f32
    linalg.yield %v : f32
  } -> tensor<1x32xf32>
  return %u : tensor<1x32xf32>
}
#mm = loc("/h.0/attn/MatMul"("MatMul"))
#add = loc("/h.0/attn/Add"("Add"))
#relu = loc("/h.0/mlp/Relu"("Relu"))
