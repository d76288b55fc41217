// CUDA dropout: the masked scaling y_i = keep_i ? x_i * scale : 0 of kernels/dropout.h, with
// keep_i a pure function of (seed, offset + i) through Philox 4x32-10 (core/philox.h), so the
// output is bit-identical to the CPU paths. Entry point and checks: kernels/dropout.cpp;
// reference: kernels/ref/dropout.cpp; tests: tests/ops/dropout_test.cpp (mode emu) and
// tests/cuda/dropout_kernels_test.cpp.
//
// Stream word w is lane w % 4 of Philox block w / 4, so one thread computes one block and serves
// the (up to) four elements whose words it holds. Threads are aligned to the stream, not to the
// tensor: with an offset that is not a multiple of 4, the first and last blocks are partly
// outside [offset, offset + n) and those lanes are skipped. Grid-stride over blocks. When the
// offset is a multiple of 4 and the tensors are aligned to four elements (the usual case), a
// thread's four elements move as one vector access each way (16 bytes for float32): element by
// element, each lane of a warp would touch its own 32-byte sector and use 4 bytes of it.
//
// The keep test u >= p, with u = (word >> 8) / 2^24 as in philox::u32_to_unit_float, is done on
// the integers: (word >> 8) >= ceil(p * 2^24). That is exact (p * 2^24 is exact in double and
// the left side is an integer), so it equals the float comparison, as on the CPU fast path.
#include <cmath>
#include <cstdint>

#include "core/dtype.h"
#include "core/philox.h"
#include "kernels/dropout.h"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/float16.cuh"

namespace define::kernels::DEFINE_CUDA_NS {
namespace {

// Four consecutive elements: one vector load or store.
template <typename T>
using Quad = Vec<T, 4>;

// 16-bit tensors: read as float, scaled in float, rounded once (kernels/cuda/float16.cuh).
// quads: offset % 4 == 0 and x, y aligned to Quad<T> (whole blocks then move as Quads).
template <typename T>
__global__ void dropout_kernel(const T* __restrict__ x, T* __restrict__ y, std::uint64_t n, std::uint64_t offset,
                               std::uint64_t first_block, std::uint64_t num_blocks, std::uint32_t key_lo,
                               std::uint32_t key_hi, std::uint32_t threshold, compute_t<T> scale, bool quads) {
  const std::uint64_t step = static_cast<std::uint64_t>(gridDim.x) * blockDim.x;
  for (std::uint64_t k = static_cast<std::uint64_t>(blockIdx.x) * blockDim.x + threadIdx.x; k < num_blocks;
       k += step) {
    const std::uint64_t block = first_block + k;
    const philox::U32x4 counter{{static_cast<std::uint32_t>(block), static_cast<std::uint32_t>(block >> 32), 0u, 0u}};
    const philox::U32x4 words = philox::philox4x32_10(counter, key_lo, key_hi);
    if (quads && 4 * block + 4 <= offset + n) {  // 4 * block >= offset: offset is a multiple of 4
      const std::uint64_t i = 4 * block - offset;
      const Quad<T> in = *reinterpret_cast<const Quad<T>*>(x + i);
      Quad<T> out;
#pragma unroll
      for (int lane = 0; lane < 4; ++lane)
        out.v[lane] =
            store_value<T>((words.v[lane] >> 8) >= threshold ? load_value(in.v[lane]) * scale : compute_t<T>(0));
      *reinterpret_cast<Quad<T>*>(y + i) = out;
      continue;
    }
#pragma unroll
    for (int lane = 0; lane < 4; ++lane) {
      const std::uint64_t pos = 4 * block + static_cast<std::uint64_t>(lane);  // stream word
      if (pos < offset || pos - offset >= n) continue;  // outside this tensor's words
      const std::uint64_t i = pos - offset;
      y[i] = store_value<T>((words.v[lane] >> 8) >= threshold ? load_value(x[i]) * scale : compute_t<T>(0));
    }
  }
}

template <typename T>
void apply_typed(const Tensor& x, const Tensor& y, double p, std::uint64_t seed, std::uint64_t offset) {
  const auto n = static_cast<std::uint64_t>(x.numel());
  if (n == 0) return;
  const std::uint64_t first_block = offset / 4, last_block = (offset + n - 1) / 4;
  const std::uint64_t num_blocks = last_block - first_block + 1;
  const auto threshold = static_cast<std::uint32_t>(std::ceil(p * 16777216.0));
  const auto aligned = [](const void* p) { return reinterpret_cast<std::uintptr_t>(p) % sizeof(Quad<T>) == 0; };
  const bool quads = offset % 4 == 0 && aligned(x.data<T>()) && aligned(y.data<T>());
  launch_checked("dropout", dropout_kernel<T>, grid_for(static_cast<std::int64_t>(num_blocks)), kBlockSize, 0,
                 x.data<T>(), y.data<T>(), n, offset, first_block, num_blocks, static_cast<std::uint32_t>(seed),
                 static_cast<std::uint32_t>(seed >> 32), threshold, dropout_scale<compute_t<T>>(p), quads);
}

}  // namespace

// x and y are contiguous. The entry point admits 0 <= p < 1; p = 0 keeps everything (threshold 0,
// scale 1) and p = 1 would drop everything (threshold 2^24 exceeds every 24-bit value, and the
// infinite scale is never applied), as in the reference.
void dropout_apply(const Tensor& x, const Tensor& y, double p, std::uint64_t seed, std::uint64_t offset) {
  DEFINE_DISPATCH_FLOATING(x.dtype(), "dropout", [&] { apply_typed<scalar_t>(x, y, p, seed, offset); });
}

}  // namespace define::kernels::DEFINE_CUDA_NS
