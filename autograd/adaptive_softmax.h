// Adaptive softmax as differentiable ops (spec §6): the fused loss over head and tail logits and
// the full log-probabilities. Kernels and exact semantics: kernels/adaptive_softmax.h. The layers
// that produce the logits (and decide which rows go through which tail): nn/adaptive.h.
#pragma once

#include <cstdint>
#include <vector>

#include "autograd/softmax.h"
#include "core/tensor.h"
#include "kernels/adaptive_softmax.h"

namespace define {

using kernels::AdaptivePartition;

// The rows of each cluster for targets [N] and bounds c_0 < ... < c_T = V (cluster 0 = the
// shortlist, cluster i + 1 = tail i): a stable partition, computed once per batch on the host.
// Rows whose target is ignore_index are in no cluster. Not differentiable (index bookkeeping).
AdaptivePartition adaptive_partition(const Tensor& target, const std::vector<std::int64_t>& bounds,
                                     std::int64_t ignore_index = -100);

// The adaptive-softmax NLL of each row, reduced: head [N, c_0 + T] (shortlist logits, then one
// logit per tail cluster), tails[i] [N_i, c_{i+1} - c_i] holding the logits of ONLY the rows
// tail_rows[i] (= adaptive_partition(target, bounds, ignore_index).rows[i + 1]), target [N].
// Row loss -(log_softmax(head)[slot] + log_softmax(tail_i)[t - c_i]) (the tail term only for tail
// words); Mean averages over non-ignored rows. Gradients flow to head and tails (one fused pass).
Tensor adaptive_softmax_loss(const Tensor& head, const std::vector<Tensor>& tails,
                             const std::vector<Tensor>& tail_rows, const Tensor& target,
                             const std::vector<std::int64_t>& bounds, std::int64_t ignore_index = -100,
                             Reduction reduction = Reduction::Mean);

// Log-probabilities of every word, [N, V]: head [N, c_0 + T], tails[i] [N, c_{i+1} - c_i] (every
// row through every tail). out[:, w] = log_softmax(head)[w] for shortlist words, and
// log_softmax(head)[c_0 + i] + log_softmax(tail_i)[w - c_i] for words of tail i. Differentiable.
Tensor adaptive_log_softmax(const Tensor& head, const std::vector<Tensor>& tails,
                            const std::vector<std::int64_t>& bounds);

}  // namespace define
