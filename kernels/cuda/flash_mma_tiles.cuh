// What the tensor-core attention kernels (flash_attention_mma.cu, flash_rel_attention_mma.cu) share:
// 16-bit tile loads into shared memory (asynchronous copies from sm_80), the m16n8k8 products of a
// warp's 16 rows against shared tiles or against fragments held in registers, fragment stores, and
// the host side's architecture query. The fragment layouts are the PTX ISA's (kernels/cuda/mma.cuh):
// lane 4 g + t holds rows g and g + 8, columns 2 t and 2 t + 1 of each 16 x 8 accumulator tile.
//
// Included by kernel files only, after flash_tiles.cuh; everything here is in an anonymous namespace
// inside the backend namespace.
#pragma once

#include <cstdint>
#include <type_traits>

#include "core/float16.h"
#include "kernels/cuda/async_copy.cuh"
#include "kernels/cuda/flash_tiles.cuh"
#include "kernels/cuda/float16.cuh"
#include "kernels/cuda/mma.cuh"

namespace define::kernels::DEFINE_CUDA_NS {
namespace {

constexpr int kMmaWarps = kFlashThreads / 32;
constexpr int kMmaRows = 16 * kMmaWarps;  // a block's query rows: 16 per warp

// tile[r][c] = src[(row0 + r) * width + c] for r < n, 0 <= row0 + r < rows and c < width, 0 elsewhere
// (c < kCols): 16-bit words as they are. tile[r] is a shared row of a multiple of 8 words, 16-byte
// aligned (an array's row, or a ring's). Rows whose width is a multiple of 8 from a 16-byte aligned
// source (head dims 32, 64, 128 and every multiple of 8) move in 16-byte pieces: a warp's request is
// 512 bytes, where 2-byte words made it 64 and left the copy latency-bound (kernel_bench --profile).
// The pieces are asynchronous copies (kernels/cuda/async_copy.cuh; plain loads and stores before
// sm_80): the caller commits them and waits before its barrier. Other widths are copied word by word
// at once.
template <int kCols, typename Tile>
__device__ __forceinline__ void load_rows(Tile&& tile, int n, const std::uint16_t* __restrict__ src, std::int64_t row0,
                                          std::int64_t rows, int width) {
  static_assert(kCols % 8 == 0 && sizeof(tile[0]) % 16 == 0, "16-byte pieces of shared rows");
  if (width % 8 == 0 && reinterpret_cast<std::uintptr_t>(src) % 16 == 0) {  // block-uniform
    constexpr int kPieces = kCols / 8;
#pragma unroll 1
    for (int t = threadIdx.x; t < n * kPieces; t += kFlashThreads) {
      const int r = t / kPieces, c = 8 * (t % kPieces);
      const std::int64_t g = row0 + r;
      const bool inside = g >= 0 && g < rows && c < width;
      copy_async_16(&tile[r][c], inside ? src + g * width + c : src, inside ? 16 : 0);
    }
    return;
  }
#pragma unroll 4
  for (int t = threadIdx.x; t < n * kCols; t += kFlashThreads) {
    const int r = t / kCols, c = t % kCols;
    const std::int64_t g = row0 + r;
    tile[r][c] = g >= 0 && g < rows && c < width ? src[g * width + c] : std::uint16_t{0};
  }
}
// The same for the kRowsT rows of a shared array.
template <int kRowsT, int kCols, int kStride>
__device__ __forceinline__ void load_words(std::uint16_t (&tile)[kRowsT][kStride],
                                           const std::uint16_t* __restrict__ src, std::int64_t row0, std::int64_t rows,
                                           int width) {
  load_rows<kCols>(tile, kRowsT, src, row0, rows, width);
}

// d += a * b on the tensor cores, for T's format.
template <typename T>
__device__ __forceinline__ void mma_16x8x8(float (&d)[4], const std::uint32_t (&a)[2], const std::uint32_t (&b)[1]) {
  if constexpr (std::is_same_v<T, Half>)
    mma_m16n8k8_f16_f32(d, a, b, d);
  else
    mma_m16n8k8_bf16_f32(d, a, b, d);
}

template <typename T>
__device__ __forceinline__ std::uint16_t to_bits(float x) {
  return store_value<T>(x).bits;
}

// acc[n] += A B^T for the warp's 16 rows of a (from a_row0) against rows b_row0 + 8 n .. + 7 of b, over
// kD columns: A's fragment by ldmatrix.x2 of its rows (lanes 16-31 repeat valid addresses), B's by
// ldmatrix.x1 of b's rows (b row-major is B^T column-major). Element e of acc[n] is (row g + 8 (e >> 1),
// column 8 n + 2 t + (e & 1)) of the product.
template <typename T, int kD, int kN, typename ATile, typename BTile>
__device__ __forceinline__ void add_rows_product(float (&acc)[kN][4], const ATile& a, int a_row0, const BTile& b,
                                                 int lane, int b_row0 = 0) {
#pragma unroll
  for (int kk = 0; kk < kD / 8; ++kk) {
    std::uint32_t af[2];
    ldmatrix_x2(af, &a[a_row0 + lane % 16][8 * kk]);
#pragma unroll
    for (int n = 0; n < kN; ++n) {
      std::uint32_t bf[1];
      ldmatrix_x1(bf, &b[b_row0 + 8 * n + lane % 8][8 * kk]);
      mma_16x8x8<T>(acc[n], af, bf);
    }
  }
}

// The A fragments of the warp's 16 rows of a (from a_row0) over kD columns, as add_rows_product loads
// them, for a kernel that multiplies the same rows by every tile; and that product from them.
template <int kD, typename ATile>
__device__ __forceinline__ void load_row_fragments(std::uint32_t (&af)[kD / 8][2], const ATile& a, int a_row0,
                                                   int lane) {
#pragma unroll
  for (int kk = 0; kk < kD / 8; ++kk) ldmatrix_x2(af[kk], &a[a_row0 + lane % 16][8 * kk]);
}
template <typename T, int kD, int kN, typename BTile>
__device__ __forceinline__ void add_rows_product(float (&acc)[kN][4], const std::uint32_t (&af)[kD / 8][2],
                                                 const BTile& b, int lane, int b_row0 = 0) {
#pragma unroll
  for (int kk = 0; kk < kD / 8; ++kk)
#pragma unroll
    for (int n = 0; n < kN; ++n) {
      std::uint32_t bf[1];
      ldmatrix_x1(bf, &b[b_row0 + 8 * n + lane % 8][8 * kk]);
      mma_16x8x8<T>(acc[n], af[kk], bf);
    }
}

// acc[o] += F b for 16-bit A fragments F (16 x 8 kN, from registers) and b's rows b_row0 .. + 8 kN - 1,
// columns 8 o .. 8 o + 7: B's fragment by ldmatrix.x1.trans of b's rows.
template <typename T, int kN, int kO, typename BTile>
__device__ __forceinline__ void add_fragment_product(float (&acc)[kO][4], const std::uint32_t (&frag)[kN][2],
                                                     const BTile& b, int lane, int b_row0 = 0) {
#pragma unroll
  for (int n = 0; n < kN; ++n)
#pragma unroll
    for (int o = 0; o < kO; ++o) {
      std::uint32_t bf[1];
      ldmatrix_x1_trans(bf, &b[b_row0 + 8 * n + lane % 8][8 * o]);
      mma_16x8x8<T>(acc[o], frag[n], bf);
    }
}

template <int kN>
__device__ __forceinline__ void zero_fragments(float (&acc)[kN][4]) {
#pragma unroll
  for (int n = 0; n < kN; ++n)
#pragma unroll
    for (int e = 0; e < 4; ++e) acc[n][e] = 0.0f;
}

// The word a result is stored as: T's 16-bit bits, or the float itself.
template <typename T, typename Word>
__device__ __forceinline__ Word stored_word(float x) {
  if constexpr (std::is_same_v<Word, float>)
    return x;
  else
    return to_bits<T>(x);
}

// Row-major [rows][width] store of a warp's 16 x 8 kO float accumulator (rows row0 + local[h]), row h's
// values times factor[h], as T's 16-bit words (Word std::uint16_t) or as floats (T = Word = float). A
// lane holds two adjacent columns of each row: one store of the pair where the width is even (for
// 16-bit words a warp's request then uses half of each sector where 2-byte stores used a quarter),
// else one store each.
template <typename T, int kO, typename Word>
__device__ __forceinline__ void store_fragments(Word* __restrict__ dst, const float (&acc)[kO][4],
                                                const float (&factor)[2], const int (&local)[2], std::int64_t row0,
                                                std::int64_t rows, int width, int t) {
  using Pair = Vec<Word, 2>;
  const bool pairs = width % 2 == 0 && reinterpret_cast<std::uintptr_t>(dst) % sizeof(Pair) == 0;  // block-uniform
#pragma unroll
  for (int o = 0; o < kO; ++o)
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      const int col = 8 * o + 2 * t;
      const std::int64_t row = row0 + local[h];
      if (row >= rows || col >= width) continue;
      const Pair pair{
          {stored_word<T, Word>(acc[o][2 * h] * factor[h]), stored_word<T, Word>(acc[o][2 * h + 1] * factor[h])}};
      if (pairs) {
        *reinterpret_cast<Pair*>(dst + row * width + col) = pair;
      } else {
        dst[row * width + col] = pair.v[0];
        if (col + 1 < width) dst[row * width + col + 1] = pair.v[1];
      }
    }
}

// A row of an accumulator fragment lies across the four lanes of a group (lane / 4): its max and its
// sum there, the same bits in every lane of the group.
constexpr int kFragmentRowLanes = 4;
__device__ __forceinline__ float fragment_row_max(float x) { return group_max<kFragmentRowLanes>(x); }
__device__ __forceinline__ float fragment_row_sum(float x) { return group_sum<kFragmentRowLanes>(x); }

// One key tile of the online softmax of the lane's two rows (local[0], local[1] of the block), on
// the fragments of S: sc holds the tile's scaled scores, -inf where masked (element e of sc[n] is
// row local[e >> 1], key 8 n + 2 t + (e & 1)). Updates each row's running max m and this lane's part
// of its sum l (the group's four lanes are summed at the end), rescales the output fragments acc,
// and gives P, dropped out by keep and rounded to T, as the A fragments of P V.
template <typename T, int kN, int kO, int kKeepRows, int kKeepKeys>
__device__ __forceinline__ void online_softmax_fragments(const float (&sc)[kN][4], float (&m)[2], float (&l)[2],
                                                         float (&acc)[kO][4], std::uint32_t (&pa)[kN][2],
                                                         const std::uint8_t (&keep)[kKeepRows][kKeepKeys],
                                                         const int (&local)[2], const FlashDropout& drop, int t) {
  float tile_max[2] = {neg_inf(), neg_inf()};
#pragma unroll
  for (int n = 0; n < kN; ++n)
#pragma unroll
    for (int e = 0; e < 4; ++e) tile_max[e >> 1] = fmaxf(tile_max[e >> 1], sc[n][e]);
  float alpha[2], m_new[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    m_new[h] = fmaxf(m[h], fragment_row_max(tile_max[h]));
    // No valid key so far: nothing to rescale (and exp(-inf - -inf) would be NaN).
    alpha[h] = m_new[h] == neg_inf() ? 1.0f : dev_exp(m[h] - m_new[h]);
  }
  float sum[2] = {0.0f, 0.0f};
#pragma unroll
  for (int n = 0; n < kN; ++n) {
    float p[4];
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int h = e >> 1, c = 8 * n + 2 * t + (e & 1);
      const float pe = sc[n][e] == neg_inf() ? 0.0f : dev_exp(sc[n][e] - m_new[h]);
      sum[h] += pe;
      // keep is written for every valid element, and pe > 0 only there.
      p[e] = !drop.on ? pe : (pe > 0.0f && keep[local[h]][c] != 0 ? pe * drop.drop_scale : 0.0f);
    }
    pa[n][0] = mma_pack(to_bits<T>(p[0]), to_bits<T>(p[1]));
    pa[n][1] = mma_pack(to_bits<T>(p[2]), to_bits<T>(p[3]));
  }
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    l[h] = l[h] * alpha[h] + sum[h];
    m[h] = m_new[h];
  }
#pragma unroll
  for (int o = 0; o < kO; ++o)
#pragma unroll
    for (int e = 0; e < 4; ++e) acc[o][e] *= alpha[e >> 1];
}

// The end of a forward: out = acc / l rounded to T and lse = m + log l for the lane's two rows of
// [rows][width] out (row0 + local[h]; out and lse point at this (b, h)'s rows); a row that saw no key
// gets zeros and lse -inf.
template <typename T, int kO>
__device__ __forceinline__ void finish_fragments(const float (&m)[2], const float (&l)[2], const float (&acc)[kO][4],
                                                 std::uint16_t* __restrict__ out, float* __restrict__ lse,
                                                 const int (&local)[2], std::int64_t row0, std::int64_t rows, int width,
                                                 int t) {
  float inv[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const float total = fragment_row_sum(l[h]);
    const bool any = m[h] != neg_inf();
    inv[h] = any ? 1.0f / total : 0.0f;
    const std::int64_t row = row0 + local[h];
    if (t == 0 && row < rows) lse[row] = any ? m[h] + dev_log(total) : neg_inf();
  }
  store_fragments<T>(out, acc, inv, local, row0, rows, width, t);
}

int device_arch(int index) {
  int major = 0, minor = 0;
  DEFINE_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, index));
  DEFINE_CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, index));
  return 10 * major + minor;
}

const std::uint16_t* words(const Tensor& t) { return reinterpret_cast<const std::uint16_t*>(t.raw_data()); }
std::uint16_t* words_or_null(const Tensor& t) {
  return t.defined() ? reinterpret_cast<std::uint16_t*>(t.raw_data()) : nullptr;
}

}  // namespace
}  // namespace define::kernels::DEFINE_CUDA_NS
