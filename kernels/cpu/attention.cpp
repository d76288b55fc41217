// Fast CPU attention row kernels (see kernels/cpu/attention.h).
//
// A row is the Tk scores of one (batch, head, query). Causal masking only shortens the row: keys
// past the query's horizon are never read and get probability 0. Padding is applied by a masked
// copy (-inf for padded keys) into a per-thread buffer, so the max / exp / sum loops stay
// branch-free and vectorise. The row max / sum-of-exp / dot reductions and the float32
// polynomial exp are shared with the other softmax-style families (kernels/cpu/row_math.h).
//
// Dropout: the keep flags come from the lane-wise Philox of kernels/cpu/dropout_keep.h, bit-identical
// to the reference and to kernels/dropout.h.
#include "kernels/cpu/attention.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "kernels/cpu/dropout_keep.h"
#include "kernels/cpu/row_math.h"
#include "kernels/dropout.h"

namespace define::kernels::cpu {
namespace {

using dropout_keep::keep_flags;
using dropout_keep::keep_threshold;
using row_math::row_dot;
using row_math::row_max;
using row_math::store_softmax;
using row_math::SumOrder;

constexpr std::int64_t kParallelGrain = 1 << 14;  // elements; below this, threads cost more than they save
// Row sums add their scalar tail first, then each lane partial (row_math::SumOrder), as this
// family always has.
constexpr SumOrder kSumOrder = SumOrder::kTailThenLanes;

// Keys 0 .. horizon - 1 of a row may be valid; the rest are causally masked.
std::int64_t row_horizon(bool causal, std::int64_t query, std::int64_t tq, std::int64_t tk) {
  return causal ? std::clamp<std::int64_t>(query + (tk - tq) + 1, 0, tk) : tk;
}

// Per-thread scratch for one row.
template <typename T>
struct RowScratch {
  std::vector<T> values;
  std::vector<std::uint32_t> keep;
  RowScratch(std::int64_t tk, bool dropping)
      : values(static_cast<std::size_t>(tk)), keep(dropping ? static_cast<std::size_t>(tk) : 0) {}
};

// What every row of one call shares.
template <typename T>
struct RowParams {
  std::int64_t heads, tq, tk;
  bool causal;
  const std::int32_t* padding;  // null, or [B, Tk]
  std::uint64_t seed, offset;
  std::uint32_t threshold;      // dropout keep threshold on the top 24 bits of a word
  T drop_scale;
};

// Row r of the forward kernel: P into out (which may be s itself: every loop reads element j
// before writing it), D into d when d is not null. Kept out of the OpenMP region's body: inlined
// there, GCC did not vectorise the max and exp loops.
template <typename T>
[[gnu::noinline]] void softmax_row(const RowParams<T>& rp, std::int64_t r, const T* s, T* out, T* d,
                                   RowScratch<T>& scratch) {
  const std::int64_t tk = rp.tk;
  const std::int64_t n = row_horizon(rp.causal, r % rp.tq, rp.tq, tk);
  const T* x = s;
  bool any = n > 0;
  if (rp.padding != nullptr) {
    const std::int32_t* pad = rp.padding + (r / (rp.heads * rp.tq)) * tk;
    T* masked = scratch.values.data();
    std::int64_t unpadded = 0;
    for (std::int64_t j = 0; j < n; ++j) {
      masked[j] = pad[j] != 0 ? -std::numeric_limits<T>::infinity() : s[j];
      unpadded += pad[j] == 0;
    }
    x = masked;
    any = unpadded > 0;
  }
  std::int64_t live = 0;  // out[0, live) holds probabilities; the rest of the row is zero
  const T m = any ? row_max(x, n) : T(0);
  if (any && m != -std::numeric_limits<T>::infinity()) {  // all valid scores -inf: fully masked
    store_softmax<kSumOrder>(x, out, n, m);
    live = n;
  }
  std::fill(out + live, out + tk, T(0));
  if (d != nullptr) {
    std::uint32_t* keep = scratch.keep.data();
    keep_flags(rp.seed, rp.offset, r * tk, live, rp.threshold, keep);
    const T drop_scale = rp.drop_scale;  // a local: read through rp, GCC 12 leaves the loop scalar
    for (std::int64_t j = 0; j < live; ++j) d[j] = keep[j] ? static_cast<T>(out[j] * drop_scale) : T(0);
    std::fill(d + live, d + tk, T(0));
  }
}

// Row r of the backward kernel: dS into gs (which may be gd itself: element j is read before it
// is written), D into d when d is not null.
template <typename T>
[[gnu::noinline]] void softmax_backward_row(const RowParams<T>& rp, std::int64_t r, const T* pr, const T* gd, T* gs,
                                            T* d, T scale, RowScratch<T>& scratch) {
  const std::int64_t tk = rp.tk;
  // Probabilities past the causal horizon are zero, and so are their gradients.
  const std::int64_t n = row_horizon(rp.causal, r % rp.tq, rp.tq, tk);
  const T* g = gd;  // dL/dP: dL/dD through the dropout mask and scale
  if (d != nullptr) {
    T* gp = scratch.values.data();
    std::uint32_t* keep = scratch.keep.data();
    keep_flags(rp.seed, rp.offset, r * tk, n, rp.threshold, keep);
    const T drop_scale = rp.drop_scale;  // a local: read through rp, GCC 12 leaves the loop scalar
    for (std::int64_t j = 0; j < n; ++j) {
      gp[j] = keep[j] ? gd[j] * drop_scale : T(0);
      d[j] = keep[j] ? static_cast<T>(pr[j] * drop_scale) : T(0);
    }
    std::fill(d + n, d + tk, T(0));
    g = gp;
  }
  const T dot = static_cast<T>(row_dot<kSumOrder>(g, pr, n));
  for (std::int64_t j = 0; j < n; ++j) gs[j] = scale * pr[j] * (g[j] - dot);
  std::fill(gs + n, gs + tk, T(0));
}

template <typename T>
RowParams<T> row_params(const Tensor& t, bool causal, const Tensor& key_padding, double p, std::uint64_t seed,
                        std::uint64_t offset) {
  return {t.size(1), t.size(2), t.size(3), causal,
          key_padding.defined() ? key_padding.data<std::int32_t>() : nullptr,
          seed, offset, keep_threshold(p), dropout_scale<T>(p)};
}

template <typename T>
void softmax_typed(const Tensor& scores, const Tensor& probs, const Tensor& dropped, const Tensor& key_padding,
                   bool causal, double p, std::uint64_t seed, std::uint64_t offset) {
  const RowParams<T> rp = row_params<T>(scores, causal, key_padding, p, seed, offset);
  const std::int64_t tk = rp.tk, rows = scores.numel() / tk;
  const T* s = scores.data<T>();
  T* out = probs.data<T>();
  T* d = dropped.defined() ? dropped.data<T>() : nullptr;
#pragma omp parallel if (scores.numel() > kParallelGrain)
  {
    RowScratch<T> scratch(tk, d != nullptr);
#pragma omp for schedule(static)
    for (std::int64_t r = 0; r < rows; ++r)
      softmax_row(rp, r, s + r * tk, out + r * tk, d ? d + r * tk : nullptr, scratch);
  }
}

template <typename T>
void softmax_backward_typed(const Tensor& probs, const Tensor& grad_dropped, const Tensor& grad_scores,
                            const Tensor& dropped, bool causal, double p, std::uint64_t seed, std::uint64_t offset,
                            double scale) {
  const RowParams<T> rp = row_params<T>(probs, causal, Tensor(), p, seed, offset);
  const std::int64_t tk = rp.tk, rows = probs.numel() / tk;
  const T* pr = probs.data<T>();
  const T* gd = grad_dropped.data<T>();
  T* gs = grad_scores.data<T>();
  T* d = dropped.defined() ? dropped.data<T>() : nullptr;
#pragma omp parallel if (probs.numel() > kParallelGrain)
  {
    RowScratch<T> scratch(tk, d != nullptr);
#pragma omp for schedule(static)
    for (std::int64_t r = 0; r < rows; ++r)
      softmax_backward_row(rp, r, pr + r * tk, gd + r * tk, gs + r * tk, d ? d + r * tk : nullptr,
                           static_cast<T>(scale), scratch);
  }
}

}  // namespace

void attention_softmax(const Tensor& scores, const Tensor& probs, const Tensor& dropped, const Tensor& key_padding,
                       bool causal, double p, std::uint64_t seed, std::uint64_t offset) {
  DEFINE_DISPATCH_FLOAT(scores.dtype(), "attention_softmax", [&] {
    softmax_typed<scalar_t>(scores, probs, dropped, key_padding, causal, p, seed, offset);
  });
}

void attention_softmax_backward(const Tensor& probs, const Tensor& grad_dropped, const Tensor& grad_scores,
                                const Tensor& dropped, bool causal, double p, std::uint64_t seed,
                                std::uint64_t offset, double scale) {
  DEFINE_DISPATCH_FLOAT(probs.dtype(), "attention_softmax_backward", [&] {
    softmax_backward_typed<scalar_t>(probs, grad_dropped, grad_scores, dropped, causal, p, seed, offset, scale);
  });
}

}  // namespace define::kernels::cpu
