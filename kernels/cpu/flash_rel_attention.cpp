// CPU fused relative-attention kernels (see kernels/cpu/flash_rel_attention.h): the CPU keeps its
// unfused relative attention (GEMMs around the row kernels of kernels/rel_attention.h), so these
// compute AC and BD with the same GEMMs, take the rows' log-sum-exp from them, and hand the rows to
// the unfused entry points, which run on this thread's CPU backend. The backward cannot call
// kernels::rel_attention_backward whole: it returns dq = dqu + dqw (and du, dw summed), where this
// contract wants the two parts of dq, so it runs the same steps itself on public entry points.
// The lse pass is OpenMP over rows, each row summed in double in one fixed order, so results do
// not depend on the number of threads.
#include "kernels/cpu/flash_rel_attention.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/factory.h"
#include "kernels/attention.h"
#include "kernels/elementwise.h"
#include "kernels/matmul.h"
#include "kernels/rel_attention.h"
#include "kernels/rel_attention_common.h"

namespace define::kernels::cpu {
using namespace rel_attention_common;
namespace {

constexpr std::int64_t kParallelGrain = 1 << 14;  // score elements; below this, threads cost more than they save

// The unscaled score parts, as kernels/rel_attention.cpp computes them: AC = (q + u) k^T and
// BD = (q + w) r^T (one GEMM batched over H per batch element: r is shared by all of them).
struct ScoreParts {
  Tensor ac, bd;
};

ScoreParts score_parts(const Tensor& q, const Tensor& k, const Tensor& r, const Tensor& u, const Tensor& w) {
  const TensorOptions opt{q.dtype(), q.device()};
  const Shape shape{q.size(0), q.size(1), q.size(2), k.size(2)};
  ScoreParts s{empty(shape, opt), empty(shape, opt)};
  gemm(binary(BinaryOp::Add, q, per_head_bias(u)), k, s.ac, false, true, 1.0, 0.0);
  gemm_per_batch(binary(BinaryOp::Add, q, per_head_bias(w)), r, s.bd, false, true);
  return s;
}

// lse[row] = log-sum-exp over the visible keys of s_j = scale * (AC[i, j] + BD[i, j + Tq-1-i]); -inf
// when every visible score is -inf. The visible keys are the run [lo, hi) of
// kernels/cpu/rel_attention.cpp: hi = i + M + 1, lo = max(0, hi - window) with a window, else 0.
template <typename T>
void row_lse(const ScoreParts& s, const Tensor& lse, std::int64_t window, double scale) {
  const std::int64_t tq = s.ac.size(2), tk = s.ac.size(3);
  const std::int64_t rows = s.ac.numel() / tk;
  const T* ac = s.ac.data<T>();
  const T* bd = s.bd.data<T>();
  T* out = lse.data<T>();
  constexpr double kInf = std::numeric_limits<double>::infinity();
#pragma omp parallel for if (s.ac.numel() > kParallelGrain) schedule(static)
  for (std::int64_t row = 0; row < rows; ++row) {
    const std::int64_t i = row % tq, hi = i + (tk - tq) + 1;
    const std::int64_t lo = window > 0 ? std::max<std::int64_t>(0, hi - window) : 0;
    const T* a = ac + row * tk;
    const T* b = bd + row * tk + (tq - 1 - i);  // b[j] = BD[i, j + Tq-1-i]
    double max = -kInf;
    for (std::int64_t j = lo; j < hi; ++j) max = std::max(max, scale * (double(a[j]) + double(b[j])));
    double sum = 0;
    if (max != -kInf)
      for (std::int64_t j = lo; j < hi; ++j) sum += std::exp(scale * (double(a[j]) + double(b[j])) - max);
    out[row] = static_cast<T>(max == -kInf ? -kInf : max + std::log(sum));
  }
}

}  // namespace

void flash_rel_attention_forward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& r, const Tensor& u,
                                 const Tensor& w, const Tensor& out, const Tensor& lse, std::int64_t window, double p,
                                 std::uint64_t seed, std::uint64_t offset, double scale) {
  const ScoreParts s = score_parts(q, k, r, u, w);
  DEFINE_DISPATCH_FLOAT(q.dtype(), "flash_rel_attention", [&] { row_lse<scalar_t>(s, lse, window, scale); });
  const RelAttentionParams params{.window = window, .scale = scale, .dropout = p, .seed = seed, .offset = offset};
  const AttentionProbs probs = ::define::kernels::rel_attention_softmax(s.ac, s.bd, params);
  gemm(probs.dropped, v, out, false, false, 1.0, 0.0);  // out = D v
}

void flash_rel_attention_backward(const Tensor& grad_out, const Tensor& q, const Tensor& k, const Tensor& v,
                                  const Tensor& r, const Tensor& u, const Tensor& w, const Tensor&, const Tensor&,
                                  const Tensor& grad_q, const Tensor& grad_k, const Tensor& grad_v,
                                  const Tensor& grad_r, const Tensor& grad_u, const Tensor& grad_w, std::int64_t window,
                                  double p, std::uint64_t seed, std::uint64_t offset, double scale) {
  // P again (the unfused backward needs it whole; dropout does not change it).
  const ScoreParts s = score_parts(q, k, r, u, w);
  const Tensor probs = ::define::kernels::rel_attention_softmax(s.ac, s.bd, {.window = window, .scale = scale}).probs;
  // dD = dO v^T, then dS and D from the attention family's backward row kernel, causal over the
  // memory as kernels/rel_attention.cpp calls it (the keys a window hides have P == 0, so dS == 0).
  Tensor grad_dropped = empty(probs.shape(), {q.dtype(), q.device()});
  gemm(grad_out, v, grad_dropped, false, true, 1.0, 0.0);
  const AttentionSoftmaxGrad sg = ::define::kernels::attention_softmax_backward(
      probs, grad_dropped, {.causal = true, .dropout = p, .seed = seed, .offset = offset}, scale);
  const Tensor& ds = sg.grad_scores;
  if (grad_v.defined()) gemm(sg.dropped, grad_out, grad_v, true, false, 1.0, 0.0);  // dv = D^T dO
  if (grad_k.defined())
    gemm(ds, binary(BinaryOp::Add, q, per_head_bias(u)), grad_k, true, false, 1.0, 0.0);  // dk = dS^T (q + u)
  const TensorOptions parts{q.dtype(), q.device()};
  const Tensor grad_qu = grad_q.defined() || grad_u.defined() ? empty(q.shape(), parts) : Tensor();
  const Tensor grad_qw = grad_q.defined() || grad_w.defined() ? empty(q.shape(), parts) : Tensor();
  if (grad_qu.defined()) gemm(ds, k, grad_qu, false, false, 1.0, 0.0);  // dqu = dS k
  if (grad_qw.defined() || grad_r.defined()) {
    // The position parts see dS through the shift: dBD = unshift(dS).
    const Tensor grad_bd = ::define::kernels::rel_attention_unshift(ds);
    if (grad_qw.defined()) gemm_per_batch(grad_bd, r, grad_qw, false, false);  // dqw = dBD r
    if (grad_r.defined()) {  // dr = sum_b dBD[b]^T (q + w)[b], accumulating (B > 0 by the contract)
      const Tensor qw = binary(BinaryOp::Add, q, per_head_bias(w));
      for (std::int64_t b = 0; b < q.size(0); ++b)
        gemm(batch_element(grad_bd, b), batch_element(qw, b), grad_r, true, false, 1.0, b == 0 ? 0.0 : 1.0);
    }
  }
  finish_query_grads(grad_qu, grad_qw, grad_q, grad_u, grad_w);
}

}  // namespace define::kernels::cpu
