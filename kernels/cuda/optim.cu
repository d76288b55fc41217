// CUDA Adam update: the formula of kernels/optim.h, one thread per element in a grid-stride loop,
// every operation in T with the scalars rounded to T on the host (as on the CPU fast path). Entry
// point and checks: kernels/optim.cpp; reference: kernels/ref/optim.cpp; tests:
// tests/ops/optim_test.cpp (mode emu) and tests/cuda/optim_kernels_test.cpp.
#include <cmath>
#include <cstdint>

#include "core/dtype.h"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/device_math.cuh"

namespace define::kernels::DEFINE_CUDA_NS {
namespace {

template <typename T>
struct AdamScalars {
  T beta1, one_minus_beta1, beta2, one_minus_beta2, eps, neg_step_size, inv_bias_sqrt, l2, decay;
  bool has_l2, has_decay;
};

template <typename T>
__global__ void adam_kernel(T* __restrict__ p, const T* __restrict__ g, T* __restrict__ m, T* __restrict__ v,
                            std::int64_t n, AdamScalars<T> s) {
  const std::int64_t step = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step) {
    T pi = p[i];
    const T gi = s.has_l2 ? g[i] + s.l2 * pi : g[i];
    if (s.has_decay) pi = pi * s.decay;
    const T mi = m[i] * s.beta1 + s.one_minus_beta1 * gi;
    const T vi = v[i] * s.beta2 + s.one_minus_beta2 * (gi * gi);
    m[i] = mi;
    v[i] = vi;
    p[i] = pi + s.neg_step_size * (mi / (dev_sqrt(vi) * s.inv_bias_sqrt + s.eps));
  }
}

template <typename T>
void adam_typed(const Tensor& p, const Tensor& g, const Tensor& m, const Tensor& v, double beta1, double beta2,
                double eps, double step_size, double inv_bias_sqrt, double l2, double decay) {
  const AdamScalars<T> s{static_cast<T>(beta1),         static_cast<T>(1 - beta1), static_cast<T>(beta2),
                         static_cast<T>(1 - beta2),     static_cast<T>(eps),       static_cast<T>(-step_size),
                         static_cast<T>(inv_bias_sqrt), static_cast<T>(l2),        static_cast<T>(decay),
                         l2 != 0,                       decay != 1};
  launch_checked("adam_update", adam_kernel<T>, grid_for(p.numel()), kBlockSize, 0, p.data<T>(), g.data<T>(),
                 m.data<T>(), v.data<T>(), p.numel(), s);
}

}  // namespace

void adam_update(const Tensor& p, const Tensor& g, const Tensor& m, const Tensor& v, double beta1, double beta2,
                 double eps, double step_size, double inv_bias_sqrt, double l2, double decay) {
  DEFINE_DISPATCH_FLOAT(p.dtype(), "adam_update", [&] {
    adam_typed<scalar_t>(p, g, m, v, beta1, beta2, eps, step_size, inv_bias_sqrt, l2, decay);
  });
}

}  // namespace define::kernels::DEFINE_CUDA_NS
