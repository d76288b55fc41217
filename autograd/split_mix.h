// The DeFINE/DExTra input mixer and the GLT channel shuffle, differentiable (spec §1 step 3,
// §2.2, §11 step 4). Kernels and their exact semantics: kernels/split_mix.h.
#pragma once

#include <cstdint>

#include "core/tensor.h"

namespace define {

// Mix_g(x, y) with the shuffle of the GLT that produced y folded in. x [..., p], y [..., q] with
// equal leading dims; groups divides p and q. With shuffle_groups = s > 1 (the group count of
// that GLT; s divides q) y is first channel-shuffled: position f takes y_{f mod s}[floor(f / s)].
// Output [..., p + q] = [x^1, y^1, x^2, y^2, ..., x^g, y^g] (input chunk first), one pass.
// Gradients flow back by the inverse permutation (exact, no arithmetic).
Tensor split_mix(const Tensor& x, const Tensor& y, std::int64_t groups, std::int64_t shuffle_groups = 0);

// The GLT output shuffle alone (when no mixer follows): y [..., q], s divides q;
// [a0 a1 a2 a3 | b0 b1 b2 b3] with s = 2 -> [a0 b0 a1 b1 a2 b2 a3 b3]. s = 1 is a copy.
Tensor channel_shuffle(const Tensor& y, std::int64_t shuffle_groups);

}  // namespace define
