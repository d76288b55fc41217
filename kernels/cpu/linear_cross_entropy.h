// The output layer of a classifier with its loss, fused on the CPU: logits = x W^T + b and the
// cross entropy of each row (kernels/softmax.h's definition, label smoothing included), forward
// and backward, with the [rows, classes] logits crossed as few times as the GEMMs allow.
//
// Why: a language model's output layer is its largest tensor (PTB's LSTM: 700 rows x 10,000
// classes = 28 MB a step) and, composed of generic ops, it crosses memory about eight times: the
// bias broadcast, the GEMM's read and write of C, the row maximum, the row sums, the gradient's
// read and write, each backward GEMM's packing of it and the bias's column sums. Here the forward
// adds the bias and takes each row's statistics in one pass after the GEMM, and the backward never
// builds the [rows, classes] gradient at all: it is formed tile by tile in a per-thread buffer
// small enough for L2, from the forward's saved exponentials read once (the forward keeps each
// row's exp(logit - max), which it computes for the row's sum anyway, so the backward multiplies
// instead of taking an exponential per element), and each tile feeds dW's rows of its
// classes, db, and its share of dx (linear_cross_entropy.cpp says how the work is cut).
//
// Results equal the composed ops up to float rounding (tests/ops/linear_cross_entropy_test.cpp
// checks both against the float64 reference). They do not depend on the thread count, except dx:
// it is the sum of the threads' partial products (one per thread, added in thread order), so the
// same thread count gives the same bits, as an OpenMP reduction would.
#pragma once

#include <cstdint>

#include "core/tensor.h"

namespace define::kernels::cpu {

// x [N, in], weight [V, in], bias [V] or undefined, target [N] (int32/int64), all contiguous on
// the CPU and validated (targets in range or ignore_index). Writes saved [N, V] (each row's
// exp(logit - row_max); an ignored row keeps its logits), row_max [N] (0 on ignored rows), loss [N]
// (0 on ignored rows), lse [N] (log sum exp of each row; 0 on ignored rows) and, when defined,
// nll [N] (the loss without label smoothing).
void linear_cross_entropy_rows(const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& target,
                               const Tensor& saved, const Tensor& row_max, const Tensor& loss, const Tensor& lse,
                               const Tensor& nll, std::int64_t ignore_index, double label_smoothing);

// Gradients of sum_i g_i / w * loss_i (g = grad_loss, one element or [N]; w = total_weight, one
// element) given what the forward wrote (saved, row_max, lse): grad_x [N, in], grad_weight [V, in],
// grad_bias [V], each written only when defined.
void linear_cross_entropy_backward(const Tensor& x, const Tensor& weight, const Tensor& saved, const Tensor& row_max,
                                   const Tensor& lse, const Tensor& target, const Tensor& grad_loss,
                                   const Tensor& total_weight, const Tensor& grad_x, const Tensor& grad_weight,
                                   const Tensor& grad_bias, std::int64_t ignore_index, double label_smoothing);

// For tests: while alive, the calling thread's fused backward cuts the rows into chunks of `rows`
// and the classes into blocks of `cols` (0 keeps the automatic choice), so that small shapes run
// through several chunks and blocks, ragged last ones included.
class LinearCrossEntropyTilesForTest {
 public:
  LinearCrossEntropyTilesForTest(std::int64_t rows, std::int64_t cols);
  ~LinearCrossEntropyTilesForTest();
  LinearCrossEntropyTilesForTest(const LinearCrossEntropyTilesForTest&) = delete;
  LinearCrossEntropyTilesForTest& operator=(const LinearCrossEntropyTilesForTest&) = delete;

 private:
  std::int64_t prev_rows_, prev_cols_;
};

}  // namespace define::kernels::cpu
