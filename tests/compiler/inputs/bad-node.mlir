// A refused op that has only a framework operator's location: the message names the node.
func.func @forward(%x: tensor<4x128xf32>) -> tensor<4x128xf32> {
  %e = tensor.empty() : tensor<4x128xf32> loc(#sm)
  %r = linalg.softmax dimension(1) ins(%x : tensor<4x128xf32>) outs(%e : tensor<4x128xf32>)
      -> tensor<4x128xf32> loc(#sm)
  return %r : tensor<4x128xf32>
}
#sm = loc("/h.0/attn/Softmax"("Softmax"))
