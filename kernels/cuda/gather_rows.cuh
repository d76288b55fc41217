// A row gather in 16-byte pieces: out[p, :] = x[index[p], :] for contiguous rows of `width` elements
// whose bytes are a multiple of 16, from 16-byte aligned x and out: the lookup of the embedding
// (embedding.cu) and index_select along dim 0 (index.cu). The element-wise gathers those ops fall
// back to move 4 bytes a lane with one load in flight a thread (kernel_bench --profile: latency-
// bound at half the copy rate); here a thread has kPiecesInFlight 16-byte loads in flight, and
// consecutive threads read consecutive pieces of a row. A bad index is reported (index_check.cuh)
// and its row written as zeros, as the element-wise kernels do.
//
// Included by kernel files only, after common.cuh.
#pragma once

#include <cstdint>

#include "kernels/cuda/common.cuh"
#include "kernels/cuda/index_check.cuh"

namespace define::kernels::DEFINE_CUDA_NS {
namespace {

constexpr int kPiecesInFlight = 4;

template <typename T, typename I>
__global__ void __launch_bounds__(kBlockSize)
    gather_rows_kernel(T* __restrict__ out, const T* __restrict__ x, const I* __restrict__ index,
                       std::int64_t index_stride, std::int64_t rows, std::int64_t pieces_per_row, IndexCheck check) {
  EMU_CHECK_LAUNCH_BOUNDS(kBlockSize);
  using Piece = Vec16<T>;
  const std::int64_t pieces = rows * pieces_per_row;
  const std::int64_t threads = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  const Piece* src = reinterpret_cast<const Piece*>(x);
  Piece* dst = reinterpret_cast<Piece*>(out);
  // Each pass takes kPiecesInFlight pieces a thread, threads apart, all loaded before any is stored.
  for (std::int64_t base = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; base < pieces;
       base += kPiecesInFlight * threads) {
    Piece got[kPiecesInFlight];
    EMU_UNROLL
    for (int u = 0; u < kPiecesInFlight; ++u) {
      const std::int64_t e = base + u * threads;
      got[u] = Piece{};
      if (e >= pieces) continue;
      const std::int64_t p = e / pieces_per_row, c = e - p * pieces_per_row;
      const auto row = static_cast<std::int64_t>(index[p * index_stride]);
      if (check.in_range(row)) got[u] = src[row * pieces_per_row + c];
    }
#pragma unroll
    for (int u = 0; u < kPiecesInFlight; ++u) {
      const std::int64_t e = base + u * threads;
      if (e < pieces) dst[e] = got[u];
    }
  }
}

// Whether gather_rows applies: rows of `width` elements of T in whole 16-byte pieces, x and out
// 16-byte aligned.
template <typename T>
bool gather_rows_fits(const void* x, const void* out, std::int64_t width) {
  return (width * static_cast<std::int64_t>(sizeof(T))) % 16 == 0 && reinterpret_cast<std::uintptr_t>(x) % 16 == 0 &&
         reinterpret_cast<std::uintptr_t>(out) % 16 == 0;
}

// out [rows, width] = x[index[p * index_stride], :] (x contiguous rows of width); gather_rows_fits holds.
template <typename T, typename I>
void gather_rows(const char* op, T* out, const T* x, const I* index, std::int64_t index_stride, std::int64_t rows,
                 std::int64_t width, const IndexCheck& check) {
  const std::int64_t pieces_per_row = width * static_cast<std::int64_t>(sizeof(T)) / 16;
  launch_checked(op, gather_rows_kernel<T, I>, grid_for(ceil_div(rows * pieces_per_row, kPiecesInFlight)), kBlockSize,
                 0, out, x, index, index_stride, rows, pieces_per_row, check);
}

}  // namespace
}  // namespace define::kernels::DEFINE_CUDA_NS
