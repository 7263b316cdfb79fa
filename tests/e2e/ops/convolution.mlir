// Convolution, pooling, softmax, matmul variants, calls and extracts in bodies.

func.func @conv_2d_nchw_fchw_strided_dilated() {
  %x = util.unfoldable_constant dense<[[[[-3.0, -2.0, -1.0, 0.0, 1.0, 2.0], [3.0, -3.0, -2.0, -1.0, 0.0, 1.0], [2.0, 3.0, -3.0, -2.0, -1.0, 0.0], [1.0, 2.0, 3.0, -3.0, -2.0, -1.0], [0.0, 1.0, 2.0, 3.0, -3.0, -2.0]], [[-1.0, 0.0, 1.0, 2.0, 3.0, -3.0], [-2.0, -1.0, 0.0, 1.0, 2.0, 3.0], [-3.0, -2.0, -1.0, 0.0, 1.0, 2.0], [3.0, -3.0, -2.0, -1.0, 0.0, 1.0], [2.0, 3.0, -3.0, -2.0, -1.0, 0.0]]]]> : tensor<1x2x5x6xf32>
  %w = util.unfoldable_constant dense<[[[[1.0, -1.0], [0.0, 2.0]], [[0.5, 0.0], [1.0, 1.0]]]]> : tensor<1x2x2x2xf32>
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<1x1x2x4xf32>
  %init = linalg.fill ins(%zero : f32) outs(%e : tensor<1x1x2x4xf32>) -> tensor<1x1x2x4xf32>
  %r = linalg.conv_2d_nchw_fchw {dilations = dense<[1, 2]> : vector<2xi64>, strides = dense<[2, 1]> : vector<2xi64>}
       ins(%x, %w : tensor<1x2x5x6xf32>, tensor<1x2x2x2xf32>) outs(%init : tensor<1x1x2x4xf32>) -> tensor<1x1x2x4xf32>
  check.expect_almost_eq_const(%r, dense<[[[[-8.5, -4.0, 0.5, 5.0], [10.5, -6.0, -8.5, -4.0]]]]> : tensor<1x1x2x4xf32>) : tensor<1x1x2x4xf32>
  return
}

func.func @depthwise_conv_2d_nhwc_hwc_dilated() {
  %x = util.unfoldable_constant dense<[[[[-2.0, -1.0], [0.0, 1.0], [2.0, -2.0]], [[-1.0, 0.0], [1.0, 2.0], [-2.0, -1.0]], [[0.0, 1.0], [2.0, -2.0], [-1.0, 0.0]], [[1.0, 2.0], [-2.0, -1.0], [0.0, 1.0]], [[2.0, -2.0], [-1.0, 0.0], [1.0, 2.0]]]]> : tensor<1x5x3x2xf32>
  %w = util.unfoldable_constant dense<[[[1.0, 2.0], [-1.0, 0.5]], [[0.0, 1.0], [2.0, -1.0]]]> : tensor<2x2x2xf32>
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<1x3x2x2xf32>
  %init = linalg.fill ins(%zero : f32) outs(%e : tensor<1x3x2x2xf32>) -> tensor<1x3x2x2xf32>
  %r = linalg.depthwise_conv_2d_nhwc_hwc {dilations = dense<[2, 1]> : tensor<2xi64>}
       ins(%x, %w : tensor<1x5x3x2xf32>, tensor<2x2x2xf32>) outs(%init : tensor<1x3x2x2xf32>) -> tensor<1x3x2x2xf32>
  check.expect_almost_eq_const(%r, dense<[[[[2.0, 1.5], [-4.0, -1.0]], [[-6.0, 4.0], [3.0, 1.5]], [[-4.0, -1.0], [5.0, -6.0]]]]> : tensor<1x3x2x2xf32>) : tensor<1x3x2x2xf32>
  return
}

func.func @pooling_max_and_sum() {
  %x = util.unfoldable_constant dense<[[[[1.0, 5.0, -2.0, 0.0, 3.0], [4.0, -1.0, 7.0, 2.0, -3.0], [0.0, 6.0, 1.0, -5.0, 2.0], [3.0, -2.0, 8.0, 4.0, 1.0], [-4.0, 2.0, 0.0, 9.0, -1.0]]]]> : tensor<1x1x5x5xf32>
  %ninf = arith.constant 0xFF800000 : f32
  %e = tensor.empty() : tensor<1x1x2x2xf32>
  %init = linalg.fill ins(%ninf : f32) outs(%e : tensor<1x1x2x2xf32>) -> tensor<1x1x2x2xf32>
  %window = tensor.empty() : tensor<3x3xf32>
  %max = linalg.pooling_nchw_max {strides = dense<2> : vector<2xi64>}
       ins(%x, %window : tensor<1x1x5x5xf32>, tensor<3x3xf32>) outs(%init : tensor<1x1x2x2xf32>) -> tensor<1x1x2x2xf32>
  check.expect_almost_eq_const(%max, dense<[[[[7.0, 7.0], [8.0, 9.0]]]]> : tensor<1x1x2x2xf32>) : tensor<1x1x2x2xf32>
  %xs = tensor.collapse_shape %x [[0, 1, 2], [3]] : tensor<1x1x5x5xf32> into tensor<5x5xf32>
  %x_nhwc = tensor.expand_shape %xs [[0, 1], [2, 3]] output_shape [1, 5, 5, 1] : tensor<5x5xf32> into tensor<1x5x5x1xf32>
  %zero = arith.constant 0.0 : f32
  %es = tensor.empty() : tensor<1x4x4x1xf32>
  %sinit = linalg.fill ins(%zero : f32) outs(%es : tensor<1x4x4x1xf32>) -> tensor<1x4x4x1xf32>
  %w2 = tensor.empty() : tensor<2x2xf32>
  %sum = linalg.pooling_nhwc_sum ins(%x_nhwc, %w2 : tensor<1x5x5x1xf32>, tensor<2x2xf32>) outs(%sinit : tensor<1x4x4x1xf32>) -> tensor<1x4x4x1xf32>
  check.expect_almost_eq_const(%sum, dense<[[[[9.0], [9.0], [7.0], [2.0]], [[9.0], [13.0], [5.0], [-4.0]], [[7.0], [13.0], [8.0], [2.0]], [[-1.0], [8.0], [21.0], [13.0]]]]> : tensor<1x4x4x1xf32>) : tensor<1x4x4x1xf32>
  return
}

func.func @softmax_rows() {
  %x = util.unfoldable_constant dense<[[1.0, 2.0, 3.0], [0.0, 0.0, 0.0], [100.0, 100.0, 0xFF800000]]> : tensor<3x3xf32>
  %e = tensor.empty() : tensor<3x3xf32>
  %r = linalg.softmax dimension(1) ins(%x : tensor<3x3xf32>) outs(%e : tensor<3x3xf32>) -> tensor<3x3xf32>
  check.expect_almost_eq_const(%r, dense<[[0.09003057330846786, 0.2447284758090973, 0.6652409434318542], [0.3333333432674408, 0.3333333432674408, 0.3333333432674408], [0.5, 0.5, 0.0]]> : tensor<3x3xf32>) : tensor<3x3xf32>
  return
}

func.func @matmul_transpose_b_and_batch_reduce() {
  %a = util.unfoldable_constant dense<[[1.0, 2.0, 3.0], [4.0, 5.0, 6.0]]> : tensor<2x3xf32>
  %b = util.unfoldable_constant dense<[[1.0, 0.0, -1.0], [2.0, 1.0, 0.0]]> : tensor<2x3xf32>
  %zero = arith.constant 0.0 : f32
  %e = tensor.empty() : tensor<2x2xf32>
  %init = linalg.fill ins(%zero : f32) outs(%e : tensor<2x2xf32>) -> tensor<2x2xf32>
  %mt = linalg.matmul_transpose_b ins(%a, %b : tensor<2x3xf32>, tensor<2x3xf32>) outs(%init : tensor<2x2xf32>) -> tensor<2x2xf32>
  check.expect_almost_eq_const(%mt, dense<[[-2.0, 4.0], [-2.0, 13.0]]> : tensor<2x2xf32>) : tensor<2x2xf32>
  %ba = util.unfoldable_constant dense<[[[1.0, 2.0], [3.0, 4.0]], [[0.0, 1.0], [1.0, 0.0]]]> : tensor<2x2x2xf32>
  %bb = util.unfoldable_constant dense<[[[1.0, 1.0], [0.0, 1.0]], [[2.0, 0.0], [0.0, 3.0]]]> : tensor<2x2x2xf32>
  %one = arith.constant 1.0 : f32
  %ones = linalg.fill ins(%one : f32) outs(%e : tensor<2x2xf32>) -> tensor<2x2xf32>
  %br = linalg.batch_reduce_matmul ins(%ba, %bb : tensor<2x2x2xf32>, tensor<2x2x2xf32>) outs(%ones : tensor<2x2xf32>) -> tensor<2x2xf32>
  check.expect_almost_eq_const(%br, dense<[[2.0, 7.0], [6.0, 8.0]]> : tensor<2x2xf32>) : tensor<2x2xf32>
  return
}

func.func private @reverse(%x: tensor<4xf32>) -> tensor<4xf32> {
  %c3 = arith.constant 3 : index
  %e = tensor.empty() : tensor<4xf32>
  %r = linalg.generic {indexing_maps = [affine_map<(i) -> (i)>], iterator_types = ["parallel"]} outs(%e : tensor<4xf32>) {
  ^bb0(%o: f32):
    %i = linalg.index 0 : index
    %j = arith.subi %c3, %i : index
    %v = tensor.extract %x[%j] : tensor<4xf32>
    linalg.yield %v : f32
  } -> tensor<4xf32>
  return %r : tensor<4xf32>
}

func.func @call_of_a_private_function_with_an_extract() {
  %x = util.unfoldable_constant dense<[1.0, 2.0, 3.0, 4.0]> : tensor<4xf32>
  %r = func.call @reverse(%x) : (tensor<4xf32>) -> tensor<4xf32>
  check.expect_almost_eq_const(%r, dense<[4.0, 3.0, 2.0, 1.0]> : tensor<4xf32>) : tensor<4xf32>
  return
}
