// Fast CPU relative-attention row kernels (see kernels/cpu/rel_attention.h).
//
// The visible keys of query i are one contiguous run [lo, hi): hi = i + M + 1 (causal over memory
// and segment), lo = max(0, hi - window) with a window, else 0. The position term of key j sits at
// BD[i, Tk-1-(i+M-j)] = BD[i, j + Tq-1-i], so the run reads one contiguous run of the BD row too:
// the relative shift costs an offset, not a gather, and the score loop vectorises. Keys outside
// the run are never read and get probability 0. Max, exp + sum and normalisation are the shared
// row_math helpers, the dropout flags the shared lane-wise Philox (dropout_keep.h), exactly as
// the attention family's row kernel uses them.
#include "kernels/cpu/rel_attention.h"

#include <algorithm>
#include <cstring>
#include <limits>
#include <vector>

#include "kernels/cpu/dropout_keep.h"
#include "kernels/cpu/row_math.h"
#include "kernels/dropout.h"

namespace define::kernels::cpu {
namespace {

using dropout_keep::keep_flags;
using dropout_keep::keep_threshold;
using row_math::row_max;
using row_math::store_softmax;
using row_math::SumOrder;

constexpr std::int64_t kParallelGrain = 1 << 14;  // elements; below this, threads cost more than they save
// The attention family's order of the row sum (row_math::SumOrder).
constexpr SumOrder kSumOrder = SumOrder::kTailThenLanes;

// What every row of one call shares.
template <typename T>
struct RowParams {
  std::int64_t tq, tk, window;
  T scale;
  std::uint64_t seed, offset;
  std::uint32_t threshold;  // dropout keep threshold on the top 24 bits of a word
  T drop_scale;
};

// Row r of the forward kernel: P into out (which may be ac itself: each element is read before it
// is written), D into d when d is not null; keep is per-thread scratch of Tk flags. Kept out of
// the OpenMP region's body so that GCC vectorises its loops (see row_math.h).
template <typename T>
[[gnu::noinline]] void softmax_row(const RowParams<T>& rp, std::int64_t r, const T* ac, const T* bd, T* out, T* d,
                                   std::uint32_t* keep) {
  const std::int64_t tk = rp.tk, i = r % rp.tq;
  const std::int64_t hi = i + (tk - rp.tq) + 1;
  const std::int64_t lo = rp.window > 0 ? std::max<std::int64_t>(0, hi - rp.window) : 0;
  const std::int64_t n = hi - lo;
  const T* a = ac + lo;
  const T* b = bd + lo + (rp.tq - 1 - i);
  T* x = out + lo;
  for (std::int64_t j = 0; j < n; ++j) x[j] = rp.scale * (a[j] + b[j]);
  std::int64_t live = 0;  // out[lo, lo + live) holds probabilities; the rest of the row is zero
  const T m = row_max(x, n);
  if (n > 0 && m != -std::numeric_limits<T>::infinity()) {  // all visible scores -inf: fully masked
    store_softmax<kSumOrder>(x, x, n, m);
    live = n;
  }
  std::fill(out, out + lo, T(0));
  std::fill(x + live, out + tk, T(0));
  if (d != nullptr) {
    keep_flags(rp.seed, rp.offset, r * tk + lo, live, rp.threshold, keep);
    std::fill(d, d + lo, T(0));
    // The scale in a local: read through rp inside the condition (rp may alias d, so it is reloaded
    // every iteration), it became a masked scalar load that GCC 12 cannot vectorise, and this
    // loop ran scalar with a data-dependent branch, costing about as much as the Philox rounds.
    const T drop_scale = rp.drop_scale;
    for (std::int64_t j = 0; j < live; ++j) d[lo + j] = keep[j] ? static_cast<T>(x[j] * drop_scale) : T(0);
    std::fill(d + lo + live, d + tk, T(0));
  }
}

template <typename T>
void softmax_typed(const Tensor& ac, const Tensor& bd, const Tensor& probs, const Tensor& dropped,
                   std::int64_t window, double scale, double p, std::uint64_t seed, std::uint64_t offset) {
  const RowParams<T> rp{ac.size(2), ac.size(3), window, static_cast<T>(scale), seed, offset, keep_threshold(p),
                        dropout_scale<T>(p)};
  const std::int64_t tk = rp.tk, rows = ac.numel() / tk;
  const T* a = ac.data<T>();
  const T* b = bd.data<T>();
  T* out = probs.data<T>();
  T* d = dropped.defined() ? dropped.data<T>() : nullptr;
#pragma omp parallel if (ac.numel() > kParallelGrain)
  {
    std::vector<std::uint32_t> keep(d != nullptr ? static_cast<std::size_t>(tk) : 0);
#pragma omp for schedule(static)
    for (std::int64_t r = 0; r < rows; ++r)
      softmax_row(rp, r, a + r * tk, b + r * tk, out + r * tk, d ? d + r * tk : nullptr, keep.data());
  }
}

// Row r of dBD is row r of dS moved right by Tq-1-i (the adjoint of the forward's offset read).
template <typename T>
void unshift_typed(const Tensor& grad_scores, const Tensor& grad_bd) {
  const std::int64_t tq = grad_scores.size(2), tk = grad_scores.size(3);
  const std::int64_t rows = grad_scores.numel() / tk;
  const T* gs = grad_scores.data<T>();
  T* gb = grad_bd.data<T>();
#pragma omp parallel for if (grad_scores.numel() > kParallelGrain) schedule(static)
  for (std::int64_t r = 0; r < rows; ++r) {
    const std::int64_t shift = tq - 1 - r % tq;
    std::fill(gb + r * tk, gb + r * tk + shift, T(0));
    std::memcpy(gb + r * tk + shift, gs + r * tk, static_cast<std::size_t>(tk - shift) * sizeof(T));
  }
}

}  // namespace

void rel_attention_softmax(const Tensor& ac, const Tensor& bd, const Tensor& probs, const Tensor& dropped,
                           std::int64_t window, double scale, double p, std::uint64_t seed, std::uint64_t offset) {
  DEFINE_DISPATCH_FLOAT(ac.dtype(), "rel_attention_softmax", [&] {
    softmax_typed<scalar_t>(ac, bd, probs, dropped, window, scale, p, seed, offset);
  });
}

void rel_attention_unshift(const Tensor& grad_scores, const Tensor& grad_bd) {
  DEFINE_DISPATCH_FLOAT(grad_scores.dtype(), "rel_attention_unshift",
                        [&] { unshift_typed<scalar_t>(grad_scores, grad_bd); });
}

}  // namespace define::kernels::cpu
