// mlp: two linear layers with a ReLU between them at batch 1 (thin GEMMs),
//   h = relu(x W1 + b1), y = h W2 + b2,  x [1x256], W1 [256x1024], W2 [1024x256] f32.
// The weights are arguments, the biases constants (memref.globals after bufferization).
// 4 loop nests: matmul, bias+relu, matmul, bias (each matmul's zero fill folded into its nest).
#id = affine_map<(d0, d1) -> (d0, d1)>
#col = affine_map<(d0, d1) -> (d1)>
func.func @forward(%x: tensor<1x256xf32>, %w1: tensor<256x1024xf32>, %w2: tensor<1024x256xf32>) -> tensor<1x256xf32> {
  %b1 = arith.constant dense<1.000000e-02> : tensor<1024xf32>
  %b2 = arith.constant dense<-1.000000e-02> : tensor<256xf32>
  %zero = arith.constant 0.000000e+00 : f32
  %e0 = tensor.empty() : tensor<1x1024xf32>
  %f0 = linalg.fill {pim.name = "fc1.fill"} ins(%zero : f32) outs(%e0 : tensor<1x1024xf32>) -> tensor<1x1024xf32>
  %m0 = linalg.matmul {pim.name = "fc1.matmul"} ins(%x, %w1 : tensor<1x256xf32>, tensor<256x1024xf32>) outs(%f0 : tensor<1x1024xf32>) -> tensor<1x1024xf32>
  %e1 = tensor.empty() : tensor<1x1024xf32>
  %h = linalg.generic {indexing_maps = [#id, #col, #id], iterator_types = ["parallel", "parallel"], pim.name = "fc1.bias_relu"}
      ins(%m0, %b1 : tensor<1x1024xf32>, tensor<1024xf32>) outs(%e1 : tensor<1x1024xf32>) {
  ^bb0(%in: f32, %b: f32, %o: f32):
    %s = arith.addf %in, %b : f32
    %r = arith.maximumf %s, %zero : f32
    linalg.yield %r : f32
  } -> tensor<1x1024xf32>
  %e2 = tensor.empty() : tensor<1x256xf32>
  %f1 = linalg.fill {pim.name = "fc2.fill"} ins(%zero : f32) outs(%e2 : tensor<1x256xf32>) -> tensor<1x256xf32>
  %m1 = linalg.matmul {pim.name = "fc2.matmul"} ins(%h, %w2 : tensor<1x1024xf32>, tensor<1024x256xf32>) outs(%f1 : tensor<1x256xf32>) -> tensor<1x256xf32>
  %e3 = tensor.empty() : tensor<1x256xf32>
  %y = linalg.generic {indexing_maps = [#id, #col, #id], iterator_types = ["parallel", "parallel"], pim.name = "fc2.bias"}
      ins(%m1, %b2 : tensor<1x256xf32>, tensor<256xf32>) outs(%e3 : tensor<1x256xf32>) {
  ^bb0(%in: f32, %b: f32, %o: f32):
    %s = arith.addf %in, %b : f32
    linalg.yield %s : f32
  } -> tensor<1x256xf32>
  return %y : tensor<1x256xf32>
}
