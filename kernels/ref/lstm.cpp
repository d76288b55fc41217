// Reference LSTM recurrence: the textbook formulas, one (row, unit) at a time, in double.
#include "kernels/ref/lstm.h"

#include <cmath>
#include <vector>

#include "core/dtype.h"

namespace define::kernels::ref {
namespace {

double sigmoid(double v) { return 1.0 / (1.0 + std::exp(-v)); }

template <typename T>
const T* data_or_null(const Tensor& t) {
  return t.defined() ? t.data<T>() : nullptr;
}

struct Dims {
  std::int64_t T, B, H;
};

Dims dims_of(const Tensor& gates, const Tensor& hs) { return {gates.shape()[0], gates.shape()[1], hs.shape()[2]}; }

// out[b, c] = sum_k a[b, k] * w(k, c) in double, for a [B, K] and w(k, c) = w[k * wk + c * wc].
template <typename T>
std::vector<double> product(const T* a, std::int64_t B, std::int64_t K, const T* w, std::int64_t wk, std::int64_t wc,
                            std::int64_t C) {
  std::vector<double> out(static_cast<std::size_t>(B * C), 0.0);
  for (std::int64_t b = 0; b < B; ++b)
    for (std::int64_t c = 0; c < C; ++c) {
      double s = 0;
      for (std::int64_t k = 0; k < K; ++k) s += double(a[b * K + k]) * double(w[k * wk + c * wc]);
      out[static_cast<std::size_t>(b * C + c)] = s;
    }
  return out;
}

template <typename T>
void forward_typed(const Tensor& w_hh, const Tensor& b_ih, const Tensor& b_hh, const Tensor& hs, const Tensor& cs,
                   const Tensor& gates) {
  // Plain variables, not a structured binding: clang before 16 cannot capture bindings in a lambda.
  const Dims d = dims_of(gates, hs);
  const std::int64_t T_ = d.T, B = d.B, H = d.H;
  const T* w = w_hh.data<T>();
  const T* bi = data_or_null<T>(b_ih);
  const T* bh = data_or_null<T>(b_hh);
  for (std::int64_t t = 0; t < T_; ++t) {
    const T* h_prev = hs.data<T>() + t * B * H;
    const T* c_prev = cs.data<T>() + t * B * H;
    T* c = cs.data<T>() + (t + 1) * B * H;
    T* h = hs.data<T>() + (t + 1) * B * H;
    T* g = gates.data<T>() + t * B * 4 * H;
    // Recurrent part h_{t-1} w_hh^T: element (k, r) of w_hh^T is w_hh[r, k].
    const std::vector<double> rec = product(h_prev, B, H, w, 1, H, 4 * H);
    // Pre-activation of gate column k in row b: input projection + recurrent part + both biases.
    const auto pre = [&](std::int64_t b, std::int64_t k) {
      return double(g[b * 4 * H + k]) + rec[static_cast<std::size_t>(b * 4 * H + k)] + (bi ? double(bi[k]) : 0.0) +
             (bh ? double(bh[k]) : 0.0);
    };
    for (std::int64_t b = 0; b < B; ++b)
      for (std::int64_t j = 0; j < H; ++j) {
        const double in = sigmoid(pre(b, j)), forget = sigmoid(pre(b, H + j)), cand = std::tanh(pre(b, 2 * H + j)),
                     out = sigmoid(pre(b, 3 * H + j));
        const double cell = forget * double(c_prev[b * H + j]) + in * cand;
        T* row = g + b * 4 * H;
        row[j] = static_cast<T>(in);
        row[H + j] = static_cast<T>(forget);
        row[2 * H + j] = static_cast<T>(cand);
        row[3 * H + j] = static_cast<T>(out);
        c[b * H + j] = static_cast<T>(cell);
        h[b * H + j] = static_cast<T>(out * std::tanh(cell));
      }
  }
}

// Per step, with a = the activated gates, dht = dL/dh_t = dy_t + dh (dh: dgates_{t+1} w_hh, or
// dL/dh_T for the last step) and dct = dL/dc_t (including the path through h_t):
//   dct = dc + dht * o * (1 - tanh(c_t)^2),
//   dL/di = dct * g,  dL/df = dct * c_{t-1},  dL/dg = dct * i,  dL/do = dht * tanh(c_t),
//   dL/dc_{t-1} = dct * f,
// and through the activations: sigmoid' = a (1 - a), tanh' = 1 - a^2.
template <typename T>
void backward_typed(const Tensor& dy, const Tensor& w_hh, const Tensor& cs, const Tensor& gates, const Tensor& dh,
                    const Tensor& dc, const Tensor& dgates, bool need_dh0, std::int64_t H) {
  const std::int64_t T_ = gates.shape()[0], B = gates.shape()[1];
  const T* w = w_hh.data<T>();
  T* dhp = dh.data<T>();
  T* dcp = dc.data<T>();
  // dh_rec = dgates_t w_hh: element (k, j) of w_hh is w[k * H + j].
  const auto recurrent_dh = [&](std::int64_t t) {
    const std::vector<double> v = product(dgates.data<T>() + t * B * 4 * H, B, 4 * H, w, H, 1, H);
    for (std::int64_t s = 0; s < B * H; ++s) dhp[s] = static_cast<T>(v[static_cast<std::size_t>(s)]);
  };
  for (std::int64_t t = T_ - 1; t >= 0; --t) {
    if (t < T_ - 1) recurrent_dh(t + 1);
    const T* a_all = gates.data<T>() + t * B * 4 * H;
    const T* c_prev = cs.data<T>() + t * B * H;
    const T* c = cs.data<T>() + (t + 1) * B * H;
    const T* dyt = dy.data<T>() + t * B * H;
    T* dg_all = dgates.data<T>() + t * B * 4 * H;
    for (std::int64_t b = 0; b < B; ++b)
      for (std::int64_t j = 0; j < H; ++j) {
        const std::int64_t s = b * H + j;
        const T* a = a_all + b * 4 * H;
        const double in = a[j], forget = a[H + j], cand = a[2 * H + j], out = a[3 * H + j];
        const double tc = std::tanh(double(c[s]));
        const double dht = double(dyt[s]) + double(dhp[s]);
        const double dct = double(dcp[s]) + dht * out * (1.0 - tc * tc);
        T* dg = dg_all + b * 4 * H;
        dg[j] = static_cast<T>(dct * cand * in * (1.0 - in));
        dg[H + j] = static_cast<T>(dct * double(c_prev[s]) * forget * (1.0 - forget));
        dg[2 * H + j] = static_cast<T>(dct * in * (1.0 - cand * cand));
        dg[3 * H + j] = static_cast<T>(dht * tc * out * (1.0 - out));
        dcp[s] = static_cast<T>(dct * forget);
      }
  }
  if (need_dh0 && T_ > 0) recurrent_dh(0);
}

}  // namespace

void lstm_forward_steps(const Tensor& w_hh, const Tensor& b_ih, const Tensor& b_hh, const Tensor& hs,
                        const Tensor& cs, const Tensor& gates) {
  DEFINE_DISPATCH_FLOAT(gates.dtype(), "lstm_forward_steps",
                        [&] { forward_typed<scalar_t>(w_hh, b_ih, b_hh, hs, cs, gates); });
}

void lstm_backward_steps(const Tensor& dy, const Tensor& w_hh, const Tensor& hs, const Tensor& cs,
                         const Tensor& gates, const Tensor& dh, const Tensor& dc, const Tensor& dgates, bool need_dh0) {
  DEFINE_DISPATCH_FLOAT(gates.dtype(), "lstm_backward_steps", [&] {
    backward_typed<scalar_t>(dy, w_hh, cs, gates, dh, dc, dgates, need_dh0, hs.shape()[2]);
  });
}

}  // namespace define::kernels::ref
