// depthwise_conv: 3x3, stride 1, no padding, NHWC [1x34x34x32] f32, 32 channels (MobileNet-style):
// 1 loop nest -- depthwise_conv_2d_nhwc_hwc, its accumulator's fill folded in (parallel n,h,w,c = 1x32x32x32; reduction 3x3).
func.func @forward(%in: tensor<1x34x34x32xf32>, %f: tensor<3x3x32xf32>) -> tensor<1x32x32x32xf32> {
  %zero = arith.constant 0.000000e+00 : f32
  %e = tensor.empty() : tensor<1x32x32x32xf32>
  %z = linalg.fill ins(%zero : f32) outs(%e : tensor<1x32x32x32xf32>) -> tensor<1x32x32x32xf32>
  %r = linalg.depthwise_conv_2d_nhwc_hwc {dilations = dense<1> : tensor<2xi64>, strides = dense<1> : tensor<2xi64>}
      ins(%in, %f : tensor<1x34x34x32xf32>, tensor<3x3x32xf32>) outs(%z : tensor<1x32x32x32xf32>) -> tensor<1x32x32x32xf32>
  return %r : tensor<1x32x32x32xf32>
}
