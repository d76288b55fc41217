// Split-mix family: the input mixer of DeFINE/DExTra (spec §2.2, §11 step 4) fused with the GLT
// channel shuffle (spec §1 step 3), forward and backward, each one pass with no intermediate
// tensors. Both directions are pure permutations of elements (no arithmetic), so every backend
// gives bit-identical results.
//
// Forward, per row (all leading dims flattened), x of width p, y of width q, g = groups,
// s = shuffle_groups:
//   z = y, or with s > 1 the transpose shuffle of y: z[f] = y[(f mod s) * (q/s) + floor(f/s)]
//       ([a0 a1 a2 a3 | b0 b1 b2 b3] with s = 2 -> [a0 b0 a1 b1 a2 b2 a3 b3]);
//   out = [x^1, z^1, x^2, z^2, ..., x^g, z^g], x^c / z^c the c-th contiguous chunk of p/g / q/g.
// Backward hands each element of dL/dout back to the x or y position it came from.
//
// Reference: kernels/ref/split_mix.cpp; fast CPU path: kernels/cpu/split_mix.cpp; CUDA (and the
// emulated device): kernels/cuda/split_mix.cu. Differentiable ops: autograd/split_mix.h.
#pragma once

#include <cstdint>

#include "core/tensor.h"

namespace define::kernels {

// x [..., p] and y [..., q] with equal leading dims, one dtype (any) and device; g >= 1 divides p
// and q; shuffle_groups 0 or 1 means no shuffle, else it must divide q. Inputs may have any
// strides. Returns a contiguous [..., p + q]. Throws e.g.
// "split_mix: width 30 of x is not divisible by 4 groups".
Tensor split_mix(const Tensor& x, const Tensor& y, std::int64_t groups, std::int64_t shuffle_groups);

struct SplitMixGrads {
  Tensor grad_x;  // [..., p], contiguous
  Tensor grad_y;  // [..., q], contiguous
};

// The gradients of split_mix for an upstream gradient grad_out [..., p + q] (any strides), where
// p is x's width and (groups, shuffle_groups) are the forward's arguments.
SplitMixGrads split_mix_backward(const Tensor& grad_out, std::int64_t x_width, std::int64_t groups,
                                 std::int64_t shuffle_groups);

// The channel shuffle alone: split_mix of an empty x and y with one group. y [..., q], s >= 1
// dividing q (s = 1 is a copy). Its inverse is channel_shuffle(z, q / s).
Tensor channel_shuffle(const Tensor& y, std::int64_t shuffle_groups);
Tensor channel_shuffle_backward(const Tensor& grad_out, std::int64_t shuffle_groups);

}  // namespace define::kernels
