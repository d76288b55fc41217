// Fast CPU Adam update: one loop over the parameter, shared out over the OpenMP threads in
// contiguous ranges. The loop vectorises because this file is compiled with -fno-math-errno
// (CMakeLists.txt): sqrt stays correctly rounded, so the result is that of the scalar loop. Every
// operation is done in T with the scalars rounded to T, as kernels/optim.h specifies.
#include "kernels/cpu/optim.h"

#include <omp.h>

#include <cmath>

#include "core/dtype.h"

namespace define::kernels::cpu {
namespace {

constexpr std::int64_t kParallelGrain = 1 << 15;  // elements; below it one thread does all

template <typename T>
struct Scalars {
  T beta1, one_minus_beta1, beta2, one_minus_beta2, eps, neg_step_size, inv_bias_sqrt, l2, decay;
};

// HasL2 / HasDecay: the two optional terms as template switches, so the common case (Adam without
// weight decay) runs the loop with neither.
template <typename T, bool HasL2, bool HasDecay>
void adam_range(T* __restrict p, const T* __restrict g, T* __restrict m, T* __restrict v, std::int64_t n,
                const Scalars<T>& s) {
  for (std::int64_t i = 0; i < n; ++i) {
    T pi = p[i];
    T gi = g[i];
    if constexpr (HasL2) gi = gi + s.l2 * pi;
    if constexpr (HasDecay) pi = pi * s.decay;
    const T mi = m[i] * s.beta1 + s.one_minus_beta1 * gi;
    const T vi = v[i] * s.beta2 + s.one_minus_beta2 * (gi * gi);
    m[i] = mi;
    v[i] = vi;
    p[i] = pi + s.neg_step_size * (mi / (std::sqrt(vi) * s.inv_bias_sqrt + s.eps));
  }
}

template <typename T, bool HasL2, bool HasDecay>
void adam_parallel(T* p, const T* g, T* m, T* v, std::int64_t n, const Scalars<T>& s) {
#pragma omp parallel if (n > kParallelGrain)
  {
    const std::int64_t t = omp_get_thread_num(), nt = omp_get_num_threads();
    const std::int64_t lo = n * t / nt, hi = n * (t + 1) / nt;
    adam_range<T, HasL2, HasDecay>(p + lo, g + lo, m + lo, v + lo, hi - lo, s);
  }
}

template <typename T>
void adam_typed(const Tensor& p, const Tensor& g, const Tensor& m, const Tensor& v, double beta1, double beta2,
                double eps, double step_size, double inv_bias_sqrt, double l2, double decay) {
  const Scalars<T> s{static_cast<T>(beta1),         static_cast<T>(1 - beta1), static_cast<T>(beta2),
                     static_cast<T>(1 - beta2),     static_cast<T>(eps),       static_cast<T>(-step_size),
                     static_cast<T>(inv_bias_sqrt), static_cast<T>(l2),        static_cast<T>(decay)};
  T* pp = p.data<T>();
  const T* gp = g.data<T>();
  T* mp = m.data<T>();
  T* vp = v.data<T>();
  const std::int64_t n = p.numel();
  if (l2 != 0 && decay != 1) return adam_parallel<T, true, true>(pp, gp, mp, vp, n, s);
  if (l2 != 0) return adam_parallel<T, true, false>(pp, gp, mp, vp, n, s);
  if (decay != 1) return adam_parallel<T, false, true>(pp, gp, mp, vp, n, s);
  adam_parallel<T, false, false>(pp, gp, mp, vp, n, s);
}

}  // namespace

void adam_update(const Tensor& p, const Tensor& g, const Tensor& m, const Tensor& v, double beta1, double beta2,
                 double eps, double step_size, double inv_bias_sqrt, double l2, double decay) {
  DEFINE_DISPATCH_FLOAT(p.dtype(), "adam_update", [&] {
    adam_typed<scalar_t>(p, g, m, v, beta1, beta2, eps, step_size, inv_bias_sqrt, l2, decay);
  });
}

}  // namespace define::kernels::cpu
