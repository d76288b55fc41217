// Transformer-XL's fused relative attention (kernels/flash_rel_attention.h) on tensor cores, for
// 16-bit q, k, v, r, u and w: mma.sync.m16n8k8 with float accumulation (float16 from sm_75, bfloat16
// from sm_80), fragments from shared memory by ldmatrix, the helpers of kernels/cuda/flash_mma_tiles.cuh.
// The same algorithm, masks, Philox dropout mask and kernel split as the FFMA kernels of
// kernels/cuda/flash_rel_attention.cu (forward over key tiles with an online softmax; backward as
// dk/dv per key tile, dq per query tile, dr per position tile and batch element, no atomics), and the
// same rounding as kernels/cuda/flash_attention_mma.cu: P, D and dS rounded to 16 bits where they
// multiply a tile, every sum in float, each result rounded once. The dq kernel writes dq = dqu + dqw
// in 16 bits and each query block's column sums of dqu and dqw; one small kernel sums those into du
// and dw, the same one the batch parts of dr: no float32 dq in memory, and two short launches where
// generic sums, an add and casts would take ten.
//
// The position term. Query i meets key j at position j + (Tq - 1) - i of r, so its score is
//   q_i . k_j + q_i . r_{j + (Tq - 1) - i} + u . k_j + w . r_{j + (Tq - 1) - i}.
// The first product is a tile product. The second lies on a shifted band: a warp's 16 queries meet a
// window of 16 + keys - 1 consecutive positions, and the dense product of the warp's queries with
// that window (one more tile product, 16 x (keys + 16)) holds every score needed, one per row at a
// column shifted by the row. The warp writes that product to its own rows of shared memory and reads
// each element back at its shifted column (__syncwarp between: no block barrier). The backward's
// kernels shift the same way: the dk/dv kernel (16 keys a warp) takes the product of each 16 queries
// of a query tile with their window of 32 positions; the dr kernel (16 positions a warp) the product
// of each 16 queries with their window of 32 keys (and of 16 rows of dO with 32 values); the dq
// kernel writes dS shifted into the window, so that dq's position part is one more fragment product
// with the band. The biases u and w join the queries' fragments (q + u for the keys, q + w for the
// band), rounded to 16 bits as the products load them, as Transformer-XL's reference forms them.
//
// Head dims up to 64: with the band tile and the window rows, 128 does not fit 48 KiB of static
// shared memory at 64 queries a block; wider heads take the FFMA kernels on widened copies.
//
// Registers: bounded at three blocks an SM from sm_80 (__launch_bounds__(128, kRelMmaBlocks): 168
// registers, which every kernel here fits without a spill; their shared memory, 49 KiB at most, three times
// fits sm_80's 164 KiB and sm_90's 228 KiB), so that half as many warps again hide the latency of their
// loads and shuffles; at two, the bound leaves 255 (without a bound ptxas fitted some of them into 128 on
// sm_80, four blocks an SM, and spilled). sm_75 keeps two: its 64 KiB of shared memory hold one block anyway,
// and its ptxas spilled at 168. The query-block kernels compute the position product before the score
// product, so that the two sets of fragments are never live together: the other order took the forward
// with head dim 64 to 174 registers on sm_90 and spilled at 168. The forward keeps the warp's query
// fragments, q + u and q + w, in registers across key tiles (shared-memory wavefronts bound these
// kernels): 168 registers at head dim 64 on sm_90, 152 at 32, no spills (sm_75, sm_80, sm_90). The other
// kernels load q's fragments from shared memory where they multiply them and add the bias pair there.
//
// Shared-memory access: the window rows are kS floats with kS % 32 in {8, 24}, so a warp's float-pair
// writes of a product (rows g, columns 2 t of 8) fall in distinct banks; the shifted reads meet each
// bank at most twice.
//
// Tests: tests/cuda/flash_rel_attention_kernels_test.cpp, on the emulated device set to sm_75
// (float16) and sm_80 (bfloat16): against the float64 reference, against the FFMA kernels, under
// every schedule, and through the autocast route.
#include "kernels/cuda/flash_rel_attention_mma.h"

#include <cstdint>
#include <initializer_list>

#include "kernels/copy.h"
#include "kernels/cuda/flash_mma_tiles.cuh"
#include "kernels/cuda/load_ahead.cuh"
#include "kernels/reduce.h"

namespace define::kernels::DEFINE_CUDA_NS {
namespace {

constexpr int kRelMmaMaxHeadDim = 64;

#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 800
constexpr int kRelMmaBlocks = 3;
#else
constexpr int kRelMmaBlocks = 2;
#endif

// Floats per window row: at least kWin, and 8 or 24 past a multiple of 32 (see above).
constexpr int window_stride(int kWin) {
  int s = kWin;
  while (s % 32 != 8 && s % 32 != 24) ++s;
  return s;
}

// Tiles by the largest head dim, under 48 KiB of static shared memory (the static_asserts hold the
// sums): the forward's key tile, the dq kernel's key tile, the dk/dv and dr kernels' query tile.
template <int kD>
struct RelMmaTiles {
  static constexpr int kForwardKeys = 32;
  static constexpr int kQKeys = kD <= 32 ? 32 : 16;
  static constexpr int kKvRows = kD <= 32 ? 32 : 16;
  static constexpr int kPosRows = kD <= 32 ? 32 : 16;
};

struct RelMmaArgs {
  const std::uint16_t* q;
  const std::uint16_t* k;
  const std::uint16_t* v;
  const std::uint16_t* r;
  const std::uint16_t* u;
  const std::uint16_t* w;
  std::uint16_t* out;  // forward
  float* lse;          // written by the forward, read by the backward
  const std::uint16_t* grad_out;
  const float* delta;
  std::uint16_t* grad_q;  // null when not asked for
  float* bias_parts;      // [B][query blocks][2][H][d]: each query block's column sums of dqu and dqw
  std::uint16_t* grad_k;
  std::uint16_t* grad_v;
  float* grad_r;  // [B, H, Tk, d] float32: each batch element's part, summed afterwards
  RelShape shape;
  float scale;
  FlashDropout drop;
};

template <typename T>
__device__ __forceinline__ float word_value(std::uint16_t bits) {
  return load_value(T::from_bits(bits));
}

// The biases join the queries, as in Transformer-XL's reference: a score is (q_i + u) . k_j +
// (q_i + w) . r_p, and q + u, q + w are formed fragment by fragment, in float and rounded once to T,
// where the products load q's rows. A lane's fragment register of a row holds its columns 8 kk + 2 t
// and + 1 (as the A operand from ldmatrix.x2 and as the B operand from ldmatrix.x1 alike), so one
// pair of the bias row serves it. Adding them to the scores as kKeys + kBand dots u . k and w . r a
// tile instead read every key and band row once more from shared memory, which binds these kernels.

// The block's bias rows u and w of head h, 16-bit words as they are, zeros past d (so are the tiles'
// columns there). Plain stores: the caller's barrier publishes them.
template <int kD>
__device__ __forceinline__ void load_bias_rows(std::uint16_t (&bias)[2][kD], const std::uint16_t* __restrict__ u,
                                               const std::uint16_t* __restrict__ w, int depth) {
  for (int i = threadIdx.x; i < 2 * kD; i += kFlashThreads) {
    const int c = i % kD;
    bias[i / kD][c] = c < depth ? (i < kD ? u : w)[c] : std::uint16_t{0};
  }
}

// x + the bias pair b, word by word: in float, rounded once to T.
template <typename T>
__device__ __forceinline__ std::uint32_t plus_pair(std::uint32_t x, std::uint32_t b) {
  const float lo =
      word_value<T>(static_cast<std::uint16_t>(x & 0xffffu)) + word_value<T>(static_cast<std::uint16_t>(b & 0xffffu));
  const float hi =
      word_value<T>(static_cast<std::uint16_t>(x >> 16)) + word_value<T>(static_cast<std::uint16_t>(b >> 16));
  return mma_pack(to_bits<T>(lo), to_bits<T>(hi));
}
__device__ __forceinline__ std::uint32_t bias_pair(const std::uint16_t* bias_row, int kk, int lane) {
  return *reinterpret_cast<const std::uint32_t*>(bias_row + 8 * kk + 2 * (lane % 4));
}

// acc[n] += (A + 1 bias^T) B^T: add_rows_product with the bias row added to the rows of a.
template <typename T, int kD, int kN, typename ATile, typename BTile>
__device__ __forceinline__ void add_biased_rows_product(float (&acc)[kN][4], const ATile& a, int a_row0,
                                                        const std::uint16_t* a_bias, const BTile& b, int lane,
                                                        int b_row0 = 0) {
#pragma unroll
  for (int kk = 0; kk < kD / 8; ++kk) {
    std::uint32_t af[2];
    ldmatrix_x2(af, &a[a_row0 + lane % 16][8 * kk]);
    const std::uint32_t bias = bias_pair(a_bias, kk, lane);
    af[0] = plus_pair<T>(af[0], bias);
    af[1] = plus_pair<T>(af[1], bias);
#pragma unroll
    for (int n = 0; n < kN; ++n) {
      std::uint32_t bf[1];
      ldmatrix_x1(bf, &b[b_row0 + 8 * n + lane % 8][8 * kk]);
      mma_16x8x8<T>(acc[n], af, bf);
    }
  }
}

// acc[n] += A (B + 1 bias^T)^T: add_rows_product with the bias row added to the rows of b.
template <typename T, int kD, int kN, typename ATile, typename BTile>
__device__ __forceinline__ void add_rows_biased_product(float (&acc)[kN][4], const ATile& a, int a_row0, const BTile& b,
                                                        const std::uint16_t* b_bias, int lane) {
#pragma unroll
  for (int kk = 0; kk < kD / 8; ++kk) {
    std::uint32_t af[2];
    ldmatrix_x2(af, &a[a_row0 + lane % 16][8 * kk]);
    const std::uint32_t bias = bias_pair(b_bias, kk, lane);
#pragma unroll
    for (int n = 0; n < kN; ++n) {
      std::uint32_t bf[1];
      ldmatrix_x1(bf, &b[8 * n + lane % 8][8 * kk]);
      bf[0] = plus_pair<T>(bf[0], bias);
      mma_16x8x8<T>(acc[n], af, bf);
    }
  }
}

// The warp's 16 x 8 kW accumulator to its window rows: element e of acc[n] at row g + 8 (e >> 1),
// column 8 n + 2 t + (e & 1), a float pair per row.
template <int kW, int kS>
__device__ __forceinline__ void write_window(float (&win)[16][kS], const float (&acc)[kW][4], int g, int t) {
#pragma unroll
  for (int n = 0; n < kW; ++n)
#pragma unroll
    for (int h = 0; h < 2; ++h)
      *reinterpret_cast<Vec<float, 2>*>(&win[g + 8 * h][8 * n + 2 * t]) =
          Vec<float, 2>{{acc[n][2 * h], acc[n][2 * h + 1]}};
}

// acc[o][e] += bias[8 o + 2 t + (e & 1)] * sums[e >> 1] for the columns below width.
template <typename T, int kO>
__device__ __forceinline__ void add_bias_outer_fragments(float (&acc)[kO][4], const std::uint16_t* __restrict__ bias,
                                                         const float (&sums)[2], int width, int t) {
#pragma unroll
  for (int o = 0; o < kO; ++o)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int c = 8 * o + 2 * t + (e & 1);
      if (c < width) acc[o][e] += word_value<T>(bias[c]) * sums[e >> 1];
    }
}

// ---------------------------------------------------------------------------------------------
// The forward and the dq kernel: one block per 64 queries (16 a warp), over the key tiles they see.

// The dq kernel's shared tiles: the queries, a key tile's keys and values, the band of r they meet
// (band row b is position key0 + (Tq - 1) - (row0 + kMmaRows - 1) + b: query row rr meets key c at
// band row c - rr + kMmaRows - 1), each warp's window rows (warp w's window starts at band row
// kMmaRows - 16 (w + 1)), the bias rows u and w, and the dropout keep flags.
template <int kD, int kKeys>
struct QueryBlockTiles {
  static constexpr int kTileKeys = kKeys, kDepth = kD;
  static constexpr int kStride = kD + 8;  // 16-bit words per shared row
  static constexpr int kBand = kMmaRows + kKeys;
  static constexpr int kWin = kKeys + 16, kS = window_stride(kWin);
  alignas(16) std::uint16_t q[kMmaRows][kStride];
  alignas(16) std::uint16_t k[kKeys][kStride];
  alignas(16) std::uint16_t v[kKeys][kStride];
  alignas(16) std::uint16_t band[kBand][kStride];
  alignas(16) float win[kMmaWarps][16][kS];
  alignas(16) std::uint16_t bias[2][kD];
  std::uint8_t keep[kMmaRows][kKeys];
};

// The forward's shared tiles: as the dq kernel's, but the band is a ring of kRing rows indexed by
// position (ring row p mod kRing holds position p), so that a key tile copies only the kKeys positions
// it adds to the previous tile's band (the band's copies were three fifths of the forward's global
// reads at 32 keys a tile); and the queries share their space with the window rows: they are in
// registers before the first window is written.
template <int kD, int kKeys>
struct ForwardTiles {
  static constexpr int kTileKeys = kKeys, kDepth = kD;
  static constexpr int kStride = kD + 8;
  static constexpr int kBand = kMmaRows + kKeys;
  static constexpr int kRing = 128;
  static_assert(kRing >= kBand + kKeys && (kRing & (kRing - 1)) == 0,
                "a power of two that holds a tile's band and the next tile's new positions");
  static constexpr int kWin = kKeys + 16, kS = window_stride(kWin);
  union {
    alignas(16) std::uint16_t q[kMmaRows][kStride];
    alignas(16) float win[kMmaWarps][16][kS];
  };
  alignas(16) std::uint16_t k[kKeys][kStride];
  alignas(16) std::uint16_t v[kKeys][kStride];
  alignas(16) std::uint16_t ring[kRing][kStride];
  alignas(16) std::uint16_t bias[2][kD];
  std::uint8_t keep[kMmaRows][kKeys];
  static_assert(sizeof(q) <= sizeof(win), "the queries fit the window rows");
};

// A band of a ring of shared rows: band row b is ring row (first + b) mod kRing.
template <int kRing, int kStride>
struct RingBand {
  std::uint16_t (*rows)[kStride];
  int first;
  __device__ __forceinline__ std::uint16_t (&operator[](int b) const)[kStride] {
    return rows[(first + b) & (kRing - 1)];
  }
};

// The position of band row 0 for the key tile at key0 of the query block at row0.
__device__ __forceinline__ std::int64_t band_position(const RelShape& s, std::int64_t row0, std::int64_t key0) {
  return key0 + (s.tq - 1) - (row0 + kMmaRows - 1);
}

// The copies of a key tile of a query-block kernel (asynchronous from sm_80; the caller commits and
// waits): its keys and the band of r they meet (the forward: the positions its ring lacks, all of the
// band for the first tile), and apart from them its values, with the keep flags.
template <int kD, int kKeys>
__device__ __forceinline__ void copy_keys_and_band(QueryBlockTiles<kD, kKeys>& ts, const RelMmaArgs& a, std::int64_t bh,
                                                   std::int64_t row0, std::int64_t key0, std::int64_t key_end) {
  const RelShape& s = a.shape;
  load_words<kKeys, kD>(ts.k, a.k + bh * s.tk * s.d, key0, key_end, s.d);
  load_words<QueryBlockTiles<kD, kKeys>::kBand, kD>(ts.band, a.r + (bh % s.heads) * s.tk * s.d,
                                                    band_position(s, row0, key0), s.tk, s.d);
}
template <int kD, int kKeys>
__device__ __forceinline__ void copy_keys_and_band(ForwardTiles<kD, kKeys>& ts, const RelMmaArgs& a, std::int64_t bh,
                                                   std::int64_t row0, std::int64_t key0, std::int64_t key_end,
                                                   bool first_tile) {
  using Tiles = ForwardTiles<kD, kKeys>;
  const RelShape& s = a.shape;
  load_words<kKeys, kD>(ts.k, a.k + bh * s.tk * s.d, key0, key_end, s.d);
  const std::int64_t p0 = band_position(s, row0, key0) + (first_tile ? 0 : Tiles::kBand - kKeys);
  const int n = first_tile ? Tiles::kBand : kKeys;
  load_rows<kD>(RingBand<Tiles::kRing, Tiles::kStride>{ts.ring, static_cast<int>(p0 & (Tiles::kRing - 1))}, n,
                a.r + (bh % s.heads) * s.tk * s.d, p0, s.tk, s.d);
}
template <typename Tiles>
__device__ __forceinline__ void copy_values_and_keep(Tiles& ts, const RelMmaArgs& a, std::int64_t bh, std::int64_t row0,
                                                     int rows, std::int64_t key0, std::int64_t key_end) {
  constexpr int kKeys = Tiles::kTileKeys;
  const RelShape& s = a.shape;
  load_words<kKeys, Tiles::kDepth>(ts.v, a.v + bh * s.tk * s.dv, key0, key_end, s.dv);
  const int keys = static_cast<int>(key_end - key0 < kKeys ? key_end - key0 : kKeys);
  if (a.drop.on) fill_keep(ts.keep, a.drop.stream, bh, s.tq, s.tk, row0, rows, key0, keys);
}

// A key tile of a query-block kernel, its keys and band in shared memory: sc = (Q + u) K^T for the
// warp's 16 rows, and the warp's position product (Q + w) band[win0 ..]^T into its window rows;
// times_qu(acc, keys) and times_qw(acc, band, row0) add those products (from band row row0) to acc.
// Ends at a barrier: the window rows ready, every warp done with the keys and the band.
template <typename T, typename Tiles, typename Band, int kN, typename TimesQu, typename TimesQw>
__device__ __forceinline__ void query_block_scores(Tiles& ts, const Band& band, float (&sc)[kN][4], int warp, int lane,
                                                   const TimesQu& times_qu, const TimesQw& times_qw) {
  {  // the position product first, to shared memory: its fragments and sc's are never live together
    float pos[Tiles::kWin / 8][4];
    zero_fragments(pos);
    times_qw(pos, band, kMmaRows - 16 * (warp + 1));
    write_window(ts.win[warp], pos, lane / 4, lane % 4);
  }
  zero_fragments(sc);
  times_qu(sc, ts.k);
  __syncthreads();  // the window rows of the warp's lanes
}

// The position part of the score of the warp's row rl, key c: window column c - rl + 15.
template <typename Tiles>
__device__ __forceinline__ float position_part(const Tiles& ts, int warp, int rl, int c) {
  return ts.win[warp][rl][c - rl + 15];
}

// The forward.
template <typename T, int kD, int kKeys>
__global__ void __launch_bounds__(kFlashThreads, kRelMmaBlocks) rel_forward_mma_kernel(RelMmaArgs a) {
  EMU_CHECK_LAUNCH_BOUNDS(kFlashThreads, kRelMmaBlocks);
  constexpr int kN = kKeys / 8, kO = kD / 8;
  using Tiles = ForwardTiles<kD, kKeys>;
  static_assert(sizeof(Tiles) <= kSharedLimit, "tensor-core relative forward tiles exceed 48 KiB of shared memory");
  EMU_STATIC_SHARED_ALIGN16(ts, Tiles);

  const RelShape& s = a.shape;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, g = lane / 4, t = lane % 4;
  const std::int64_t bh = blockIdx.x, row0 = static_cast<std::int64_t>(blockIdx.y) * kMmaRows;
  const int rows = static_cast<int>(s.tq - row0 < kMmaRows ? s.tq - row0 : kMmaRows);

  load_words<kMmaRows, kD>(ts.q, a.q + bh * s.tq * s.d, row0, s.tq, s.d);
  load_bias_rows(ts.bias, a.u + (bh % s.heads) * s.d, a.w + (bh % s.heads) * s.d, s.d);
  int local[2];
  float m[2], l[2], acc[kO][4];
  std::int64_t first[2], end[2];  // each row's visible keys; none for rows past the end
#pragma unroll
  for (int hh = 0; hh < 2; ++hh) {
    local[hh] = 16 * warp + g + 8 * hh;
    const std::int64_t row = row0 + local[hh];
    m[hh] = neg_inf();
    l[hh] = 0.0f;
    first[hh] = row < s.tq ? s.key_begin(row) : 0;
    end[hh] = row < s.tq ? s.key_end(row) : 0;
  }
  zero_fragments(acc);

  // The copies are pipelined (asynchronous from sm_80), as in flash_attention_mma.cu's forward: a tile's
  // values are in flight while its products run, the next tile's keys and band while its
  // softmax and P V run. Group order: Q with the first keys and band, then per tile its values and the
  // next keys and band; wait_group 1 lands all but the newest.
  // The warp's query fragments, q + u and q + w, stay in registers for every tile: Q is its own group,
  // waited for while the first keys and band are in flight. The next tile's band positions go to ring
  // rows this tile does not read.
  const std::int64_t key_first = s.key_begin(row0), key_end = s.key_end(row0 + rows - 1);
  copy_async_commit();
  copy_keys_and_band(ts, a, bh, row0, key_first, key_end, /*first_tile=*/true);
  copy_async_commit();
  copy_async_wait<1>();  // Q
  __syncthreads();
  std::uint32_t qu[kD / 8][2], qw[kD / 8][2];
  load_row_fragments<kD>(qu, ts.q, 16 * warp, lane);
#pragma unroll
  for (int kk = 0; kk < kD / 8; ++kk)
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      qw[kk][i] = plus_pair<T>(qu[kk][i], bias_pair(ts.bias[1], kk, lane));
      qu[kk][i] = plus_pair<T>(qu[kk][i], bias_pair(ts.bias[0], kk, lane));
    }
  const auto times_qu = [&](auto& acc, const auto& keys) { add_rows_product<T, kD>(acc, qu, keys, lane); };
  const auto times_qw = [&](auto& acc, const auto& band, int band_row0) {
    add_rows_product<T, kD>(acc, qw, band, lane, band_row0);
  };
  for (std::int64_t key0 = key_first; key0 < key_end; key0 += kKeys) {  // block-uniform: barriers are safe
    copy_values_and_keep(ts, a, bh, row0, rows, key0, key_end);
    copy_async_commit();
    copy_async_wait<1>();  // this tile's keys and band
    __syncthreads();
    float sc[kN][4];
    const RingBand<Tiles::kRing, Tiles::kStride> band{
        ts.ring, static_cast<int>(band_position(s, row0, key0) & (Tiles::kRing - 1))};
    query_block_scores<T>(ts, band, sc, warp, lane, times_qu, times_qw);
    if (key0 + kKeys < key_end) copy_keys_and_band(ts, a, bh, row0, key0 + kKeys, key_end, /*first_tile=*/false);
    copy_async_commit();
#pragma unroll
    for (int n = 0; n < kN; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int hh = e >> 1, c = 8 * n + 2 * t + (e & 1);
        const std::int64_t key = key0 + c;
        const bool valid = key < key_end && key >= first[hh] && key < end[hh];
        sc[n][e] = valid ? (sc[n][e] + position_part(ts, warp, g + 8 * hh, c)) * a.scale : neg_inf();
      }
    std::uint32_t pa[kN][2];  // P (dropped out, 16-bit) as the A fragments of P V
    online_softmax_fragments<T>(sc, m, l, acc, pa, ts.keep, local, a.drop, t);
    copy_async_wait<1>();  // this tile's values
    __syncthreads();
    add_fragment_product<T>(acc, pa, ts.v, lane);
    __syncthreads();  // the next tile overwrites the values, the keep flags and the window rows
  }

  finish_fragments<T>(m, l, acc, a.out + bh * s.tq * s.dv, a.lse + bh * s.tq, local, row0, s.tq, s.dv, t);
}

// ---------------------------------------------------------------------------------------------
// Backward. Each kernel recomputes the scores of its tiles from the fragments of the products and
// P = exp(scale S - lse).

// dk and dv of 64 keys (16 a warp: the rows of S^T), over every query tile that sees one of them.
template <typename T, int kD, int kQ>
__global__ void __launch_bounds__(kFlashThreads, kRelMmaBlocks) rel_backward_kv_mma_kernel(RelMmaArgs a) {
  EMU_CHECK_LAUNCH_BOUNDS(kFlashThreads, kRelMmaBlocks);
  constexpr int kKeys = kMmaRows;
  constexpr int kStride = kD + 8;
  constexpr int kN = kQ / 8, kO = kD / 8;
  // Band row b is position key0 + (Tq - 1) - (row0 + kQ - 1) + b; query rr meets key c at band row
  // c - rr + kQ - 1. Warp w's keys and queries 16 m .. 16 m + 15 meet the 31 band rows from
  // 16 (w - m) + kQ - 16.
  constexpr int kBand = kQ + kKeys;
  constexpr int kS = window_stride(32);
  static_assert(kQ % 16 == 0, "query tiles of whole 16-row products");
  static_assert(
      2 * ((2 * kKeys + 2 * kQ + kBand) * kStride + 2 * kD) + 4 * (kMmaWarps * 16 * kS + 2 * kQ) + kQ * kKeys <=
          kSharedLimit,
      "tensor-core relative dk/dv tiles exceed 48 KiB of shared memory");
  EMU_STATIC_SHARED_ALIGN16(k_s, std::uint16_t[kKeys][kStride]);
  EMU_STATIC_SHARED_ALIGN16(v_s, std::uint16_t[kKeys][kStride]);
  EMU_STATIC_SHARED_ALIGN16(q_s, std::uint16_t[kQ][kStride]);
  EMU_STATIC_SHARED_ALIGN16(do_s, std::uint16_t[kQ][kStride]);
  EMU_STATIC_SHARED_ALIGN16(band_s, std::uint16_t[kBand][kStride]);
  EMU_STATIC_SHARED_ALIGN16(win_s, float[kMmaWarps][16][kS]);
  EMU_STATIC_SHARED(lse_s, float[kQ]);
  EMU_STATIC_SHARED(delta_s, float[kQ]);
  EMU_STATIC_SHARED_ALIGN16(bias_s, std::uint16_t[2][kD]);  // u, w
  EMU_STATIC_SHARED(keep_s, std::uint8_t[kQ][kKeys]);

  const RelShape& s = a.shape;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, g = lane / 4, t = lane % 4;
  const std::int64_t bh = blockIdx.x, h = bh % s.heads, key0 = static_cast<std::int64_t>(blockIdx.y) * kKeys;
  const int keys = static_cast<int>(s.tk - key0 < kKeys ? s.tk - key0 : kKeys);
  const std::uint16_t* q = a.q + bh * s.tq * s.d;
  const std::uint16_t* grad_out = a.grad_out + bh * s.tq * s.dv;
  const std::uint16_t* r = a.r + h * s.tk * s.d;
  const std::uint16_t* u = a.u + h * s.d;
  const std::uint16_t* w = a.w + h * s.d;
  const bool want_k = a.grad_k != nullptr, want_v = a.grad_v != nullptr;

  load_words<kKeys, kD>(k_s, a.k + bh * s.tk * s.d, key0, s.tk, s.d);
  load_words<kKeys, kD>(v_s, a.v + bh * s.tk * s.dv, key0, s.tk, s.dv);
  load_bias_rows(bias_s, u, w, s.d);
  copy_async_commit();  // k_s, v_s: waited for with the first query tile, read after its barrier
  const int local[2] = {16 * warp + g, 16 * warp + g + 8};  // this lane's keys (rows of S^T)
  float dk[kO][4], dv[kO][4], score_sums[2] = {0.0f, 0.0f};
  zero_fragments(dk);
  zero_fragments(dv);

  // Query i sees key j iff 0 <= i + M - j < window: the queries [j - M, j - M + window).
  const std::int64_t mem = s.tk - s.tq;
  const std::int64_t first_row = key0 - mem < 0 ? 0 : key0 - mem;
  std::int64_t end_row = s.tq;
  if (s.window > 0 && key0 + keys - 1 - mem + s.window < end_row) end_row = key0 + keys - 1 - mem + s.window;
  for (std::int64_t row0 = first_row; row0 < end_row; row0 += kQ) {  // block-uniform
    const int rows = static_cast<int>(s.tq - row0 < kQ ? s.tq - row0 : kQ);
    load_words<kQ, kD>(q_s, q, row0, s.tq, s.d);
    load_words<kQ, kD>(do_s, grad_out, row0, s.tq, s.dv);
    load_words<kBand, kD>(band_s, r, key0 + (s.tq - 1) - (row0 + kQ - 1), s.tk, s.d);
    for (int i = threadIdx.x; i < kQ; i += kFlashThreads) {
      lse_s[i] = i < rows ? a.lse[bh * s.tq + row0 + i] : neg_inf();
      delta_s[i] = i < rows ? a.delta[bh * s.tq + row0 + i] : 0.0f;
    }
    if (a.drop.on) fill_keep(keep_s, a.drop.stream, bh, s.tq, s.tk, row0, rows, key0, keys);
    copy_async_commit();
    copy_async_wait<0>();
    __syncthreads();

    // S^T = K (Q + u)^T and dD^T = V dO^T: element e of [n] is (key local[e >> 1], query 8 n + 2 t + (e & 1)).
    float st[kN][4], dpt[kN][4];
    zero_fragments(st);
    zero_fragments(dpt);
    add_rows_biased_product<T, kD>(st, k_s, 16 * warp, q_s, bias_s[0], lane);
    add_rows_product<T, kD>(dpt, v_s, 16 * warp, do_s, lane);
    // The position term, 16 queries at a time: (q + w) times the warp's window, read back at
    // (query ql, key kl of the warp) -> window column kl - ql + 15.
#pragma unroll
    for (int mq = 0; mq < kQ / 16; ++mq) {
      const int base = 16 * (warp - mq) + kQ - 16;
      float pos[4][4];
      zero_fragments(pos);
      add_biased_rows_product<T, kD>(pos, q_s, 16 * mq, bias_s[1], band_s, lane, base);
      __syncwarp();  // the warp's reads of the previous window are done
      write_window(win_s[warp], pos, g, t);
      __syncwarp();
#pragma unroll
      for (int n = 2 * mq; n < 2 * mq + 2; ++n)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int ql = 8 * (n - 2 * mq) + 2 * t + (e & 1), kl = g + 8 * (e >> 1);
          st[n][e] += win_s[warp][ql][kl - ql + 15];
        }
    }
    std::uint32_t dropped[kN][2], grad_score[kN][2];  // D^T and dS^T as A fragments
#pragma unroll
    for (int n = 0; n < kN; ++n) {
      float de[4], ge[4];
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int c = local[e >> 1], rr = 8 * n + 2 * t + (e & 1);
        const bool valid = rr < rows && c < keys && s.visible(row0 + rr, key0 + c);
        const bool keep = a.drop.on && valid && keep_s[rr][c] != 0;
        const ElementGrads eg =
            element_grads(a.scale, a.drop, st[n][e], dpt[n][e], lse_s[rr], delta_s[rr], valid, keep);
        de[e] = eg.dropped;
        ge[e] = eg.grad_score;
        score_sums[e >> 1] += eg.grad_score;
      }
      dropped[n][0] = mma_pack(to_bits<T>(de[0]), to_bits<T>(de[1]));
      dropped[n][1] = mma_pack(to_bits<T>(de[2]), to_bits<T>(de[3]));
      grad_score[n][0] = mma_pack(to_bits<T>(ge[0]), to_bits<T>(ge[1]));
      grad_score[n][1] = mma_pack(to_bits<T>(ge[2]), to_bits<T>(ge[3]));
    }
    // dV += D^T dO, dK += dS^T Q: dO's and Q's B fragments by transposed loads of their rows.
    if (want_v) add_fragment_product<T>(dv, dropped, do_s, lane);
    if (want_k) add_fragment_product<T>(dk, grad_score, q_s, lane);
    __syncthreads();  // the next query tile overwrites q_s, do_s, the band and the row values
  }

  if (want_k) {
    const float sums[2] = {fragment_row_sum(score_sums[0]), fragment_row_sum(score_sums[1])};
    add_bias_outer_fragments<T>(dk, u, sums, s.d, t);  // dk_j = sum_i dS_ij (q_i + u)
    const float one[2] = {1.0f, 1.0f};
    store_fragments<T>(a.grad_k + bh * s.tk * s.d, dk, one, local, key0, s.tk, s.d, t);
  }
  if (want_v) {
    const float one[2] = {1.0f, 1.0f};
    store_fragments<T>(a.grad_v + bh * s.tk * s.dv, dv, one, local, key0, s.tk, s.dv, t);
  }
}

// The column sums of a warp's 16 x 8 kO fragments over its 16 rows, in a fixed butterfly order: lane t
// (g = 0) writes columns 8 o + 2 t and + 1 of sums; every lane takes part in the shuffles.
template <int kO>
__device__ __forceinline__ void warp_column_sums(const float (&acc)[kO][4], float* sums, int lane) {
#pragma unroll
  for (int o = 0; o < kO; ++o)
#pragma unroll
    for (int j = 0; j < 2; ++j) {
      float x = acc[o][j] + acc[o][j + 2];  // rows g and g + 8
#pragma unroll
      for (int offset = 4; offset < 32; offset *= 2) x += __shfl_xor_sync(kFullMask, x, offset);
      if (lane < 4) sums[8 * o + 2 * lane + j] = x;
    }
}

// dq = dqu + dqw of 64 queries (16 a warp), over every key tile they see, rounded once to T, and the
// block's column sums of dqu and dqw (its parts of du and dw, summed by sum_parts_kernel).
template <typename T, int kD, int kKeys>
__global__ void __launch_bounds__(kFlashThreads, kRelMmaBlocks) rel_backward_q_mma_kernel(RelMmaArgs a) {
  EMU_CHECK_LAUNCH_BOUNDS(kFlashThreads, kRelMmaBlocks);
  using Tiles = QueryBlockTiles<kD, kKeys>;
  constexpr int kN = kKeys / 8, kO = kD / 8, kWin = Tiles::kWin;
  static_assert(sizeof(Tiles) + 2 * kMmaRows * Tiles::kStride <= kSharedLimit,
                "tensor-core relative dq tiles exceed 48 KiB of shared memory");
  EMU_STATIC_SHARED_ALIGN16(ts, Tiles);
  EMU_STATIC_SHARED_ALIGN16(do_s, std::uint16_t[kMmaRows][Tiles::kStride]);

  const RelShape& s = a.shape;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, g = lane / 4, t = lane % 4;
  const std::int64_t bh = blockIdx.x, row0 = static_cast<std::int64_t>(blockIdx.y) * kMmaRows;
  const int rows = static_cast<int>(s.tq - row0 < kMmaRows ? s.tq - row0 : kMmaRows);
  const int win0 = kMmaRows - 16 * (warp + 1);

  load_words<kMmaRows, kD>(ts.q, a.q + bh * s.tq * s.d, row0, s.tq, s.d);
  load_bias_rows(ts.bias, a.u + (bh % s.heads) * s.d, a.w + (bh % s.heads) * s.d, s.d);
  load_words<kMmaRows, kD>(do_s, a.grad_out + bh * s.tq * s.dv, row0, s.tq, s.dv);
  const int local[2] = {16 * warp + g, 16 * warp + g + 8};
  float lse[2], delta[2];
  std::int64_t first[2], end[2];
#pragma unroll
  for (int hh = 0; hh < 2; ++hh) {
    const std::int64_t row = row0 + local[hh];
    lse[hh] = row < s.tq ? a.lse[bh * s.tq + row] : neg_inf();
    delta[hh] = row < s.tq ? a.delta[bh * s.tq + row] : 0.0f;
    first[hh] = row < s.tq ? s.key_begin(row) : 0;
    end[hh] = row < s.tq ? s.key_end(row) : 0;
  }
  float dqu[kO][4], dqw[kO][4];
  zero_fragments(dqu);
  zero_fragments(dqw);

  const std::int64_t key_first = s.key_begin(row0), key_end = s.key_end(row0 + rows - 1);
  for (std::int64_t key0 = key_first; key0 < key_end; key0 += kKeys) {  // block-uniform
    // The values in flight while the score products run (asynchronous from sm_80);
    // the keys and band are read to the end of the tile, so the next tile's cannot come sooner.
    copy_keys_and_band(ts, a, bh, row0, key0, key_end);
    copy_async_commit();
    copy_values_and_keep(ts, a, bh, row0, rows, key0, key_end);
    copy_async_commit();
    copy_async_wait<1>();  // Q, dO, this tile's keys and band
    __syncthreads();
    float sc[kN][4], dp[kN][4];  // S (unscaled, without the position part) and dD
    query_block_scores<T>(
        ts, ts.band, sc, warp, lane,
        [&](auto& acc, const auto& keys) {
          add_biased_rows_product<T, kD>(acc, ts.q, 16 * warp, ts.bias[0], keys, lane);
        },
        [&](auto& acc, const auto& band, int band_row0) {
          add_biased_rows_product<T, kD>(acc, ts.q, 16 * warp, ts.bias[1], band, lane, band_row0);
        });
    copy_async_wait<0>();  // this tile's values
    __syncthreads();
    zero_fragments(dp);
    add_rows_product<T, kD>(dp, do_s, 16 * warp, ts.v, lane);

    float ge[kN][4];
    std::uint32_t grad_score[kN][2];
#pragma unroll
    for (int n = 0; n < kN; ++n) {
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int hh = e >> 1, c = 8 * n + 2 * t + (e & 1);
        const std::int64_t key = key0 + c;
        const bool valid = key < key_end && key >= first[hh] && key < end[hh];
        const bool keep = a.drop.on && valid && ts.keep[local[hh]][c] != 0;
        const float score = sc[n][e] + position_part(ts, warp, g + 8 * hh, c);
        ge[n][e] = element_grads(a.scale, a.drop, score, dp[n][e], lse[hh], delta[hh], valid, keep).grad_score;
      }
      grad_score[n][0] = mma_pack(to_bits<T>(ge[n][0]), to_bits<T>(ge[n][1]));
      grad_score[n][1] = mma_pack(to_bits<T>(ge[n][2]), to_bits<T>(ge[n][3]));
    }
    // dS shifted into the window (row rl, column c - rl + 15; zeros where no key lands), read back as
    // the A fragments of dqw += dS' band[win0 ..].
    float(&win)[16][Tiles::kS] = ts.win[warp];
    __syncwarp();  // every lane has read its window values
    for (int i = lane; i < 16 * kWin; i += 32) win[i / kWin][i % kWin] = 0.0f;
    __syncwarp();
#pragma unroll
    for (int n = 0; n < kN; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int rl = g + 8 * (e >> 1), c = 8 * n + 2 * t + (e & 1);
        win[rl][c - rl + 15] = ge[n][e];
      }
    __syncwarp();
    std::uint32_t shifted[kWin / 8][2];
#pragma unroll
    for (int n = 0; n < kWin / 8; ++n) {
      shifted[n][0] = mma_pack(to_bits<T>(win[g][8 * n + 2 * t]), to_bits<T>(win[g][8 * n + 2 * t + 1]));
      shifted[n][1] = mma_pack(to_bits<T>(win[g + 8][8 * n + 2 * t]), to_bits<T>(win[g + 8][8 * n + 2 * t + 1]));
    }
    // dqu += dS K, dqw += dS' band: B fragments by transposed loads of key and band rows.
    add_fragment_product<T>(dqu, grad_score, ts.k, lane);
    add_fragment_product<T>(dqw, shifted, ts.band, lane, win0);
    __syncthreads();  // the next key tile overwrites every tile but the queries and dO
  }

  // Rows past Tq saw no key: their dqu and dqw are zeros, and add nothing to the sums.
  if (a.bias_parts != nullptr) {     // grid-uniform. The window rows are free after the loop's last barrier.
    float* sums = &ts.win[0][0][0];  // [warp][dqu, dqw][kD]
    static_assert(sizeof(ts.win) >= sizeof(float) * kMmaWarps * 2 * kD, "the warps' column sums fit the window rows");
    warp_column_sums(dqu, sums + 2 * warp * kD, lane);
    warp_column_sums(dqw, sums + (2 * warp + 1) * kD, lane);
    __syncthreads();
    const std::int64_t b = bh / s.heads, h = bh % s.heads;
    float* row = a.bias_parts + (b * gridDim.y + blockIdx.y) * 2 * s.heads * s.d;  // this block's row of parts
    for (int i = threadIdx.x; i < 2 * kD; i += kFlashThreads) {
      const int part = i / kD, c = i % kD;
      float total = 0.0f;
      for (int w = 0; w < kMmaWarps; ++w) total += sums[(2 * w + part) * kD + c];
      if (c < s.d) row[(part * s.heads + h) * s.d + c] = total;
    }
  }
  if (a.grad_q != nullptr) {
#pragma unroll
    for (int o = 0; o < kO; ++o)
#pragma unroll
      for (int e = 0; e < 4; ++e) dqu[o][e] += dqw[o][e];
    const float one[2] = {1.0f, 1.0f};
    store_fragments<T>(a.grad_q + bh * s.tq * s.d, dqu, one, local, row0, s.tq, s.d, t);
  }
}

// out[j] = the sum over i < n of parts[i m + j], in the order of i, rounded once to T, for j < m: out is
// out0 for j < m0 and out1 past it (from its start); a null one skips its columns. Neighbouring
// threads read neighbouring words of each part; a thread has eight loads in flight
// (add_loaded_in_order). It sums dr's batch parts and du's and dw's parts.
template <typename T>
__global__ void sum_parts_kernel(const float* __restrict__ parts, std::int64_t n, std::int64_t m, std::int64_t m0,
                                 std::uint16_t* __restrict__ out0, std::uint16_t* __restrict__ out1) {
  for (std::int64_t j = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; j < m;
       j += static_cast<std::int64_t>(gridDim.x) * blockDim.x) {
    std::uint16_t* const base = j < m0 ? out0 : out1;
    if (base == nullptr) continue;
    std::uint16_t* const out = j < m0 ? base + j : base + (j - m0);
    float total = 0.0f;
    add_loaded_in_order<8>(
        0, n, 1, [&](std::int64_t i) { return parts[i * m + j]; }, [&](float x) { total += x; });
    *out = to_bits<T>(total);
  }
}

// Batch element b's part of dr for 64 positions (16 a warp) of head h, over every query tile.
template <typename T, int kD, int kQ>
__global__ void __launch_bounds__(kFlashThreads, kRelMmaBlocks) rel_backward_r_mma_kernel(RelMmaArgs a) {
  EMU_CHECK_LAUNCH_BOUNDS(kFlashThreads, kRelMmaBlocks);
  constexpr int kPos = kMmaRows;
  constexpr int kStride = kD + 8;
  constexpr int kN = kQ / 8, kO = kD / 8;
  // Key band row b is key pos0 - (Tq - 1) + row0 + b: position pl meets query rr at key band row
  // pl + rr. Warp w's positions and queries 16 m .. 16 m + 15 meet the 31 band rows from 16 (w + m).
  constexpr int kKeyBand = kPos + kQ;
  constexpr int kS = window_stride(32);
  static_assert(kQ % 16 == 0, "query tiles of whole 16-row products");
  static_assert(
      2 * ((kPos + 2 * kQ + 2 * kKeyBand) * kStride + 2 * kD) + 4 * (kMmaWarps * 16 * kS + 2 * kQ) + kQ * kPos <=
          kSharedLimit,
      "tensor-core relative dr tiles exceed 48 KiB of shared memory");
  EMU_STATIC_SHARED_ALIGN16(r_s, std::uint16_t[kPos][kStride]);
  EMU_STATIC_SHARED_ALIGN16(q_s, std::uint16_t[kQ][kStride]);
  EMU_STATIC_SHARED_ALIGN16(do_s, std::uint16_t[kQ][kStride]);
  EMU_STATIC_SHARED_ALIGN16(k_band, std::uint16_t[kKeyBand][kStride]);
  EMU_STATIC_SHARED_ALIGN16(v_band, std::uint16_t[kKeyBand][kStride]);
  EMU_STATIC_SHARED_ALIGN16(win_s, float[kMmaWarps][16][kS]);
  EMU_STATIC_SHARED(lse_s, float[kQ]);
  EMU_STATIC_SHARED(delta_s, float[kQ]);
  EMU_STATIC_SHARED_ALIGN16(bias_s, std::uint16_t[2][kD]);  // u, w
  EMU_STATIC_SHARED(keep_s, std::uint8_t[kQ][kPos]);

  const RelShape& s = a.shape;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, g = lane / 4, t = lane % 4;
  const std::int64_t h = blockIdx.x, pos0 = static_cast<std::int64_t>(blockIdx.y) * kPos, b = blockIdx.z;
  const std::int64_t bh = b * s.heads + h;
  const int npos = static_cast<int>(s.tk - pos0 < kPos ? s.tk - pos0 : kPos);
  const std::uint16_t* q = a.q + bh * s.tq * s.d;
  const std::uint16_t* grad_out = a.grad_out + bh * s.tq * s.dv;
  const std::uint16_t* k = a.k + bh * s.tk * s.d;
  const std::uint16_t* v = a.v + bh * s.tk * s.dv;
  const std::uint16_t* u = a.u + h * s.d;
  const std::uint16_t* w = a.w + h * s.d;

  load_words<kPos, kD>(r_s, a.r + h * s.tk * s.d, pos0, s.tk, s.d);
  load_bias_rows(bias_s, u, w, s.d);
  copy_async_commit();  // r_s: waited for with the first query tile, read after its barrier
  const int local[2] = {16 * warp + g, 16 * warp + g + 8};  // this lane's positions (rows of dS^T)
  float dr[kO][4], score_sums[2] = {0.0f, 0.0f};
  zero_fragments(dr);

  // Position p is at distance Tk - 1 - p from every query that meets it: within the window iff
  // p >= Tk - window. Query i meets it at key p - (Tq - 1) + i, which exists iff i >= Tq - 1 - p.
  const std::int64_t pos_first = s.window > 0 && s.tk - s.window > pos0 ? s.tk - s.window : pos0;
  if (pos_first < pos0 + npos) {  // block-uniform
    const std::int64_t last_pos = pos0 + npos - 1;
    const std::int64_t first_row = s.tq - 1 - last_pos < 0 ? 0 : s.tq - 1 - last_pos;
    for (std::int64_t row0 = first_row; row0 < s.tq; row0 += kQ) {
      const int rows = static_cast<int>(s.tq - row0 < kQ ? s.tq - row0 : kQ);
      const std::int64_t band_key0 = pos0 - (s.tq - 1) + row0;  // the key of band row 0
      load_words<kQ, kD>(q_s, q, row0, s.tq, s.d);
      load_words<kQ, kD>(do_s, grad_out, row0, s.tq, s.dv);
      load_words<kKeyBand, kD>(k_band, k, band_key0, s.tk, s.d);
      load_words<kKeyBand, kD>(v_band, v, band_key0, s.tk, s.dv);
      for (int i = threadIdx.x; i < kQ; i += kFlashThreads) {
        lse_s[i] = i < rows ? a.lse[bh * s.tq + row0 + i] : neg_inf();
        delta_s[i] = i < rows ? a.delta[bh * s.tq + row0 + i] : 0.0f;
      }
      if (a.drop.on) fill_keep(keep_s, a.drop.stream, bh, s.tq, s.tk, row0, rows, band_key0, npos, /*shift=*/1);
      copy_async_commit();
      copy_async_wait<0>();
      __syncthreads();

      // Scores and dD along the diagonals, element e of [n] at (position local[e >> 1], query
      // 8 n + 2 t + (e & 1)): R (Q + w)^T, then the key and value terms 16 queries at a time, each the
      // product of the queries plus u (rows of dO) with their window of keys (values), read back at
      // (query ql, position pl of the warp) -> window column pl + ql.
      float st[kN][4], dpt[kN][4];
      zero_fragments(st);
      zero_fragments(dpt);
      add_rows_biased_product<T, kD>(st, r_s, 16 * warp, q_s, bias_s[1], lane);
#pragma unroll
      for (int mq = 0; mq < kQ / 16; ++mq) {
        const int base = 16 * (warp + mq);
#pragma unroll
        for (int part = 0; part < 2; ++part) {
          float prod[4][4];
          zero_fragments(prod);
          if (part == 0)
            add_biased_rows_product<T, kD>(prod, q_s, 16 * mq, bias_s[0], k_band, lane, base);
          else
            add_rows_product<T, kD>(prod, do_s, 16 * mq, v_band, lane, base);
          __syncwarp();  // the warp's reads of the previous window are done
          write_window(win_s[warp], prod, g, t);
          __syncwarp();
#pragma unroll
          for (int n = 2 * mq; n < 2 * mq + 2; ++n)
#pragma unroll
            for (int e = 0; e < 4; ++e) {
              const int ql = 8 * (n - 2 * mq) + 2 * t + (e & 1), pl = g + 8 * (e >> 1);
              (part == 0 ? st : dpt)[n][e] += win_s[warp][ql][pl + ql];
            }
        }
      }
      std::uint32_t grad_score[kN][2];  // dS^T as A fragments
#pragma unroll
      for (int n = 0; n < kN; ++n) {
        float ge[4];
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int pl = local[e >> 1], rr = 8 * n + 2 * t + (e & 1);
          const bool valid = pl < npos && rr < rows && pos0 + pl >= pos_first && band_key0 + pl + rr >= 0;
          const bool keep = a.drop.on && valid && keep_s[rr][pl] != 0;
          ge[e] = element_grads(a.scale, a.drop, st[n][e], dpt[n][e], lse_s[rr], delta_s[rr], valid, keep).grad_score;
          score_sums[e >> 1] += ge[e];
        }
        grad_score[n][0] = mma_pack(to_bits<T>(ge[0]), to_bits<T>(ge[1]));
        grad_score[n][1] = mma_pack(to_bits<T>(ge[2]), to_bits<T>(ge[3]));
      }
      add_fragment_product<T>(dr, grad_score, q_s, lane);  // dr += dS^T Q
      __syncthreads();                                     // the next query tile overwrites every tile but r_s
    }
  }

  const float sums[2] = {fragment_row_sum(score_sums[0]), fragment_row_sum(score_sums[1])};
  add_bias_outer_fragments<T>(dr, w, sums, s.d, t);  // dr_p = sum dS (q_i + w)
  const float one[2] = {1.0f, 1.0f};
  store_fragments<float>(a.grad_r + bh * s.tk * s.d, dr, one, local, pos0, s.tk, s.d, t);
}

// ---------------------------------------------------------------------------------------------
// Host side.

// Whether the tensor-core kernels take these tensors on their device.
bool rel_mma_applies(const Tensor& q, const Tensor& v, std::initializer_list<const Tensor*> same, const Tensor& lse) {
  const DType dtype = q.dtype();
  if (!is_float16(dtype) || v.dtype() != dtype || lse.dtype() != DType::Float32) return false;
  for (const Tensor* t : same)
    if (t->defined() && t->dtype() != dtype) return false;
  const std::int64_t dmax = q.size(3) > v.size(3) ? q.size(3) : v.size(3);
  if (dmax > kRelMmaMaxHeadDim) return false;
  return device_arch(q.device().index) >= (dtype == DType::Float16 ? 75 : 80);
}

RelMmaArgs rel_mma_args_of(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& r, const Tensor& u,
                           const Tensor& w, std::int64_t window, double p, std::uint64_t seed, std::uint64_t offset,
                           double scale) {
  RelMmaArgs a{};
  a.q = words(q);
  a.k = words(k);
  a.v = words(v);
  a.r = words(r);
  a.u = words(u);
  a.w = words(w);
  a.shape = {q.size(1), q.size(2), k.size(2), window, static_cast<int>(q.size(3)), static_cast<int>(v.size(3))};
  a.scale = static_cast<float>(scale);
  a.drop = dropout_of(p, seed, offset);
  return a;
}

// fn<kD>() for the tile set of the largest head dim (32 or 64).
template <typename Fn>
void dispatch_rel_mma_head_dim(const Tensor& q, const Tensor& v, Fn&& fn) {
  const std::int64_t dmax = q.size(3) > v.size(3) ? q.size(3) : v.size(3);
  if (dmax <= 32)
    fn.template operator()<32>();
  else
    fn.template operator()<64>();
}

}  // namespace

bool flash_rel_attention_forward_mma(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& r,
                                     const Tensor& u, const Tensor& w, const Tensor& out, const Tensor& lse,
                                     std::int64_t window, double p, std::uint64_t seed, std::uint64_t offset,
                                     double scale) {
  const char* op = "flash_rel_attention (tensor cores)";
  if (!rel_mma_applies(q, v, {&k, &r, &u, &w, &out}, lse)) return false;
  RelMmaArgs args = rel_mma_args_of(q, k, v, r, u, w, window, p, seed, offset, scale);
  args.out = words_or_null(out);
  args.lse = lse.data<float>();
  const dim3 grid = flash_grid(op, q, q.size(2), kMmaRows);
  dispatch_rel_mma_head_dim(q, v, [&]<int kD>() {
    constexpr int kKeys = RelMmaTiles<kD>::kForwardKeys;
    if (q.dtype() == DType::Float16)
      launch_checked(op, rel_forward_mma_kernel<Half, kD, kKeys>, grid, kFlashThreads, 0, args);
    else
      launch_checked(op, rel_forward_mma_kernel<BFloat16, kD, kKeys>, grid, kFlashThreads, 0, args);
  });
  return true;
}

bool flash_rel_attention_backward_mma(const Tensor& grad_out, const Tensor& q, const Tensor& k, const Tensor& v,
                                      const Tensor& r, const Tensor& u, const Tensor& w, const Tensor& out,
                                      const Tensor& lse, const Tensor& grad_q, const Tensor& grad_k,
                                      const Tensor& grad_v, const Tensor& grad_r, const Tensor& grad_u,
                                      const Tensor& grad_w, std::int64_t window, double p, std::uint64_t seed,
                                      std::uint64_t offset, double scale) {
  const char* op = "flash_rel_attention_backward (tensor cores)";
  if (!rel_mma_applies(q, v, {&k, &r, &u, &w, &out, &grad_out, &grad_q, &grad_k, &grad_v, &grad_r, &grad_u, &grad_w},
                       lse))
    return false;
  const std::int64_t batch = q.size(0), heads = q.size(1), tk = k.size(2), rows = batch * heads * q.size(2);
  const std::int64_t dv = v.size(3);
  Tensor delta = empty({rows}, {DType::Float32, q.device()});
  RelMmaArgs args = rel_mma_args_of(q, k, v, r, u, w, window, p, seed, offset, scale);
  args.lse = lse.data<float>();
  args.grad_out = words(grad_out);
  args.delta = delta.data<float>();
  args.grad_q = words_or_null(grad_q);
  args.grad_k = words_or_null(grad_k);
  args.grad_v = words_or_null(grad_v);
  // Each query block's column sums of dqu and dqw, summed afterwards into du and dw.
  const std::int64_t query_blocks = ceil_div(q.size(2), kMmaRows), depth = q.size(3);
  Tensor bias_parts;
  if (grad_u.defined() || grad_w.defined()) {
    bias_parts = empty({batch * query_blocks, 2 * heads * depth}, {DType::Float32, q.device()});
    args.bias_parts = bias_parts.data<float>();
  }
  const bool half = q.dtype() == DType::Float16;
  if (half)
    launch_rows("flash_rel_attention_backward (delta)",
                DeltaRows<Half>{grad_out.data<Half>(), out.data<Half>(), delta.data<float>(), dv}, rows, dv);
  else
    launch_rows("flash_rel_attention_backward (delta)",
                DeltaRows<BFloat16>{grad_out.data<BFloat16>(), out.data<BFloat16>(), delta.data<float>(), dv}, rows,
                dv);
  // Each batch element's part of dr in float32, then their sum in one fixed order, rounded once.
  Tensor parts;
  if (grad_r.defined()) {
    parts = empty({batch, heads, tk, q.size(3)}, {DType::Float32, q.device()});
    args.grad_r = parts.data<float>();
  }
  const std::int64_t pos_tiles = ceil_div(tk, kMmaRows);
  if (grad_r.defined() && (batch > 65535 || pos_tiles > 65535 || heads > INT32_MAX))
    fail(op, "{} heads x {} position tiles x {} batch elements is past the grid's limits", heads, pos_tiles, batch);
  dispatch_rel_mma_head_dim(q, v, [&]<int kD>() {
    using Tiles = RelMmaTiles<kD>;
    const auto launch = [&]<typename T>() {
      if (grad_k.defined() || grad_v.defined())
        launch_checked(op, rel_backward_kv_mma_kernel<T, kD, Tiles::kKvRows>, flash_grid(op, q, tk, kMmaRows),
                       kFlashThreads, 0, args);
      if (grad_q.defined() || grad_u.defined() || grad_w.defined())
        launch_checked(op, rel_backward_q_mma_kernel<T, kD, Tiles::kQKeys>, flash_grid(op, q, q.size(2), kMmaRows),
                       kFlashThreads, 0, args);
      if (grad_r.defined())
        launch_checked(
            op, rel_backward_r_mma_kernel<T, kD, Tiles::kPosRows>,
            dim3(static_cast<unsigned>(heads), static_cast<unsigned>(pos_tiles), static_cast<unsigned>(batch)),
            kFlashThreads, 0, args);
    };
    if (half)
      launch.template operator()<Half>();
    else
      launch.template operator()<BFloat16>();
  });
  // The sums of the parts, each in one fixed order, rounded once.
  const auto sum_parts = [&](const Tensor& from, std::int64_t n, std::int64_t m0, const Tensor& out0,
                             const Tensor& out1) {
    const std::int64_t m = from.numel() / n;
    if (half)
      launch_checked(op, sum_parts_kernel<Half>, dim3(grid_for(m)), dim3(kBlockSize), 0, from.data<float>(), n, m, m0,
                     words_or_null(out0), words_or_null(out1));
    else
      launch_checked(op, sum_parts_kernel<BFloat16>, dim3(grid_for(m)), dim3(kBlockSize), 0, from.data<float>(), n, m,
                     m0, words_or_null(out0), words_or_null(out1));
  };
  if (grad_r.defined()) sum_parts(parts, batch, heads * tk * depth, grad_r, Tensor());
  if (bias_parts.defined()) sum_parts(bias_parts, batch * query_blocks, heads * depth, grad_u, grad_w);
  return true;
}

}  // namespace define::kernels::DEFINE_CUDA_NS
