// CUDA copy family: strided copy with dtype cast and broadcast (copy_into), gradient accumulation
// (accumulate_into) and fill. Entry points and checks: kernels/copy.cpp; reference:
// kernels/ref/copy.cpp; tests: every op-harness case in mode emu (tests/ops/*) plus the emu copy
// kernel tests of tests/cuda/emu_device_test.cpp and the 64-bit offsets test of
// tests/cuda/elementwise_kernels_test.cpp.
//
// One grid-stride kernel per operation. The host side coalesces dims with the TensorIterator, so
// a contiguous copy is a flat loop whatever its rank; when every operand is flat the kernel skips
// the offset arithmetic altogether, and the rest is 32-bit wherever the tensors allow it.
#include <atomic>
#include <cstdint>

#include "core/dtype.h"
#include "kernels/devices.h"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/float16.cuh"

namespace define::kernels::DEFINE_CUDA_NS {
namespace {

template <bool kIndex32, typename D, typename S>
__global__ void copy_kernel(D* __restrict__ dst, const S* __restrict__ src, std::int64_t n, bool flat,
                            OffsetCalc<2> calc) {
  for_each_element<kIndex32>(n, flat, calc, [&](const auto& off) { dst[off[0]] = convert_value<D>(src[off[1]]); });
}

template <bool kIndex32, typename T>
__global__ void accumulate_kernel(T* dst, const T* __restrict__ src, std::int64_t n, bool flat, OffsetCalc<2> calc) {
  for_each_element<kIndex32>(n, flat, calc, [&](const auto& off) {
    dst[off[0]] = store_value<T>(load_value(dst[off[0]]) + load_value(src[off[1]]));
  });
}

template <bool kIndex32, typename T>
__global__ void fill_kernel(T* dst, T value, std::int64_t n, bool flat, OffsetCalc<1> calc) {
  for_each_element<kIndex32>(n, flat, calc, [&](const auto& off) { dst[off[0]] = value; });
}

}  // namespace

// Overlapping dst/src (e.g. x.copy_(x.t())) is not supported here any more than on the CPU paths:
// the entry point's callers copy through a temporary when views alias.
void copy_into(const Tensor& dst, const Tensor& src) {
  const TensorIterator it("copy", {dst, src});
  const auto calc = make_offset_calc<2>("copy", it);
  DEFINE_DISPATCH_ALL(dst.dtype(), "copy", [&] {
    using D = scalar_t;
    DEFINE_DISPATCH_ALL(src.dtype(), "copy", [&] {
      dispatch_index_width(it, [&]<bool kIndex32>() {
        launch_checked("copy", copy_kernel<kIndex32, D, scalar_t>, grid_for(it.numel()), kBlockSize, 0,
                       static_cast<D*>(dst.raw_data()), static_cast<const scalar_t*>(src.raw_data()), it.numel(),
                       all_flat(it), calc);
      });
    });
  });
}

void accumulate_into(const Tensor& dst, const Tensor& src) {
  const TensorIterator it("accumulate", {dst, src});
  const auto calc = make_offset_calc<2>("accumulate", it);
  DEFINE_DISPATCH_ALL(dst.dtype(), "accumulate", [&] {
    dispatch_index_width(it, [&]<bool kIndex32>() {
      launch_checked("accumulate", accumulate_kernel<kIndex32, scalar_t>, grid_for(it.numel()), kBlockSize, 0,
                     dst.data<scalar_t>(), src.data<scalar_t>(), it.numel(), all_flat(it), calc);
    });
  });
}

void fill(const Tensor& dst, double value) {
  const TensorIterator it("fill", {dst});
  const auto calc = make_offset_calc<1>("fill", it);
  DEFINE_DISPATCH_ALL(dst.dtype(), "fill", [&] {
    dispatch_index_width(it, [&]<bool kIndex32>() {
      launch_checked("fill", fill_kernel<kIndex32, scalar_t>, grid_for(it.numel()), kBlockSize, 0,
                     dst.data<scalar_t>(), static_cast<scalar_t>(value), it.numel(), all_flat(it), calc);
    });
  });
}

}  // namespace define::kernels::DEFINE_CUDA_NS

#if !defined(__CUDACC__)
// The emulated device's index-width switch (kernels/devices.h), reachable from code that does not
// include the emulator.
namespace define::kernels {

void set_emu_index64(bool force) { cuda_emu::index64_forced().store(force, std::memory_order_relaxed); }
bool emu_index64() { return cuda_emu::index64_forced().load(std::memory_order_relaxed); }

}  // namespace define::kernels
#endif
