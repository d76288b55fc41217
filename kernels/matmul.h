// Matmul family: batched GEMM with transpose flags and broadcast batch dims, plus the column
// sum that linear's bias gradient needs. The GEMM signature mirrors BLAS/cuBLAS
// (out = alpha * op(a) @ op(b) + beta * out) so the CUDA backend can map it onto
// cublasGemmStridedBatched without reshuffling arguments.
// Implementations: kernels/ref/matmul.h (double-accumulating loops), kernels/cpu/matmul.h (Eigen).
#pragma once

#include <cstdint>
#include <vector>

#include "core/tensor.h"

namespace define::kernels {

// out[..., M, N] = alpha * op(a)[..., M, K] @ op(b)[..., K, N] + beta * out, where op(t)
// swaps t's last two dims when its flag is set. a and b have rank >= 2 and batch dims that
// broadcast to out's batch dims. beta == 0 overwrites out (whatever it held, NaN included).
// out must not overlap a or b, nor itself (no stride-0 dims).
void gemm(const Tensor& a, const Tensor& b, const Tensor& out, bool trans_a, bool trans_b,
          double alpha = 1.0, double beta = 0.0);

// A fresh op(a) @ op(b), batch dims broadcast: shape [broadcast batch..., M, N].
Tensor matmul(const Tensor& a, const Tensor& b, bool trans_a = false, bool trans_b = false);

// Sum over rows: x [R, N] -> [N] (the bias gradient of linear). R == 0 gives zeros.
Tensor column_sum(const Tensor& x);

// Where the matrices of one batched GEMM operand live, with transposition and batch
// broadcasting folded into strides (shared by every backend): matrix `b` of the batch starts
// at element batch_offsets[b] from data(), and its element (i, j) sits at
// i * row_stride + j * col_stride from there.
struct BatchedMatrix {
  std::int64_t rows = 0, cols = 0;
  std::int64_t row_stride = 0, col_stride = 0;
  std::vector<std::int64_t> batch_offsets;
};
// op(t) for t [..., r, c] (trans: [..., c, r]), its batch dims broadcast to batch_shape.
BatchedMatrix batched_matrix(const Tensor& t, bool trans, const Shape& batch_shape);

}  // namespace define::kernels
