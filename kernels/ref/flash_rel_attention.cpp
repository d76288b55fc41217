// Reference fused relative-attention kernels (see kernels/ref/flash_rel_attention.h): each query
// row's scores, visibility, probabilities, dropout decisions and gradients straight from the
// definition of kernels/flash_rel_attention.h, in double.
#include "kernels/ref/flash_rel_attention.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "core/philox.h"

namespace define::kernels::ref {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

struct Geometry {
  std::int64_t heads, tq, tk, d, dv, window;
};

Geometry geometry(const Tensor& q, const Tensor& v, std::int64_t window) {
  return {q.size(1), q.size(2), v.size(2), q.size(3), v.size(3), window};
}

// Position (row of r) that query i meets at key j: p = Tk - 1 - dist, dist = i + M - j.
std::int64_t position(const Geometry& g, std::int64_t i, std::int64_t j) { return j + g.tq - 1 - i; }

// One query row: its scores, which keys are visible, and its softmax over them.
struct Row {
  std::vector<double> score, prob;
  std::vector<char> visible;
  double max = -kInf, sum = 0;
  bool any = false;  // some visible key with a score above -inf

  explicit Row(std::int64_t tk)
      : score(static_cast<std::size_t>(tk)),
        prob(static_cast<std::size_t>(tk)),
        visible(static_cast<std::size_t>(tk)) {}

  // Row i of head bh (bh = b * H + h): s_j = scale * ((q_i + u).k_j + (q_i + w).r_p).
  template <typename T>
  void compute(const Geometry& g, const T* q, const T* k, const T* r, const T* u, const T* w, double scale,
               std::int64_t bh, std::int64_t i) {
    const std::int64_t h = bh % g.heads, mem = g.tk - g.tq;
    const T* qi = q + (bh * g.tq + i) * g.d;
    const T* uh = u + h * g.d;
    const T* wh = w + h * g.d;
    max = -kInf;
    for (std::int64_t j = 0; j < g.tk; ++j) {
      const auto sj = static_cast<std::size_t>(j);
      const std::int64_t dist = i + mem - j;
      visible[sj] = dist >= 0 && (g.window == 0 || dist < g.window);
      score[sj] = 0.0;
      if (!visible[sj]) continue;
      const T* kj = k + (bh * g.tk + j) * g.d;
      const T* rp = r + (h * g.tk + position(g, i, j)) * g.d;
      double dot = 0;
      for (std::int64_t c = 0; c < g.d; ++c)
        dot += (double(qi[c]) + double(uh[c])) * double(kj[c]) + (double(qi[c]) + double(wh[c])) * double(rp[c]);
      score[sj] = scale * dot;
      max = std::max(max, score[sj]);
    }
    // A row whose visible scores are all -inf (only infinite inputs make one) counts as empty.
    any = max != -kInf;
    sum = 0;
    for (std::int64_t j = 0; j < g.tk; ++j)
      if (visible[static_cast<std::size_t>(j)] && any) sum += std::exp(score[static_cast<std::size_t>(j)] - max);
    for (std::int64_t j = 0; j < g.tk; ++j) {
      const auto sj = static_cast<std::size_t>(j);
      prob[sj] = any && visible[sj] ? std::exp(score[sj] - max) / sum : 0.0;
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

}  // namespace

void flash_rel_attention_forward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& r, const Tensor& u,
                                 const Tensor& w, const Tensor& out, const Tensor& lse, std::int64_t window, double p,
                                 std::uint64_t seed, std::uint64_t offset, double scale) {
  const Geometry g = geometry(q, v, window);
  const std::int64_t heads_total = q.size(0) * g.heads;
  DEFINE_DISPATCH_FLOAT(q.dtype(), "flash_rel_attention", [&] {
    const scalar_t* qd = q.data<scalar_t>();
    const scalar_t* kd = k.data<scalar_t>();
    const scalar_t* vd = v.data<scalar_t>();
    const scalar_t* rd = r.data<scalar_t>();
    const scalar_t* ud = u.data<scalar_t>();
    const scalar_t* wd = w.data<scalar_t>();
    scalar_t* od = out.data<scalar_t>();
    scalar_t* ld = lse.data<scalar_t>();
    Row row(g.tk);
    std::vector<double> acc(static_cast<std::size_t>(g.dv));
    for (std::int64_t bh = 0; bh < heads_total; ++bh) {
      for (std::int64_t i = 0; i < g.tq; ++i) {
        row.compute(g, qd, kd, rd, ud, wd, scale, bh, i);
        const std::int64_t ri = bh * g.tq + i;
        ld[ri] = static_cast<scalar_t>(row.any ? row.max + std::log(row.sum) : -kInf);
        std::fill(acc.begin(), acc.end(), 0.0);
        for (std::int64_t j = 0; j < g.tk; ++j) {
          const double dj = row.prob[static_cast<std::size_t>(j)] * dropout_factor(p, seed, offset, ri * g.tk + j);
          if (dj == 0.0) continue;
          const scalar_t* vj = vd + (bh * g.tk + j) * g.dv;
          for (std::int64_t c = 0; c < g.dv; ++c) acc[static_cast<std::size_t>(c)] += dj * double(vj[c]);
        }
        for (std::int64_t c = 0; c < g.dv; ++c)
          od[ri * g.dv + c] = static_cast<scalar_t>(acc[static_cast<std::size_t>(c)]);
      }
    }
  });
}

void flash_rel_attention_backward(const Tensor& grad_out, const Tensor& q, const Tensor& k, const Tensor& v,
                                  const Tensor& r, const Tensor& u, const Tensor& w, const Tensor&, const Tensor&,
                                  const Tensor& grad_q, const Tensor& grad_k, const Tensor& grad_v,
                                  const Tensor& grad_r, const Tensor& grad_u, const Tensor& grad_w, std::int64_t window,
                                  double p, std::uint64_t seed, std::uint64_t offset, double scale) {
  const Geometry g = geometry(q, v, window);
  const std::int64_t heads_total = q.size(0) * g.heads;
  DEFINE_DISPATCH_FLOAT(q.dtype(), "flash_rel_attention_backward", [&] {
    const scalar_t* qd = q.data<scalar_t>();
    const scalar_t* kd = k.data<scalar_t>();
    const scalar_t* vd = v.data<scalar_t>();
    const scalar_t* rd = r.data<scalar_t>();
    const scalar_t* ud = u.data<scalar_t>();
    const scalar_t* wd = w.data<scalar_t>();
    const scalar_t* gd = grad_out.data<scalar_t>();
    // Sums in double, written once at the end.
    std::vector<double> dq(static_cast<std::size_t>(q.numel())), dk(static_cast<std::size_t>(k.numel())),
        dv(static_cast<std::size_t>(v.numel())), dr(static_cast<std::size_t>(r.numel())),
        du(static_cast<std::size_t>(u.numel())), dw(static_cast<std::size_t>(w.numel()));
    Row row(g.tk);
    std::vector<double> dprob(static_cast<std::size_t>(g.tk)), factor(static_cast<std::size_t>(g.tk));
    for (std::int64_t bh = 0; bh < heads_total; ++bh) {
      const std::int64_t h = bh % g.heads;
      for (std::int64_t i = 0; i < g.tq; ++i) {
        row.compute(g, qd, kd, rd, ud, wd, scale, bh, i);
        const std::int64_t ri = bh * g.tq + i;
        const scalar_t* go = gd + ri * g.dv;
        double dot = 0;  // rowsum(P * dP)
        for (std::int64_t j = 0; j < g.tk; ++j) {
          const auto sj = static_cast<std::size_t>(j);
          const scalar_t* vj = vd + (bh * g.tk + j) * g.dv;
          double dd = 0;  // dL/dD_ij = dO_i . v_j
          for (std::int64_t c = 0; c < g.dv; ++c) dd += double(go[c]) * double(vj[c]);
          factor[sj] = dropout_factor(p, seed, offset, ri * g.tk + j);
          dprob[sj] = dd * factor[sj];
          dot += row.prob[sj] * dprob[sj];
        }
        for (std::int64_t j = 0; j < g.tk; ++j) {
          const auto sj = static_cast<std::size_t>(j);
          const double pj = row.prob[sj];
          if (pj == 0.0) continue;                           // hidden, or an empty row: no gradient
          const double ds = scale * pj * (dprob[sj] - dot);  // dL / d(unscaled score)
          const double dj = pj * factor[sj];
          const std::int64_t pos = position(g, i, j);
          for (std::int64_t c = 0; c < g.d; ++c) {
            const double qc = double(qd[ri * g.d + c]);
            const double kc = double(kd[(bh * g.tk + j) * g.d + c]);
            const double rc = double(rd[(h * g.tk + pos) * g.d + c]);
            dq[static_cast<std::size_t>(ri * g.d + c)] += ds * (kc + rc);  // dqu + dqw
            du[static_cast<std::size_t>(h * g.d + c)] += ds * kc;          // the sums of dqu and dqw
            dw[static_cast<std::size_t>(h * g.d + c)] += ds * rc;
            dk[static_cast<std::size_t>((bh * g.tk + j) * g.d + c)] += ds * (qc + double(ud[h * g.d + c]));
            dr[static_cast<std::size_t>((h * g.tk + pos) * g.d + c)] += ds * (qc + double(wd[h * g.d + c]));
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
    store(grad_r, dr);
    store(grad_u, du);
    store(grad_w, dw);
  });
}

}  // namespace define::kernels::ref
