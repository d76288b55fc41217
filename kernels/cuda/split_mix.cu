// CUDA split-mix family: the DeFINE/DExTra input mixer with the GLT channel shuffle folded in
// (kernels/split_mix.h), forward and backward. Entry points and checks: kernels/split_mix.cpp;
// reference: kernels/ref/split_mix.cpp; tests: tests/ops/split_mix_test.cpp (every case in mode
// emu) and tests/cuda/split_mix_kernels_test.cpp.
//
// Both directions are one grid-stride launch of kBlockSize threads, one output element per
// thread and step, so consecutive threads write consecutive addresses (coalesced stores); each
// thread works out where its element comes from with a few integer divisions (a gather: no
// atomics, no shared memory, no barriers, and the result is independent of the schedule).
//   forward:  element (row, f) of out [T, p + q];
//   backward: element (row, e) of the concatenated gradients [dx | dy], e < p writing dx,
//             e >= p writing dy, both read from dout by the inverse of the forward map.
// Column arithmetic is 32-bit (the entry point caps p + q below 2^31); rows and offsets 64-bit.
#include <cstdint>

#include "core/dtype.h"
#include "kernels/cuda/common.cuh"

namespace define::kernels::DEFINE_CUDA_NS {
namespace {

// Column layout of one row, shared by both kernels. Chunk c of the output is
// [x cols c*pc .. c*pc+pc-1 | shuffled-y positions c*qc .. c*qc+qc-1]; shuffled position j holds
// y[(j mod s) * qs + j / s] (s = 1: y[j]).
struct MixLayout {
  std::uint32_t width;  // p + q, the output width
  std::uint32_t p;      // x width
  std::uint32_t pc;     // x chunk width p / g
  std::uint32_t qc;     // y chunk width q / g
  std::uint32_t s;      // shuffle groups (1: no shuffle)
  std::uint32_t qs;     // shuffle group width q / s
};

// A 2-d operand's element strides.
struct RowCol {
  std::int64_t row, col;
};

// Column of y read by shuffled position j.
__device__ __forceinline__ std::uint32_t shuffle_source(std::uint32_t j, const MixLayout& l) {
  return l.s == 1 ? j : (j % l.s) * l.qs + j / l.s;
}

// Shuffled position that reads column m of y (the inverse of shuffle_source).
__device__ __forceinline__ std::uint32_t shuffle_target(std::uint32_t m, const MixLayout& l) {
  return l.s == 1 ? m : (m % l.qs) * l.s + m / l.qs;
}

template <typename T>
__global__ void split_mix_forward_kernel(const T* __restrict__ x, RowCol xs, const T* __restrict__ y, RowCol ys,
                                         T* __restrict__ out, std::int64_t n, MixLayout l) {
  const std::int64_t step = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  const std::uint32_t pair = l.pc + l.qc;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step) {
    const std::int64_t row = i / l.width;
    const auto f = static_cast<std::uint32_t>(i - row * l.width);
    const std::uint32_t chunk = f / pair, r = f - chunk * pair;
    if (r < l.pc) {
      out[i] = x[row * xs.row + static_cast<std::int64_t>(chunk * l.pc + r) * xs.col];
    } else {
      const std::uint32_t col = shuffle_source(chunk * l.qc + (r - l.pc), l);
      out[i] = y[row * ys.row + static_cast<std::int64_t>(col) * ys.col];
    }
  }
}

template <typename T>
__global__ void split_mix_backward_kernel(const T* __restrict__ gout, RowCol gs, T* __restrict__ gx,
                                          T* __restrict__ gy, std::int64_t n, MixLayout l) {
  const std::int64_t step = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  const std::uint32_t pair = l.pc + l.qc, q = l.width - l.p;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step) {
    const std::int64_t row = i / l.width;
    const auto e = static_cast<std::uint32_t>(i - row * l.width);
    const T* grow = gout + row * gs.row;
    if (e < l.p) {  // dx[row, e]: x chunk e / pc, offset e % pc
      const std::uint32_t chunk = e / l.pc;
      const std::uint32_t f = chunk * pair + (e - chunk * l.pc);
      gx[row * l.p + e] = grow[static_cast<std::int64_t>(f) * gs.col];
    } else {  // dy[row, m]: shuffled position j, y chunk j / qc
      const std::uint32_t m = e - l.p, j = shuffle_target(m, l);
      const std::uint32_t chunk = j / l.qc;
      const std::uint32_t f = chunk * pair + l.pc + (j - chunk * l.qc);
      gy[row * q + m] = grow[static_cast<std::int64_t>(f) * gs.col];
    }
  }
}

MixLayout layout_of(std::int64_t p, std::int64_t q, std::int64_t groups, std::int64_t shuffle_groups) {
  return {static_cast<std::uint32_t>(p + q),          static_cast<std::uint32_t>(p),
          static_cast<std::uint32_t>(p / groups),     static_cast<std::uint32_t>(q / groups),
          static_cast<std::uint32_t>(shuffle_groups), static_cast<std::uint32_t>(q / shuffle_groups)};
}

RowCol strides_of(const Tensor& t) { return {t.strides()[0], t.strides()[1]}; }

}  // namespace

// x [T, p], y [T, q]: any strides; out [T, p + q] contiguous; groups divides p and q;
// shuffle_groups >= 1 divides q (checked by the entry point).
void split_mix(const Tensor& x, const Tensor& y, const Tensor& out, std::int64_t groups, std::int64_t shuffle_groups) {
  const MixLayout l = layout_of(x.shape()[1], y.shape()[1], groups, shuffle_groups);
  const std::int64_t n = out.numel();
  DEFINE_DISPATCH_ALL(out.dtype(), "split_mix", [&] {
    launch_checked("split_mix", split_mix_forward_kernel<scalar_t>, grid_for(n), kBlockSize, 0, x.data<scalar_t>(),
                   strides_of(x), y.data<scalar_t>(), strides_of(y), out.data<scalar_t>(), n, l);
  });
}

// grad_out [T, p + q]: any strides; grad_x [T, p] and grad_y [T, q] contiguous, every element
// written once.
void split_mix_backward(const Tensor& grad_out, const Tensor& grad_x, const Tensor& grad_y, std::int64_t groups,
                        std::int64_t shuffle_groups) {
  const MixLayout l = layout_of(grad_x.shape()[1], grad_y.shape()[1], groups, shuffle_groups);
  const std::int64_t n = grad_out.numel();
  DEFINE_DISPATCH_ALL(grad_out.dtype(), "split_mix_backward", [&] {
    launch_checked("split_mix_backward", split_mix_backward_kernel<scalar_t>, grid_for(n), kBlockSize, 0,
                   grad_out.data<scalar_t>(), strides_of(grad_out), grad_x.data<scalar_t>(),
                   grad_y.data<scalar_t>(), n, l);
  });
}

}  // namespace define::kernels::DEFINE_CUDA_NS
