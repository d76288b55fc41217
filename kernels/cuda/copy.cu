// CUDA copy family: strided copy with dtype cast and broadcast (copy_into), gradient accumulation
// (accumulate_into) and fill. Entry points and checks: kernels/copy.cpp; reference:
// kernels/ref/copy.cpp; tests: every op-harness case in mode emu (tests/ops/*) plus the emu copy
// kernel tests of tests/cuda/emu_device_test.cpp and the 64-bit offsets test of
// tests/cuda/elementwise_kernels_test.cpp.
//
// One grid-stride kernel per operation. The host side coalesces dims with the TensorIterator, so
// a contiguous copy is a flat loop whatever its rank; when every operand is flat the kernel skips
// the offset arithmetic altogether, and the rest is 32-bit wherever the tensors allow it.
//
// A transposing copy (the destination's innermost dim is the source's strided one, and the source
// is contiguous along another dim) goes through shared-memory tiles instead: a block reads a
// 32 x 32 tile along the source's contiguous dim and writes it along the destination's, so both
// sides move whole 32-byte sectors. The per-element loop would read one element per sector at the
// source's stride (an eighth of each sector it moves, for float32).
#include <algorithm>
#include <atomic>
#include <climits>
#include <cstdint>
#include <type_traits>
#include <vector>

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

// Tiles of a transposing copy: dst[b](r, c) = src[b](r, c) where, in elements, dst(r, c) is at
// r * dst_row_stride + c and src(r, c) at r + c * src_col_stride, for every batch b of up to two
// other dims (b = b0 * batch.inner + b1; batch.dst/src give each operand's strides of b0 and b1).
// Blocks of 32 x 8 threads; tile rows are padded so that reading a tile column touches 32
// different banks.
constexpr int kTile = 32, kTileRows = 8;

struct TileBatch {
  std::uint32_t count = 1, inner = 1;  // batches, and the size of the inner batch dim
  std::int64_t dst[2] = {0, 0}, src[2] = {0, 0};
};

// No __launch_bounds__: with it, ptxas for sm_90 spills 12 bytes at the same 40 registers.
template <typename D, typename S>
__global__ void transpose_copy_kernel(D* __restrict__ dst, const S* __restrict__ src, std::int64_t rows,
                                      std::int64_t cols, std::int64_t dst_row_stride, std::int64_t src_col_stride,
                                      TileBatch batch) {
  // 16-bit values wait in the tile as their bits (shared memory holds trivial types only). A tile
  // row is an odd number of 4-byte words (33 for 4 bytes, 17 for 2, 9 for 1), so the 32 rows a warp
  // reads down a column fall in 32 different banks; 8-byte values go in half-warp phases and need
  // only the one extra entry.
  using Held = std::conditional_t<is_float16_v<S>, std::uint16_t, S>;
  constexpr int kPad = sizeof(Held) >= 4 ? 1 : int(4 / sizeof(Held));
  EMU_STATIC_SHARED(tile, Held[kTile][kTile + kPad]);
  const int tx = int(threadIdx.x), ty = int(threadIdx.y);
  const std::int64_t r0 = std::int64_t(blockIdx.y) * kTile, c0 = std::int64_t(blockIdx.x) * kTile;
  // Batch indices in 32 bits (the host checks that they fit): no 64-bit division subroutine.
  for (std::uint32_t b = blockIdx.z; b < batch.count; b += gridDim.z) {
    const std::uint32_t b0 = b / batch.inner, b1 = b % batch.inner;
    const std::int64_t dst_base = b0 * batch.dst[0] + b1 * batch.dst[1];
    const std::int64_t src_base = b0 * batch.src[0] + b1 * batch.src[1];
    // Read along the source's contiguous dim (r): lane tx takes row r0 + tx of columns c0 + k.
    // A fixed trip count, unrolled: a thread's four loads are in flight together.
    const bool row_in = r0 + tx < rows;
    const S* from = src + src_base + (r0 + tx) + (c0 + ty) * src_col_stride;
#pragma unroll
    for (int i = 0; i < kTile / kTileRows; ++i) {
      const int k = ty + i * kTileRows;
      if (row_in && c0 + k < cols) {
        const S v = from[i * kTileRows * src_col_stride];
        if constexpr (is_float16_v<S>)
          tile[k][tx] = v.bits;
        else
          tile[k][tx] = v;
      }
    }
    __syncthreads();
    // Write along the destination's contiguous dim (c): lane tx takes column c0 + tx of rows r0 + k.
    const bool col_in = c0 + tx < cols;
    D* to = dst + dst_base + (r0 + ty) * dst_row_stride + (c0 + tx);
#pragma unroll
    for (int i = 0; i < kTile / kTileRows; ++i) {
      const int k = ty + i * kTileRows;
      if (col_in && r0 + k < rows) {
        D* at = to + i * kTileRows * dst_row_stride;
        if constexpr (is_float16_v<S>)
          *at = convert_value<D>(S::from_bits(tile[tx][k]));
        else
          *at = convert_value<D>(tile[tx][k]);
      }
    }
    __syncthreads();  // the tile is refilled for the next batch
  }
}

// The transposing copy's dims: the destination's contiguous innermost dim (cols) and the source's
// contiguous dim (rows), each at least half a tile long (shorter ones waste most of a tile), and at
// most two other dims; false when the copy is not of that form.
struct TransposePlan {
  std::int64_t rows = 0, cols = 0, dst_row_stride = 0, src_col_stride = 0;
  TileBatch batch;
};

bool plan_transpose(const TensorIterator& it, TransposePlan& plan) {
  const int nd = it.ndim(), inner = nd - 1;
  if (nd < 2 || nd > 4 || it.stride(0, inner) != 1 || it.stride(1, inner) == 1) return false;
  int row_dim = -1;
  for (int d = 0; d < inner; ++d)
    if (it.stride(1, d) == 1 && it.shape()[d] > 1) row_dim = d;
  if (row_dim < 0) return false;
  plan.rows = it.shape()[row_dim];
  plan.cols = it.shape()[inner];
  if (plan.rows < kTile / 2 || plan.cols < kTile / 2 || ceil_div(plan.rows, kTile) > 65535) return false;
  plan.dst_row_stride = it.stride(0, row_dim);
  plan.src_col_stride = it.stride(1, inner);
  std::vector<int> batch_dims;
  for (int d = 0; d < inner; ++d)
    if (d != row_dim) batch_dims.push_back(d);
  std::int64_t count = 1;
  for (std::size_t k = 0; k < batch_dims.size(); ++k) {
    const int d = batch_dims[k];
    const std::size_t slot = batch_dims.size() == 1 ? 1 : k;  // one batch dim: the inner slot
    plan.batch.dst[slot] = it.stride(0, d);
    plan.batch.src[slot] = it.stride(1, d);
    count *= it.shape()[d];
  }
  if (count > INT32_MAX - 65535) return false;  // batch indices in 32 bits
  plan.batch.count = static_cast<std::uint32_t>(count);
  plan.batch.inner = batch_dims.empty() ? 1u : static_cast<std::uint32_t>(it.shape()[batch_dims.back()]);
  return true;
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
  TransposePlan plan;
  const bool transpose = plan_transpose(it, plan);
  DEFINE_DISPATCH_ALL(dst.dtype(), "copy", [&] {
    using D = scalar_t;
    DEFINE_DISPATCH_ALL(src.dtype(), "copy", [&] {
      if (transpose) {
        const dim3 grid(static_cast<unsigned>(ceil_div(plan.cols, kTile)),
                        static_cast<unsigned>(ceil_div(plan.rows, kTile)), std::min(plan.batch.count, 65535u));
        launch_checked("copy", transpose_copy_kernel<D, scalar_t>, grid, dim3(kTile, kTileRows), 0,
                       static_cast<D*>(dst.raw_data()), static_cast<const scalar_t*>(src.raw_data()), plan.rows,
                       plan.cols, plan.dst_row_stride, plan.src_col_stride, plan.batch);
        return;
      }
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
bool emu_kernels_profiled() { return ::cuda_emu::detail::kRaceHooks; }

}  // namespace define::kernels
#endif
