// Adaptive-softmax family (spec §6): the loss and the log-probabilities of an adaptive softmax
// from its head and tail logits, fused per row (log-sum-exp and gather in one pass), forward and
// backward. The GEMMs that produce the logits are ordinary matmuls in the layer
// (nn/adaptive.h); this family only sees logits.
//
// Vocabulary layout: bounds c_0 < c_1 < ... < c_T = V. Cluster 0 (the shortlist) holds words
// [0, c_0); tail cluster i (0-based, i < T) holds words [c_i, c_{i+1}). The head has c_0 + T
// columns: the shortlist words, then one logit per tail cluster (column c_0 + i for tail i).
//
// Loss (per row r with target t, lse = log-sum-exp of a row):
//   t <  c_0:              nll_r = lse(head_r) - head[r, t]
//   c_i <= t < c_{i+1}:    nll_r = lse(head_r) - head[r, c_0 + i] + lse(tail_i[k]) - tail_i[k, t - c_i]
//                          where k is r's position among tail i's rows;
//   t == ignore_index:     nll_r = 0, no gradient.
// Tail i's logits cover ONLY the rows whose target falls in tail i ([N_i, c_{i+1} - c_i]), listed
// by tail_rows[i] (int64 row indices into N, a stable partition: adaptive_partition below).
// Backward: grad_head[r] = s_r (softmax(head_r) - onehot(slot_r)), grad_tail_i[k] = s_r
// (softmax(tail_i[k]) - onehot(t - c_i)), s_r = grad_loss[r] / total_weight (grad_loss [N] or
// one element), from the log-sum-exps saved by the forward pass: one elementwise pass.
//
// Log-probabilities of every word (every row through every tail): out [N, V] with
//   out[r, w] = head_lp[r, w]                              for w < c_0
//   out[r, w] = head_lp[r, c_0 + i] + tail_lp_i[r, w - c_i]  for c_i <= w < c_{i+1},
// head_lp = log_softmax(head), tail_lp_i = log_softmax(tail_i) (tails [N, c_{i+1} - c_i] here).
//
// Reference: kernels/ref/adaptive_softmax.cpp; fast CPU path: kernels/cpu/adaptive_softmax.cpp;
// CUDA (and the emulated device): kernels/cuda/adaptive_softmax.cu. Differentiable ops:
// autograd/adaptive_softmax.h.
#pragma once

#include <cstdint>
#include <vector>

#include "core/tensor.h"

namespace define::kernels {

// The rows of each cluster, computed once per batch. Targets are read on the host (the cluster
// sizes are needed there anyway, to size the tail GEMMs).
struct AdaptivePartition {
  // rows[c]: int64 [N_c], the ascending indices of the rows whose target is in cluster c
  // (c = 0 shortlist, c = i + 1 tail i), on the target's device.
  std::vector<Tensor> rows;
  std::vector<std::int64_t> counts;  // N_c
  // local[c]: int64 [N_c], the targets of those rows minus the cluster's first word (the word's
  // index inside its cluster: an adaptive input's row in band c).
  std::vector<Tensor> local;
  // int64 [N]: each row's position in concat(rows) (the cluster-sorted order), -1 for ignored rows.
  Tensor position;
};
// target int32/int64 [N] (any strides). Throws "<op>: target 12 out of range for 10 classes" for
// a target outside [0, V) that is not ignore_index, and names bad bounds.
AdaptivePartition adaptive_partition(const Tensor& target, const std::vector<std::int64_t>& bounds,
                                     std::int64_t ignore_index, const char* op = "adaptive_partition");

// Checks bounds: at least one value, strictly increasing, c_0 >= 1. "<op>: bounds must ...".
void check_adaptive_bounds(const char* op, const std::vector<std::int64_t>& bounds);

struct AdaptiveSoftmaxRows {
  Tensor loss;                   // [N], 0 for ignored rows
  Tensor head_lse;               // [N] (0 for ignored rows)
  std::vector<Tensor> tail_lse;  // [N_i] per tail
};
// head [N, c_0 + T], tails[i] [N_i, c_{i+1} - c_i] (float32/float64, one dtype and device, any
// strides), tail_rows[i] int64 [N_i] as adaptive_partition produces them, target [N].
// The partition is checked against the targets: on the host for CPU tensors ("adaptive_softmax:
// row 5 (target 17) is listed for tail 0 [10, 15)", "... tail 1 lists 3 rows but 4 targets fall in
// [15, 20)"); for device tensors by the loss kernels, which report a target out of range, a row
// outside [0, N) or a row listed for the wrong tail (the same messages) at the device's next
// synchronisation point, without copying targets or rows to the host (a row listed twice or not at
// all is not caught there: it cannot make a kernel read out of bounds).
AdaptiveSoftmaxRows adaptive_softmax_rows(const Tensor& head, const std::vector<Tensor>& tails,
                                          const std::vector<Tensor>& tail_rows, const Tensor& target,
                                          const std::vector<std::int64_t>& bounds, std::int64_t ignore_index);

struct AdaptiveSoftmaxGrads {
  Tensor grad_head;                // [N, c_0 + T], contiguous
  std::vector<Tensor> grad_tails;  // [N_i, c_{i+1} - c_i], contiguous
};
// The gradients of the per-row losses for an upstream grad_loss ([N] or one element) divided by
// total_weight (one element; the reduce step's weight, see kernels/softmax.h).
AdaptiveSoftmaxGrads adaptive_softmax_backward(const Tensor& head, const std::vector<Tensor>& tails,
                                               const AdaptiveSoftmaxRows& saved,
                                               const std::vector<Tensor>& tail_rows, const Tensor& target,
                                               const std::vector<std::int64_t>& bounds,
                                               const Tensor& grad_loss, const Tensor& total_weight,
                                               std::int64_t ignore_index);

struct AdaptiveLogProb {
  Tensor out;      // [N, V]
  Tensor head_lp;  // [N, c_0 + T]: log_softmax(head), kept for the backward pass
};
// head [N, c_0 + T], tails[i] [N, c_{i+1} - c_i] (all rows), any strides.
AdaptiveLogProb adaptive_log_prob(const Tensor& head, const std::vector<Tensor>& tails,
                                  const std::vector<std::int64_t>& bounds);

struct AdaptiveLogProbGrads {
  Tensor grad_head;                // [N, c_0 + T]
  std::vector<Tensor> grad_tails;  // [N, c_{i+1} - c_i]
};
// Gradients of adaptive_log_prob for grad_out [N, V]: per tail block, with s = sum_j dout[r, c_i + j],
//   grad_tail_i[r, j] = dout[r, c_i + j] - exp(tail_lp_i[r, j]) * s   and the cluster column of the
// head log-probs receives s; the head then goes through log_softmax_backward.
AdaptiveLogProbGrads adaptive_log_prob_backward(const AdaptiveLogProb& saved, const Tensor& grad_out,
                                                const std::vector<std::int64_t>& bounds);

}  // namespace define::kernels
