// A padded convolution as Torch-MLIR emits it (tensor.pad, then the conv): bufferization turns
// the pad into a nest of its own (a linalg.map writing the padding value, then a copy of the
// input into the interior), named after tensor.pad.  2 nests: pad, conv (its fill in it).
func.func @forward(%x: tensor<1x8x8x4xf32>, %f: tensor<3x3x4xf32>) -> tensor<1x8x8x4xf32> {
  %z = arith.constant 0.000000e+00 : f32
  %p = tensor.pad %x low[0, 1, 1, 0] high[0, 1, 1, 0] {
  ^bb0(%a: index, %b: index, %c: index, %d: index):
    tensor.yield %z : f32
  } : tensor<1x8x8x4xf32> to tensor<1x10x10x4xf32>
  %e = tensor.empty() : tensor<1x8x8x4xf32>
  %o = linalg.fill ins(%z : f32) outs(%e : tensor<1x8x8x4xf32>) -> tensor<1x8x8x4xf32>
  %r = linalg.depthwise_conv_2d_nhwc_hwc {dilations = dense<1> : tensor<2xi64>, strides = dense<1> : tensor<2xi64>}
      ins(%p, %f : tensor<1x10x10x4xf32>, tensor<3x3x4xf32>) outs(%o : tensor<1x8x8x4xf32>) -> tensor<1x8x8x4xf32>
  return %r : tensor<1x8x8x4xf32>
}
