// Refused: a call to a function without a body (nothing to inline).
func.func private @external(tensor<8xf32>) -> tensor<8xf32>
func.func @forward(%x: tensor<8xf32>) -> tensor<8xf32> {
  %y = func.call @external(%x) : (tensor<8xf32>) -> tensor<8xf32>
  return %y : tensor<8xf32>
}
