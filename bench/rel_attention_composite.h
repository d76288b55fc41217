// Transformer-XL's relative-position attention written with generic differentiable ops: what the
// fused relative_attention (autograd/rel_attention.h) replaces. One definition for the test that
// shows the two equal, forward and backward (tests/ops/rel_attention_test.cpp), and the benchmark
// that times them against each other (bench/rel_attention_bench.cpp).
#pragma once

#include <cstdint>
#include <limits>
#include <vector>

#include "autograd/ops.h"

namespace define::bench {

// [Tq, Tk] int32: 1 where key j is hidden from query i (dist = i + M - j < 0, or >= window when
// window > 0), as relative_attention masks it. Built once per shape, outside any timing.
inline Tensor rel_attention_hidden_keys(std::int64_t tq, std::int64_t tk, std::int64_t window,
                                        Device device = Device::cpu()) {
  std::vector<std::int32_t> m(static_cast<std::size_t>(tq * tk));
  for (std::int64_t i = 0; i < tq; ++i)
    for (std::int64_t j = 0; j < tk; ++j) {
      const std::int64_t dist = i + (tk - tq) - j;
      m[static_cast<std::size_t>(i * tk + j)] = dist < 0 || (window > 0 && dist >= window) ? 1 : 0;
    }
  return from_vector(m, Shape{tq, tk}, device);
}

// The reference implementation's _rel_shift on [B, H, Tq, Tk]: a zero column in front, the rows
// reread as [Tk + 1, Tq], the first dropped, reread as [Tq, Tk]. Entry (i, j) then holds x[i, j +
// Tq-1-i] = x[i, Tk-1-(i+M-j)] for j <= i + M (entries past that hold other rows' values: the
// causal mask hides them).
inline Tensor rel_shift(const Tensor& x) {
  const std::int64_t b = x.size(0), h = x.size(1), tq = x.size(2), tk = x.size(3);
  const Tensor padded = concat({zeros({b, h, tq, 1}, {x.dtype(), x.device()}), x}, 3);
  return reshape(narrow(reshape(padded, {b, h, tk + 1, tq}), 2, 1, tk), {b, h, tq, tk});
}

// relative_attention(q, k, v, r, u, w) with hidden = rel_attention_hidden_keys(Tq, Tk, window),
// dropout p (drawing from gen exactly as the fused op does) and an explicit scale.
inline Tensor rel_attention_by_generic_ops(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& r,
                                           const Tensor& u, const Tensor& w, const Tensor& hidden, double scale,
                                           double p, Generator& gen) {
  const std::int64_t h = q.size(1), d = q.size(3), tk = k.size(2);
  const Tensor ac = matmul(add(q, reshape(u, {1, h, 1, d})), transpose(k, -2, -1));
  const Tensor bd = matmul(add(q, reshape(w, {1, h, 1, d})), transpose(reshape(r, {1, h, tk, d}), -2, -1));
  // The lowest finite float (finite in float64 too): exp of it less the row max is exactly 0.
  const Tensor scores = masked_fill(mul(add(ac, rel_shift(bd)), scale), hidden, std::numeric_limits<float>::lowest());
  Tensor probs = softmax(scores, -1);
  if (p > 0) probs = dropout(contiguous(probs), p, true, gen);
  return matmul(probs, v);
}

}  // namespace define::bench
