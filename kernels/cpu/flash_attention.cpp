// CPU flash-attention kernels (see kernels/cpu/flash_attention.h): the CPU keeps its unfused
// attention (GEMM, fused row kernel, GEMM: kernels/attention.h), so these compute the scores once,
// take the rows' log-sum-exp from them, and hand the rest to the unfused entry points, which run on
// this thread's CPU backend. The lse pass is OpenMP over rows, each row summed in double in one
// fixed order, so results do not depend on the number of threads.
#include "kernels/cpu/flash_attention.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/factory.h"
#include "kernels/attention.h"
#include "kernels/copy.h"
#include "kernels/matmul.h"

namespace define::kernels::cpu {
namespace {

constexpr std::int64_t kParallelGrain = 1 << 14;  // score elements; below this, threads cost more than they save

// lse[r] = log-sum-exp of row r of scores [B, H, Tq, Tk] over its valid keys; -inf without one.
template <typename T>
void row_lse(const Tensor& scores, const Tensor& lse, const Tensor& key_padding, bool causal) {
  const std::int64_t heads = scores.size(1), tq = scores.size(2), tk = scores.size(3);
  const std::int64_t rows = scores.numel() / tk;
  const T* s = scores.data<T>();
  T* out = lse.data<T>();
  const std::int32_t* pad = key_padding.defined() ? key_padding.data<std::int32_t>() : nullptr;
  constexpr double kInf = std::numeric_limits<double>::infinity();
#pragma omp parallel for if (scores.numel() > kParallelGrain) schedule(static)
  for (std::int64_t r = 0; r < rows; ++r) {
    const std::int64_t query = r % tq;
    const std::int32_t* pad_row = pad == nullptr ? nullptr : pad + (r / (heads * tq)) * tk;
    const std::int64_t n = causal ? std::clamp<std::int64_t>(query + (tk - tq) + 1, 0, tk) : tk;
    const T* row = s + r * tk;
    double max = -kInf;
    for (std::int64_t j = 0; j < n; ++j)
      if (pad_row == nullptr || pad_row[j] == 0) max = std::max(max, double(row[j]));
    double sum = 0;
    if (max != -kInf)
      for (std::int64_t j = 0; j < n; ++j)
        if (pad_row == nullptr || pad_row[j] == 0) sum += std::exp(double(row[j]) - max);
    out[r] = static_cast<T>(max == -kInf ? -kInf : max + std::log(sum));
  }
}

Tensor scores_of(const Tensor& q, const Tensor& k, double scale) {
  Tensor scores = empty({q.size(0), q.size(1), q.size(2), k.size(2)}, {q.dtype(), q.device()});
  ::define::kernels::gemm(q, k, scores, false, true, scale, 0.0);
  return scores;
}

}  // namespace

void flash_attention_forward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out, const Tensor& lse,
                             const Tensor& key_padding, bool causal, double p, std::uint64_t seed, std::uint64_t offset,
                             double scale) {
  const Tensor scores = scores_of(q, k, scale);
  DEFINE_DISPATCH_FLOAT(q.dtype(), "flash_attention", [&] { row_lse<scalar_t>(scores, lse, key_padding, causal); });
  const AttentionMasking m{
      .key_padding_mask = key_padding, .causal = causal, .dropout = p, .seed = seed, .offset = offset};
  const AttentionProbs probs = ::define::kernels::attention_softmax(scores, m);
  ::define::kernels::gemm(probs.dropped, v, out, false, false, 1.0, 0.0);
}

void flash_attention_backward(const Tensor& grad_out, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor&,
                              const Tensor&, const Tensor& grad_q, const Tensor& grad_k, const Tensor& grad_v,
                              const Tensor& key_padding, bool causal, double p, std::uint64_t seed,
                              std::uint64_t offset, double scale) {
  // P again (the unfused backward needs it whole), then the unfused backward.
  const Tensor probs =
      ::define::kernels::attention_softmax(scores_of(q, k, scale), {.key_padding_mask = key_padding, .causal = causal})
          .probs;
  const AttentionMasking m{.causal = causal, .dropout = p, .seed = seed, .offset = offset};
  const AttentionGrads g = ::define::kernels::attention_backward(grad_out, q, k, v, probs, m, scale, grad_q.defined(),
                                                                 grad_k.defined(), grad_v.defined());
  if (grad_q.defined()) ::define::kernels::copy_into(grad_q, g.grad_q);
  if (grad_k.defined()) ::define::kernels::copy_into(grad_k, g.grad_k);
  if (grad_v.defined()) ::define::kernels::copy_into(grad_v, g.grad_v);
}

}  // namespace define::kernels::cpu
