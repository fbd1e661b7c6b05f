// A max reduction over the rows of [8x512] f32 (softmax's first nest): the host code lowers
// arith.maximumf to llvm.maximum, which vectorises; a NaN in a row still makes its maximum NaN
// and -0 < +0.
#id = affine_map<(d0, d1) -> (d0, d1)>
#row = affine_map<(d0, d1) -> (d0)>
func.func @forward(%x: tensor<8x512xf32>) -> tensor<8xf32> {
  %ninf = arith.constant 0xFF800000 : f32
  %e = tensor.empty() : tensor<8xf32>
  %f = linalg.fill ins(%ninf : f32) outs(%e : tensor<8xf32>) -> tensor<8xf32>
  %m = linalg.generic {indexing_maps = [#id, #row], iterator_types = ["parallel", "reduction"]}
      ins(%x : tensor<8x512xf32>) outs(%f : tensor<8xf32>) {
  ^bb0(%a: f32, %o: f32):
    %v = arith.maximumf %o, %a : f32
    linalg.yield %v : f32
  } -> tensor<8xf32>
  return %m : tensor<8xf32>
}
