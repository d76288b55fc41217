// Reference flash-attention kernels (see kernels/ref/flash_attention.h): each query row's scores,
// probabilities, dropout decisions and gradients straight from the definition, in double.
#include "kernels/ref/flash_attention.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "core/philox.h"

namespace define::kernels::ref {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

struct Geometry {
  std::int64_t heads, tq, tk, d, dv;
};

Geometry geometry(const Tensor& q, const Tensor& v) { return {q.size(1), q.size(2), v.size(2), q.size(3), v.size(3)}; }

// One query row: its scores, which keys are valid, and its softmax over them.
struct Row {
  std::vector<double> score, prob;
  std::vector<char> valid;
  double max = -kInf, sum = 0;
  bool any = false;  // some valid key with a score above -inf

  explicit Row(std::int64_t tk)
      : score(static_cast<std::size_t>(tk)), prob(static_cast<std::size_t>(tk)), valid(static_cast<std::size_t>(tk)) {}

  // Row i of head bh (bh = b * H + h).
  template <typename T>
  void compute(const Geometry& g, const T* q, const T* k, const std::int32_t* pad, bool causal, double scale,
               std::int64_t bh, std::int64_t i) {
    const std::int64_t batch = bh / g.heads;
    const T* qi = q + (bh * g.tq + i) * g.d;
    max = -kInf;
    for (std::int64_t j = 0; j < g.tk; ++j) {
      const auto sj = static_cast<std::size_t>(j);
      const bool padded = pad != nullptr && pad[batch * g.tk + j] != 0;
      const bool future = causal && j > i + (g.tk - g.tq);
      valid[sj] = !padded && !future;
      const T* kj = k + (bh * g.tk + j) * g.d;
      double dot = 0;
      for (std::int64_t c = 0; c < g.d; ++c) dot += double(qi[c]) * double(kj[c]);
      score[sj] = scale * dot;
      if (valid[sj]) max = std::max(max, score[sj]);
    }
    // A row whose valid scores are all -inf (only infinite inputs make one) counts as fully masked.
    any = max != -kInf;
    sum = 0;
    for (std::int64_t j = 0; j < g.tk; ++j)
      if (valid[static_cast<std::size_t>(j)] && any) sum += std::exp(score[static_cast<std::size_t>(j)] - max);
    for (std::int64_t j = 0; j < g.tk; ++j) {
      const auto sj = static_cast<std::size_t>(j);
      prob[sj] = any && valid[sj] ? std::exp(score[sj] - max) / sum : 0.0;
    }
  }
};

// Dropout's factor for element e of the [B, H, Tq, Tk] probability tensor: 1 / (1 - p) if kept, 0 if
// dropped (the dropout family's Philox contract), 1 without dropout.
double dropout_factor(double p, std::uint64_t seed, std::uint64_t offset, std::int64_t e) {
  if (p == 0.0) return 1.0;
  const bool kept = philox::u32_to_unit_float(philox::random_u32(seed, offset, static_cast<std::uint64_t>(e))) >= p;
  return kept ? 1.0 / (1.0 - p) : 0.0;
}

const std::int32_t* padding_data(const Tensor& key_padding) {
  return key_padding.defined() ? key_padding.data<std::int32_t>() : nullptr;
}

}  // namespace

void flash_attention_forward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out, const Tensor& lse,
                             const Tensor& key_padding, bool causal, double p, std::uint64_t seed, std::uint64_t offset,
                             double scale) {
  const Geometry g = geometry(q, v);
  const std::int64_t heads_total = q.size(0) * g.heads;
  const std::int32_t* pad = padding_data(key_padding);
  DEFINE_DISPATCH_FLOAT(q.dtype(), "flash_attention", [&] {
    const scalar_t* qd = q.data<scalar_t>();
    const scalar_t* kd = k.data<scalar_t>();
    const scalar_t* vd = v.data<scalar_t>();
    scalar_t* od = out.data<scalar_t>();
    scalar_t* ld = lse.data<scalar_t>();
    Row row(g.tk);
    std::vector<double> acc(static_cast<std::size_t>(g.dv));
    for (std::int64_t bh = 0; bh < heads_total; ++bh) {
      for (std::int64_t i = 0; i < g.tq; ++i) {
        row.compute(g, qd, kd, pad, causal, scale, bh, i);
        const std::int64_t r = bh * g.tq + i;
        ld[r] = static_cast<scalar_t>(row.any ? row.max + std::log(row.sum) : -kInf);
        std::fill(acc.begin(), acc.end(), 0.0);
        for (std::int64_t j = 0; j < g.tk; ++j) {
          const double dj = row.prob[static_cast<std::size_t>(j)] * dropout_factor(p, seed, offset, r * g.tk + j);
          if (dj == 0.0) continue;
          const scalar_t* vj = vd + (bh * g.tk + j) * g.dv;
          for (std::int64_t c = 0; c < g.dv; ++c) acc[static_cast<std::size_t>(c)] += dj * double(vj[c]);
        }
        for (std::int64_t c = 0; c < g.dv; ++c)
          od[r * g.dv + c] = static_cast<scalar_t>(acc[static_cast<std::size_t>(c)]);
      }
    }
  });
}

void flash_attention_backward(const Tensor& grad_out, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor&,
                              const Tensor&, const Tensor& grad_q, const Tensor& grad_k, const Tensor& grad_v,
                              const Tensor& key_padding, bool causal, double p, std::uint64_t seed,
                              std::uint64_t offset, double scale) {
  const Geometry g = geometry(q, v);
  const std::int64_t heads_total = q.size(0) * g.heads;
  const std::int32_t* pad = padding_data(key_padding);
  DEFINE_DISPATCH_FLOAT(q.dtype(), "flash_attention_backward", [&] {
    const scalar_t* qd = q.data<scalar_t>();
    const scalar_t* kd = k.data<scalar_t>();
    const scalar_t* vd = v.data<scalar_t>();
    const scalar_t* gd = grad_out.data<scalar_t>();
    // Sums in double, written once at the end.
    std::vector<double> dq(static_cast<std::size_t>(q.numel())), dk(static_cast<std::size_t>(k.numel())),
        dv(static_cast<std::size_t>(v.numel()));
    Row row(g.tk);
    std::vector<double> dprob(static_cast<std::size_t>(g.tk)), factor(static_cast<std::size_t>(g.tk));
    for (std::int64_t bh = 0; bh < heads_total; ++bh) {
      for (std::int64_t i = 0; i < g.tq; ++i) {
        row.compute(g, qd, kd, pad, causal, scale, bh, i);
        const std::int64_t r = bh * g.tq + i;
        const scalar_t* go = gd + r * g.dv;
        double dot = 0;  // rowsum(P * dP)
        for (std::int64_t j = 0; j < g.tk; ++j) {
          const auto sj = static_cast<std::size_t>(j);
          const scalar_t* vj = vd + (bh * g.tk + j) * g.dv;
          double dd = 0;  // dL/dD_ij = dO_i . v_j
          for (std::int64_t c = 0; c < g.dv; ++c) dd += double(go[c]) * double(vj[c]);
          factor[sj] = dropout_factor(p, seed, offset, r * g.tk + j);
          dprob[sj] = dd * factor[sj];
          dot += row.prob[sj] * dprob[sj];
        }
        for (std::int64_t j = 0; j < g.tk; ++j) {
          const auto sj = static_cast<std::size_t>(j);
          const double pj = row.prob[sj];
          if (pj == 0.0) continue;                           // masked, or a fully masked row: no gradient
          const double ds = scale * pj * (dprob[sj] - dot);  // d/d(q . k_j)
          const double dj = pj * factor[sj];
          for (std::int64_t c = 0; c < g.d; ++c) {
            dq[static_cast<std::size_t>(r * g.d + c)] += ds * double(kd[(bh * g.tk + j) * g.d + c]);
            dk[static_cast<std::size_t>((bh * g.tk + j) * g.d + c)] += ds * double(qd[r * g.d + c]);
          }
          for (std::int64_t c = 0; c < g.dv; ++c)
            dv[static_cast<std::size_t>((bh * g.tk + j) * g.dv + c)] += dj * double(go[c]);
        }
      }
    }
    const auto store = [](const Tensor& t, const std::vector<double>& sums) {
      if (!t.defined()) return;
      scalar_t* d = t.data<scalar_t>();
      for (std::size_t e = 0; e < sums.size(); ++e) d[e] = static_cast<scalar_t>(sums[e]);
    };
    store(grad_q, dq);
    store(grad_k, dk);
    store(grad_v, dv);
  });
}

}  // namespace define::kernels::ref
