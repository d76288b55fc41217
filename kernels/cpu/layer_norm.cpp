// Fast CPU layer-norm kernels. Rows are independent, so both passes run OpenMP over rows with
// vectorisable inner loops (statistics accumulate in kLanes partial sums, then in double; float32
// runs the 16 lanes as explicit vectors, kernels/cpu/row_math.h says why).
// dweight/dbias are sums over rows: rather than atomics, rows are split into a number of chunks
// that depends only on the shape, each chunk sums into its own buffer, and the buffers are added
// in chunk order, so the result is bit-identical for any thread count.
#include "kernels/cpu/layer_norm.h"

#include <algorithm>
#include <cmath>
#include <type_traits>
#include <vector>

#include "kernels/cpu/row_math.h"

namespace define::kernels::cpu {
namespace {

constexpr std::int64_t kParallelGrain = 1 << 15;  // elements
constexpr int kLanes = 16;
constexpr std::int64_t kMaxChunks = 64;                   // parameter-gradient partial buffers
constexpr std::int64_t kMaxPartialElements = 1 << 21;     // cap on chunks * D (double buffers)

// Mean and 1/sqrt(var + eps) of one row, two-pass (stable when |mean| >> std).
template <typename T>
void row_stats(const T* x, std::int64_t d, double eps, double& mu, double& rs) {
  using row_math::FloatVec, row_math::kVecLanes, row_math::kVecs, row_math::load_vec, row_math::store_lanes;
  T acc[kLanes] = {};
  std::int64_t j = 0;
  if constexpr (std::is_same_v<T, float>) {
    FloatVec a[kVecs] = {};
    for (; j + kLanes <= d; j += kLanes)
      for (int v = 0; v < kVecs; ++v) a[v] += load_vec(x + j + v * kVecLanes);
    store_lanes(acc, a);
  } else {
    for (; j + kLanes <= d; j += kLanes)
      for (int l = 0; l < kLanes; ++l) acc[l] += x[j + l];
  }
  double s = 0;
  for (; j < d; ++j) s += x[j];
  for (int l = 0; l < kLanes; ++l) s += acc[l];
  mu = s / double(d);
  const T m = static_cast<T>(mu);
  T sq[kLanes] = {};
  j = 0;
  if constexpr (std::is_same_v<T, float>) {
    FloatVec q[kVecs] = {};
    for (; j + kLanes <= d; j += kLanes)
      for (int v = 0; v < kVecs; ++v) {
        const FloatVec c = load_vec(x + j + v * kVecLanes) - m;
        q[v] += c * c;
      }
    store_lanes(sq, q);
  } else {
    for (; j + kLanes <= d; j += kLanes)
      for (int l = 0; l < kLanes; ++l) sq[l] += (x[j + l] - m) * (x[j + l] - m);
  }
  double v = 0;
  for (; j < d; ++j) v += double(x[j] - m) * double(x[j] - m);
  for (int l = 0; l < kLanes; ++l) v += sq[l];
  rs = 1.0 / std::sqrt(v / double(d) + eps);
}

template <typename T>
void forward_typed(const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& y, const Tensor& mean,
                   const Tensor& rstd, double eps) {
  const std::int64_t d = x.shape().back(), rows = x.numel() / d;
  const T* xp = x.data<T>();
  const T* w = weight.defined() ? weight.data<T>() : nullptr;
  const T* b = bias.defined() ? bias.data<T>() : nullptr;
  T* yp = y.data<T>();
  T* mp = mean.data<T>();
  T* rp = rstd.data<T>();
#pragma omp parallel for if (rows * d > kParallelGrain) schedule(static)
  for (std::int64_t r = 0; r < rows; ++r) {
    const T* xr = xp + r * d;
    T* yr = yp + r * d;
    double mu, rs;
    row_stats(xr, d, eps, mu, rs);
    mp[r] = static_cast<T>(mu);
    rp[r] = static_cast<T>(rs);
    // (x - mean) first: for rows whose mean is large next to their spread, x * rstd - mean * rstd
    // would cancel catastrophically in float32.
    const T m = static_cast<T>(mu), a = static_cast<T>(rs);
    if (w && b) {
      for (std::int64_t j = 0; j < d; ++j) yr[j] = (xr[j] - m) * a * w[j] + b[j];
    } else if (w) {
      for (std::int64_t j = 0; j < d; ++j) yr[j] = (xr[j] - m) * a * w[j];
    } else if (b) {
      for (std::int64_t j = 0; j < d; ++j) yr[j] = (xr[j] - m) * a + b[j];
    } else {
      for (std::int64_t j = 0; j < d; ++j) yr[j] = (xr[j] - m) * a;
    }
  }
}

template <typename T>
void backward_typed(const Tensor& dy, const Tensor& x, const Tensor& weight, const Tensor& mean, const Tensor& rstd,
                    const Tensor& dx, const Tensor& dweight, const Tensor& dbias) {
  const std::int64_t d = x.shape().back(), rows = x.numel() / d;
  const T* xp = x.data<T>();
  const T* gp = dy.data<T>();
  const T* w = weight.defined() ? weight.data<T>() : nullptr;
  const T* mp = mean.data<T>();
  const T* rp = rstd.data<T>();
  T* dxp = dx.defined() ? dx.data<T>() : nullptr;
  const bool params = dweight.defined() || dbias.defined();

  // The chunking depends only on (rows, d): that is what makes the parameter gradients deterministic.
  const std::int64_t chunks =
      params ? std::max<std::int64_t>(1, std::min({rows, kMaxChunks, kMaxPartialElements / d})) : rows;
  const std::int64_t rows_per_chunk = (rows + chunks - 1) / chunks;
  std::vector<double> part_w(params ? chunks * d : 0, 0.0), part_b(params ? chunks * d : 0, 0.0);

#pragma omp parallel for if (rows * d > kParallelGrain) schedule(static)
  for (std::int64_t ch = 0; ch < chunks; ++ch) {
    double* pw = params ? part_w.data() + ch * d : nullptr;
    double* pb = params ? part_b.data() + ch * d : nullptr;
    const std::int64_t r_end = std::min(rows, (ch + 1) * rows_per_chunk);
    for (std::int64_t r = ch * rows_per_chunk; r < r_end; ++r) {
      const T* xr = xp + r * d;
      const T* gr = gp + r * d;
      const T mu = mp[r], rs = rp[r];
      if (params) {
        for (std::int64_t j = 0; j < d; ++j) {
          pw[j] += double(gr[j] * ((xr[j] - mu) * rs));
          pb[j] += double(gr[j]);
        }
      }
      if (!dxp) continue;
      // dx = rs * (g - mean(g) - xhat * mean(g * xhat)), g = dy * w.
      T acc_g[kLanes] = {}, acc_gx[kLanes] = {};
      std::int64_t j = 0;
      if constexpr (std::is_same_v<T, float>) {
        using row_math::FloatVec, row_math::kVecLanes, row_math::kVecs, row_math::load_vec, row_math::store_lanes;
        FloatVec g_lanes[kVecs] = {}, gx_lanes[kVecs] = {};
        for (; j + kLanes <= d; j += kLanes)
          for (int v = 0; v < kVecs; ++v) {
            const std::int64_t k = j + v * kVecLanes;
            const FloatVec g = w ? load_vec(gr + k) * load_vec(w + k) : load_vec(gr + k);
            g_lanes[v] += g;
            gx_lanes[v] += g * ((load_vec(xr + k) - mu) * rs);
          }
        store_lanes(acc_g, g_lanes);
        store_lanes(acc_gx, gx_lanes);
      } else {
        for (; j + kLanes <= d; j += kLanes)
          for (int l = 0; l < kLanes; ++l) {
            const T g = w ? gr[j + l] * w[j + l] : gr[j + l];
            acc_g[l] += g;
            acc_gx[l] += g * ((xr[j + l] - mu) * rs);
          }
      }
      double sum_g = 0, sum_gx = 0;
      for (; j < d; ++j) {
        const T g = w ? gr[j] * w[j] : gr[j];
        sum_g += g;
        sum_gx += double(g) * ((xr[j] - mu) * rs);
      }
      for (int l = 0; l < kLanes; ++l) {
        sum_g += acc_g[l];
        sum_gx += acc_gx[l];
      }
      const T mean_g = static_cast<T>(sum_g / double(d)), mean_gx = static_cast<T>(sum_gx / double(d));
      T* dr = dxp + r * d;
      for (std::int64_t k = 0; k < d; ++k) {
        const T g = w ? gr[k] * w[k] : gr[k];
        dr[k] = rs * (g - mean_g - ((xr[k] - mu) * rs) * mean_gx);
      }
    }
  }
  if (!params) return;
  T* dw = dweight.defined() ? dweight.data<T>() : nullptr;
  T* db = dbias.defined() ? dbias.data<T>() : nullptr;
#pragma omp parallel for if (chunks * d > kParallelGrain) schedule(static)
  for (std::int64_t j = 0; j < d; ++j) {
    double sw = 0, sb = 0;
    for (std::int64_t ch = 0; ch < chunks; ++ch) {  // fixed order
      sw += part_w[ch * d + j];
      sb += part_b[ch * d + j];
    }
    if (dw) dw[j] = static_cast<T>(sw);
    if (db) db[j] = static_cast<T>(sb);
  }
}

}  // namespace

void layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& y, const Tensor& mean,
                const Tensor& rstd, double eps) {
  DEFINE_DISPATCH_FLOAT(x.dtype(), "layer_norm", [&] { forward_typed<scalar_t>(x, weight, bias, y, mean, rstd, eps); });
}

void layer_norm_backward(const Tensor& dy, const Tensor& x, const Tensor& weight, const Tensor& mean,
                         const Tensor& rstd, const Tensor& dx, const Tensor& dweight, const Tensor& dbias) {
  DEFINE_DISPATCH_FLOAT(x.dtype(), "layer_norm_backward",
                        [&] { backward_typed<scalar_t>(dy, x, weight, mean, rstd, dx, dweight, dbias); });
}

}  // namespace define::kernels::cpu
