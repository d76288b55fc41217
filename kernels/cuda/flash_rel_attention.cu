// CUDA fused relative-attention kernels (kernels/flash_rel_attention.h): Transformer-XL's attention
// in one pass over key / value tiles held in shared memory, with an online softmax, and its backward,
// which recomputes the probabilities tile by tile from the inputs and the forward's row log-sum-exp.
// No [B, H, Tq, Tk] tensor is ever written. Entry points: kernels/flash_rel_attention.cpp;
// reference: kernels/ref/flash_rel_attention.cpp; tests: tests/ops/flash_rel_attention_test.cpp
// (mode emu) and tests/cuda/flash_rel_attention_kernels_test.cpp.
//
// The FFMA path, as kernels/cuda/flash_attention.cu (whose thread layout, tile loads, online softmax
// and deterministic per-thread sums these kernels share through flash_tiles.cuh): nothing newer than
// sm_61.
//
// The position term. Query i meets key j at position p = j + (Tq - 1) - i of r, so a tile of kRows
// queries from row0 and kKeys keys from key0 meets the kRows + kKeys - 1 consecutive positions
// from band0 = key0 + (Tq - 1) - (row0 + kRows - 1): element (r, c) of the tile reads band row
// c - r + kRows - 1. The band is one more shared-memory tile, and the score of (r, c) is
//   q_r . (k_c + band[c - r + kRows - 1]) + (u . k_c) + (w . band[c - r + kRows - 1])
// with the bias dots computed once per tile (kKeys + kBand dots of length d, against the
// kRows * kKeys * d of the product). The backward's dk and dr add their bias parts the same way:
// dk_j = sum_i dS_ij q_i + u * sum_i dS_ij, and dr likewise with w.
//
// Kernels (128 threads each; grids over b * H + h and tiles):
//   rel_forward_kernel: one block per query tile, over the key tiles its queries see (causal over
//     memory + segment, and within the window), out and lse as flash_forward_kernel (one query row
//     a head without dropout, a step of generation, goes to flash_decode.cu's query-row kernel);
//   rel_backward_kv_kernel: one block per key tile, over the query tiles that see it: dk, dv;
//   rel_backward_q_kernel: one block per query tile: the two parts of dq, dqu = dS k and
//     dqw = dS band (a band-gathered product);
//   rel_backward_r_kernel: one block per (h, tile of kPos positions, b), over the query tiles: the
//     scores of a position tile lie on diagonals (key = p - (Tq - 1) + i), so the block holds a band
//     of kPos + kRows - 1 keys and values. r is shared by the batch: each block writes its batch
//     element's part of dr to a [B, H, Tk, d] scratch tensor, summed over B afterwards (one fixed
//     order: no atomics anywhere, results bit-identical under any schedule).
// The dq kernel's band-gathered product (dqw) reads up to 4 rows of one bank per warp request: 1.55
// wavefronts a request at d 64 in the emulator's profile; the other kernels' reads are conflict-free.
#include <cstdint>

#include "kernels/copy.h"
#include "kernels/cuda/flash_decode.h"
#include "kernels/cuda/flash_rel_attention_mma.h"
#include "kernels/cuda/flash_tiles.cuh"
#include "kernels/flash_rel_attention.h"
#include "kernels/reduce.h"
#include "kernels/rel_attention_common.h"

namespace define::kernels::DEFINE_CUDA_NS {
namespace {

// Tile sizes per kernel and largest head dim kD, the largest that keep each kernel's static shared
// memory under 48 KiB (the static_asserts below hold the sums) and its registers unspilled
// (scripts/checks/check-ptxas.sh: a 64 x 32 forward tile at d 32 spills at sm_90, 32 x 64 does
// not). kN = columns / 8 must be >= 1.
template <int kD>
struct RelTiles;
template <>
struct RelTiles<32> {
  static constexpr int kForwardRows = 32, kForwardKeys = 64;
  static constexpr int kDecodeRows = 16, kDecodeKeys = 64;
  static constexpr int kKvKeys = 64, kKvRows = 16;
  static constexpr int kQRows = 32, kQKeys = 32;
  static constexpr int kPos = 32, kPosRows = 32;
};
template <>
struct RelTiles<64> {
  static constexpr int kForwardRows = 32, kForwardKeys = 32;
  static constexpr int kDecodeRows = 16, kDecodeKeys = 32;
  static constexpr int kKvKeys = 32, kKvRows = 16;
  static constexpr int kQRows = 32, kQKeys = 16;
  static constexpr int kPos = 32, kPosRows = 16;
};
template <>
struct RelTiles<128> {
  static constexpr int kForwardRows = 16, kForwardKeys = 16;
  static constexpr int kDecodeRows = 16, kDecodeKeys = 16;
  static constexpr int kKvKeys = 16, kKvRows = 8;
  static constexpr int kQRows = 16, kQKeys = 8;
  static constexpr int kPos = 16, kPosRows = 8;
};

struct RelArgs {
  const float* q;
  const float* k;
  const float* v;
  const float* r;
  const float* u;
  const float* w;
  float* out;  // forward
  float* lse;  // written by the forward, read by the backward
  const float* grad_out;
  const float* delta;
  float* grad_qu;  // null when not asked for
  float* grad_qw;
  float* grad_k;
  float* grad_v;
  float* grad_r;  // [B, H, Tk, d]: each batch element's part (B > 1), or dr itself (B == 1)
  RelShape shape;
  float scale;
  FlashDropout drop;
};

// s[x] = src[x] for x < d, 0 up to kD.
template <int kD>
__device__ __forceinline__ void load_bias(float (&s)[kD], const float* __restrict__ src, int d) {
  for (int x = threadIdx.x; x < kD; x += kFlashThreads) s[x] = x < d ? src[x] : 0.0f;
}

// dots[t] = bias . tile[t] for t < n.
template <int kRowsT, int kStride, int kN>
__device__ __forceinline__ void bias_dots(float (&dots)[kN], const float (&tile)[kRowsT][kStride], const float* bias,
                                          int n, int depth) {
  for (int t = threadIdx.x; t < n; t += kFlashThreads) {
    float sum = 0.0f;
    for (int x = 0; x < depth; ++x) sum += bias[x] * tile[t][x];
    dots[t] = sum;
  }
}

// Scores with queries as rows: acc[i][j] += sum_x q[ra][x] * (k[cb][x] + band[cb - ra + off][x]) for
// ra = group + 16 i, cb = lane + 8 j.
template <int kM, int kN, typename Q, typename K, typename Band>
__device__ __forceinline__ void add_scores_by_query(float (&acc)[kM][kN], const Q& q, const K& k, const Band& band,
                                                    int off, int group, int lane, int depth) {
#pragma unroll 2
  for (int x = 0; x < depth; ++x) {
    float qv[kM], kv[kN];
#pragma unroll
    for (int i = 0; i < kM; ++i) qv[i] = q[group + kGroups * i][x];
#pragma unroll
    for (int j = 0; j < kN; ++j) kv[j] = k[lane + kLanes * j][x];
#pragma unroll
    for (int i = 0; i < kM; ++i)
#pragma unroll
      for (int j = 0; j < kN; ++j)
        acc[i][j] += qv[i] * (kv[j] + band[lane + kLanes * j - group - kGroups * i + off][x]);
  }
}

// Scores with keys as rows: acc[i][j] += sum_x q[cb][x] * (k[ra][x] + band[ra - cb + off][x]).
template <int kM, int kN, typename K, typename Q, typename Band>
__device__ __forceinline__ void add_scores_by_key(float (&acc)[kM][kN], const K& k, const Q& q, const Band& band,
                                                  int off, int group, int lane, int depth) {
#pragma unroll 2
  for (int x = 0; x < depth; ++x) {
    float kv[kM], qv[kN];
#pragma unroll
    for (int i = 0; i < kM; ++i) kv[i] = k[group + kGroups * i][x];
#pragma unroll
    for (int j = 0; j < kN; ++j) qv[j] = q[lane + kLanes * j][x];
#pragma unroll
    for (int i = 0; i < kM; ++i)
#pragma unroll
      for (int j = 0; j < kN; ++j)
        acc[i][j] += qv[j] * (kv[i] + band[group + kGroups * i - lane - kLanes * j + off][x]);
  }
}

// Scores with positions as rows: acc[i][j] += sum_x q[cb][x] * (keys[ra + cb][x] + pos[ra][x]).
template <int kM, int kN, typename P, typename Q, typename Keys>
__device__ __forceinline__ void add_scores_by_position(float (&acc)[kM][kN], const P& pos, const Q& q, const Keys& keys,
                                                       int group, int lane, int depth) {
#pragma unroll 2
  for (int x = 0; x < depth; ++x) {
    float pv[kM], qv[kN];
#pragma unroll
    for (int i = 0; i < kM; ++i) pv[i] = pos[group + kGroups * i][x];
#pragma unroll
    for (int j = 0; j < kN; ++j) qv[j] = q[lane + kLanes * j][x];
#pragma unroll
    for (int i = 0; i < kM; ++i)
#pragma unroll
      for (int j = 0; j < kN; ++j) acc[i][j] += qv[j] * (keys[group + kGroups * i + lane + kLanes * j][x] + pv[i]);
  }
}

// acc[i][j] += sum_x a[cb][x] * band[ra + cb][x]: products along the diagonals of a band.
template <int kM, int kN, typename A, typename Band>
__device__ __forceinline__ void add_product_diagonal(float (&acc)[kM][kN], const A& a, const Band& band, int group,
                                                     int lane, int depth) {
#pragma unroll 2
  for (int x = 0; x < depth; ++x) {
    float av[kN];
#pragma unroll
    for (int j = 0; j < kN; ++j) av[j] = a[lane + kLanes * j][x];
#pragma unroll
    for (int i = 0; i < kM; ++i)
#pragma unroll
      for (int j = 0; j < kN; ++j) acc[i][j] += av[j] * band[group + kGroups * i + lane + kLanes * j][x];
  }
}

// acc[i][j] += sum_{c < depth} a[ra][c] * band[c - ra + off][lane + 8 j]: a times the band rows each
// row of a meets.
template <int kM, int kO, typename A, typename Band>
__device__ __forceinline__ void add_product_band(float (&acc)[kM][kO], const A& a, const Band& band, int off, int group,
                                                 int lane, int depth) {
#pragma unroll 2
  for (int c = 0; c < depth; ++c) {
#pragma unroll
    for (int i = 0; i < kM; ++i) {
      const float av = a[group + kGroups * i][c];
      const int row = c - group - kGroups * i + off;
#pragma unroll
      for (int j = 0; j < kO; ++j) acc[i][j] += av * band[row][lane + kLanes * j];
    }
  }
}

// sums[i] += sum_{c < depth} t[group + 16 i][c] (every lane of a group adds the same terms).
template <int kM, typename T>
__device__ __forceinline__ void add_row_sums(float (&sums)[kM], const T& t, int group, int depth) {
#pragma unroll
  for (int i = 0; i < kM; ++i) {
    float s = 0.0f;
    for (int c = 0; c < depth; ++c) s += t[group + kGroups * i][c];
    sums[i] += s;
  }
}

// acc[i][j] += bias[lane + 8 j] * sums[i].
template <int kM, int kO, int kD>
__device__ __forceinline__ void add_bias_outer(float (&acc)[kM][kO], const float (&bias)[kD], const float (&sums)[kM],
                                               int lane) {
#pragma unroll
  for (int i = 0; i < kM; ++i)
#pragma unroll
    for (int j = 0; j < kO; ++j) acc[i][j] += bias[lane + kLanes * j] * sums[i];
}

// ---------------------------------------------------------------------------------------------
// Forward.

template <int kD, int kRows, int kKeys>
__global__ void __launch_bounds__(kFlashThreads) rel_forward_kernel(RelArgs a) {
  EMU_CHECK_LAUNCH_BOUNDS(kFlashThreads);
  constexpr int kM = kRows / kGroups, kN = kKeys / kLanes, kO = kD / kLanes;
  constexpr int kBand = kRows + kKeys - 1;
  static_assert(kM * kGroups == kRows && kN * kLanes == kKeys && kO * kLanes == kD, "tiles must split evenly");
  static_assert(
      4 * ((kRows + 2 * kKeys + kBand) * (kD + 1) + kRows * (kKeys + 8) + kKeys + kBand + 2 * kD) + kRows * kKeys <=
          kSharedLimit,
      "forward tiles exceed 48 KiB of shared memory");
  EMU_STATIC_SHARED(q_s, float[kRows][kD + 1]);
  EMU_STATIC_SHARED(k_s, float[kKeys][kD + 1]);
  EMU_STATIC_SHARED(v_s, float[kKeys][kD + 1]);
  EMU_STATIC_SHARED(band_s, float[kBand][kD + 1]);
  EMU_STATIC_SHARED(p_s, float[kRows][kKeys + 8]);
  EMU_STATIC_SHARED(uk_s, float[kKeys]);
  EMU_STATIC_SHARED(wr_s, float[kBand]);
  EMU_STATIC_SHARED(u_s, float[kD]);
  EMU_STATIC_SHARED(w_s, float[kD]);
  EMU_STATIC_SHARED(keep_s, std::uint8_t[kRows][kKeys]);

  const RelShape& s = a.shape;
  const int lane = threadIdx.x % kLanes, group = threadIdx.x / kLanes;
  const std::int64_t bh = blockIdx.x, h = bh % s.heads, row0 = static_cast<std::int64_t>(blockIdx.y) * kRows;
  const int rows = static_cast<int>(s.tq - row0 < kRows ? s.tq - row0 : kRows);
  const float* k = a.k + bh * s.tk * s.d;
  const float* v = a.v + bh * s.tk * s.dv;
  const float* r = a.r + h * s.tk * s.d;

  load_rows<kRows, kD>(q_s, a.q + bh * s.tq * s.d, row0, s.tq, s.d);
  load_bias(u_s, a.u + h * s.d, s.d);
  load_bias(w_s, a.w + h * s.d, s.d);
  float m[kM], l[kM], acc[kM][kO];
  std::int64_t first[kM], end[kM];  // each row's visible keys; none for rows past the end
#pragma unroll
  for (int i = 0; i < kM; ++i) {
    const std::int64_t row = row0 + group + kGroups * i;
    m[i] = neg_inf();
    l[i] = 0.0f;
    first[i] = row < s.tq ? s.key_begin(row) : 0;
    end[i] = row < s.tq ? s.key_end(row) : 0;
  }
  set_zero(acc);

  const std::int64_t key_first = s.key_begin(row0), key_end = s.key_end(row0 + rows - 1);
  for (std::int64_t key0 = key_first; key0 < key_end; key0 += kKeys) {  // block-uniform: barriers are safe
    const int keys = static_cast<int>(key_end - key0 < kKeys ? key_end - key0 : kKeys);
    load_rows<kKeys, kD>(k_s, k, key0, key_end, s.d);
    load_rows<kKeys, kD>(v_s, v, key0, key_end, s.dv);
    load_rows<kBand, kD>(band_s, r, key0 + (s.tq - 1) - (row0 + kRows - 1), s.tk, s.d);
    if (a.drop.on) fill_keep(keep_s, a.drop.stream, bh, s.tq, s.tk, row0, rows, key0, keys);
    __syncthreads();
    bias_dots(uk_s, k_s, u_s, kKeys, s.d);
    bias_dots(wr_s, band_s, w_s, kBand, s.d);
    __syncthreads();

    float sc[kM][kN];
    set_zero(sc);
    add_scores_by_query(sc, q_s, k_s, band_s, kRows - 1, group, lane, s.d);
#pragma unroll
    for (int i = 0; i < kM; ++i)
#pragma unroll
      for (int j = 0; j < kN; ++j) {
        const int rr = group + kGroups * i, c = lane + kLanes * j;
        const std::int64_t key = key0 + c;
        const bool valid = c < keys && key >= first[i] && key < end[i];
        sc[i][j] = valid ? (sc[i][j] + uk_s[c] + wr_s[c - rr + kRows - 1]) * a.scale : neg_inf();
      }
    online_softmax_tile(sc, m, l, acc, p_s, keep_s, a.drop, group, lane);
    __syncthreads();
    add_product_nn(acc, p_s, v_s, group, lane, keys);
    __syncthreads();  // the next tile overwrites every tile but q_s
  }

  finish_rows(m, l, acc, a.out, a.lse, bh, row0, s.tq, s.dv, group, lane);
}

// ---------------------------------------------------------------------------------------------
// Backward.

// dk and dv of one tile of kKeys keys, over every query tile that sees one of them.
template <int kD, int kKeys, int kRows>
__global__ void __launch_bounds__(kFlashThreads) rel_backward_kv_kernel(RelArgs a) {
  EMU_CHECK_LAUNCH_BOUNDS(kFlashThreads);
  constexpr int kM = kKeys / kGroups, kN = kRows / kLanes, kO = kD / kLanes;
  constexpr int kBand = kRows + kKeys - 1;
  static_assert(kM * kGroups == kKeys && kN * kLanes == kRows && kO * kLanes == kD, "tiles must split evenly");
  static_assert(
      4 * ((2 * kKeys + 2 * kRows + kBand) * (kD + 1) + 2 * kKeys * (kRows + 8) + 2 * kRows + kKeys + kBand + 2 * kD) +
              kRows * kKeys <=
          kSharedLimit,
      "dk/dv tiles exceed 48 KiB of shared memory");
  EMU_STATIC_SHARED(k_s, float[kKeys][kD + 1]);
  EMU_STATIC_SHARED(v_s, float[kKeys][kD + 1]);
  EMU_STATIC_SHARED(q_s, float[kRows][kD + 1]);
  EMU_STATIC_SHARED(do_s, float[kRows][kD + 1]);
  EMU_STATIC_SHARED(band_s, float[kBand][kD + 1]);
  EMU_STATIC_SHARED(dropped_t, float[kKeys][kRows + 8]);     // D^T
  EMU_STATIC_SHARED(grad_score_t, float[kKeys][kRows + 8]);  // dS^T
  EMU_STATIC_SHARED(lse_s, float[kRows]);
  EMU_STATIC_SHARED(delta_s, float[kRows]);
  EMU_STATIC_SHARED(uk_s, float[kKeys]);
  EMU_STATIC_SHARED(wr_s, float[kBand]);
  EMU_STATIC_SHARED(u_s, float[kD]);
  EMU_STATIC_SHARED(w_s, float[kD]);
  EMU_STATIC_SHARED(keep_s, std::uint8_t[kRows][kKeys]);

  const RelShape& s = a.shape;
  const int lane = threadIdx.x % kLanes, group = threadIdx.x / kLanes;
  const std::int64_t bh = blockIdx.x, h = bh % s.heads, key0 = static_cast<std::int64_t>(blockIdx.y) * kKeys;
  const int keys = static_cast<int>(s.tk - key0 < kKeys ? s.tk - key0 : kKeys);
  const float* q = a.q + bh * s.tq * s.d;
  const float* grad_out = a.grad_out + bh * s.tq * s.dv;
  const float* r = a.r + h * s.tk * s.d;
  const bool want_k = a.grad_k != nullptr, want_v = a.grad_v != nullptr;

  load_rows<kKeys, kD>(k_s, a.k + bh * s.tk * s.d, key0, s.tk, s.d);
  load_rows<kKeys, kD>(v_s, a.v + bh * s.tk * s.dv, key0, s.tk, s.dv);
  load_bias(u_s, a.u + h * s.d, s.d);
  load_bias(w_s, a.w + h * s.d, s.d);
  __syncthreads();
  bias_dots(uk_s, k_s, u_s, kKeys, s.d);  // read after the loop's first barrier
  float dk[kM][kO], dv[kM][kO], score_sums[kM];
  set_zero(dk);
  set_zero(dv);
#pragma unroll
  for (int i = 0; i < kM; ++i) score_sums[i] = 0.0f;

  // Query i sees key j iff 0 <= i + M - j < window: the queries [j - M, j - M + window).
  const std::int64_t mem = s.tk - s.tq;
  const std::int64_t first_row = key0 - mem < 0 ? 0 : key0 - mem;
  std::int64_t end_row = s.tq;
  if (s.window > 0 && key0 + keys - 1 - mem + s.window < end_row) end_row = key0 + keys - 1 - mem + s.window;
  for (std::int64_t row0 = first_row; row0 < end_row; row0 += kRows) {  // block-uniform
    const int rows = static_cast<int>(s.tq - row0 < kRows ? s.tq - row0 : kRows);
    load_rows<kRows, kD>(q_s, q, row0, s.tq, s.d);
    load_rows<kRows, kD>(do_s, grad_out, row0, s.tq, s.dv);
    load_rows<kBand, kD>(band_s, r, key0 + (s.tq - 1) - (row0 + kRows - 1), s.tk, s.d);
    for (int t = threadIdx.x; t < kRows; t += kFlashThreads) {
      lse_s[t] = t < rows ? a.lse[bh * s.tq + row0 + t] : neg_inf();
      delta_s[t] = t < rows ? a.delta[bh * s.tq + row0 + t] : 0.0f;
    }
    if (a.drop.on) fill_keep(keep_s, a.drop.stream, bh, s.tq, s.tk, row0, rows, key0, keys);
    __syncthreads();
    bias_dots(wr_s, band_s, w_s, kBand, s.d);
    __syncthreads();

    float st[kM][kN], dpt[kM][kN];  // S^T (unscaled, without the bias dots) and dD^T
    set_zero(st);
    set_zero(dpt);
    add_scores_by_key(st, k_s, q_s, band_s, kRows - 1, group, lane, s.d);
    add_product_nt(dpt, v_s, do_s, group, lane, s.dv);
#pragma unroll
    for (int i = 0; i < kM; ++i) {
      const int c = group + kGroups * i;
#pragma unroll
      for (int j = 0; j < kN; ++j) {
        const int rr = lane + kLanes * j;
        const bool valid = rr < rows && c < keys && s.visible(row0 + rr, key0 + c);
        const bool keep = a.drop.on && valid && keep_s[rr][c] != 0;
        const float score = st[i][j] + uk_s[c] + wr_s[c - rr + kRows - 1];
        const ElementGrads e = element_grads(a.scale, a.drop, score, dpt[i][j], lse_s[rr], delta_s[rr], valid, keep);
        dropped_t[c][rr] = e.dropped;
        grad_score_t[c][rr] = e.grad_score;
      }
    }
    __syncthreads();
    if (want_v) add_product_nn(dv, dropped_t, do_s, group, lane, rows);
    if (want_k) {
      add_product_nn(dk, grad_score_t, q_s, group, lane, rows);
      add_row_sums(score_sums, grad_score_t, group, rows);
    }
    __syncthreads();  // the next query tile overwrites q_s, do_s, the band and the products
  }

  float one[kM];
#pragma unroll
  for (int i = 0; i < kM; ++i) one[i] = 1.0f;
  if (want_k) {
    add_bias_outer(dk, u_s, score_sums, lane);  // dk_j = sum_i dS_ij (q_i + u)
    store_rows(a.grad_k + bh * s.tk * s.d, dk, one, key0, s.tk, s.d, group, lane);
  }
  if (want_v) store_rows(a.grad_v + bh * s.tk * s.dv, dv, one, key0, s.tk, s.dv, group, lane);
}

// dqu and dqw of one tile of kRows queries, over every key tile they see.
template <int kD, int kRows, int kKeys>
__global__ void __launch_bounds__(kFlashThreads) rel_backward_q_kernel(RelArgs a) {
  EMU_CHECK_LAUNCH_BOUNDS(kFlashThreads);
  constexpr int kM = kRows / kGroups, kN = kKeys / kLanes, kO = kD / kLanes;
  constexpr int kBand = kRows + kKeys - 1;
  static_assert(kM * kGroups == kRows && kN * kLanes == kKeys && kO * kLanes == kD, "tiles must split evenly");
  static_assert(
      4 * ((2 * kRows + 2 * kKeys + kBand) * (kD + 1) + kRows * (kKeys + 8) + kKeys + kBand + 2 * kD) + kRows * kKeys <=
          kSharedLimit,
      "dq tiles exceed 48 KiB of shared memory");
  EMU_STATIC_SHARED(q_s, float[kRows][kD + 1]);
  EMU_STATIC_SHARED(do_s, float[kRows][kD + 1]);
  EMU_STATIC_SHARED(k_s, float[kKeys][kD + 1]);
  EMU_STATIC_SHARED(v_s, float[kKeys][kD + 1]);
  EMU_STATIC_SHARED(band_s, float[kBand][kD + 1]);
  EMU_STATIC_SHARED(grad_score, float[kRows][kKeys + 8]);  // dS
  EMU_STATIC_SHARED(uk_s, float[kKeys]);
  EMU_STATIC_SHARED(wr_s, float[kBand]);
  EMU_STATIC_SHARED(u_s, float[kD]);
  EMU_STATIC_SHARED(w_s, float[kD]);
  EMU_STATIC_SHARED(keep_s, std::uint8_t[kRows][kKeys]);

  const RelShape& s = a.shape;
  const int lane = threadIdx.x % kLanes, group = threadIdx.x / kLanes;
  const std::int64_t bh = blockIdx.x, h = bh % s.heads, row0 = static_cast<std::int64_t>(blockIdx.y) * kRows;
  const int rows = static_cast<int>(s.tq - row0 < kRows ? s.tq - row0 : kRows);
  const float* k = a.k + bh * s.tk * s.d;
  const float* v = a.v + bh * s.tk * s.dv;
  const float* r = a.r + h * s.tk * s.d;

  load_rows<kRows, kD>(q_s, a.q + bh * s.tq * s.d, row0, s.tq, s.d);
  load_rows<kRows, kD>(do_s, a.grad_out + bh * s.tq * s.dv, row0, s.tq, s.dv);
  load_bias(u_s, a.u + h * s.d, s.d);
  load_bias(w_s, a.w + h * s.d, s.d);
  float lse[kM], delta[kM];
  std::int64_t first[kM], end[kM];
#pragma unroll
  for (int i = 0; i < kM; ++i) {
    const std::int64_t row = row0 + group + kGroups * i;
    lse[i] = row < s.tq ? a.lse[bh * s.tq + row] : neg_inf();
    delta[i] = row < s.tq ? a.delta[bh * s.tq + row] : 0.0f;
    first[i] = row < s.tq ? s.key_begin(row) : 0;
    end[i] = row < s.tq ? s.key_end(row) : 0;
  }
  float dqu[kM][kO], dqw[kM][kO];
  set_zero(dqu);
  set_zero(dqw);

  const std::int64_t key_first = s.key_begin(row0), key_end = s.key_end(row0 + rows - 1);
  for (std::int64_t key0 = key_first; key0 < key_end; key0 += kKeys) {  // block-uniform
    const int keys = static_cast<int>(key_end - key0 < kKeys ? key_end - key0 : kKeys);
    load_rows<kKeys, kD>(k_s, k, key0, key_end, s.d);
    load_rows<kKeys, kD>(v_s, v, key0, key_end, s.dv);
    load_rows<kBand, kD>(band_s, r, key0 + (s.tq - 1) - (row0 + kRows - 1), s.tk, s.d);
    if (a.drop.on) fill_keep(keep_s, a.drop.stream, bh, s.tq, s.tk, row0, rows, key0, keys);
    __syncthreads();
    bias_dots(uk_s, k_s, u_s, kKeys, s.d);
    bias_dots(wr_s, band_s, w_s, kBand, s.d);
    __syncthreads();

    float sc[kM][kN], dp[kM][kN];  // S (unscaled, without the bias dots) and dD
    set_zero(sc);
    set_zero(dp);
    add_scores_by_query(sc, q_s, k_s, band_s, kRows - 1, group, lane, s.d);
    add_product_nt(dp, do_s, v_s, group, lane, s.dv);
#pragma unroll
    for (int i = 0; i < kM; ++i) {
      const int rr = group + kGroups * i;
#pragma unroll
      for (int j = 0; j < kN; ++j) {
        const int c = lane + kLanes * j;
        const std::int64_t key = key0 + c;
        const bool valid = c < keys && key >= first[i] && key < end[i];
        const bool keep = a.drop.on && valid && keep_s[rr][c] != 0;
        const float score = sc[i][j] + uk_s[c] + wr_s[c - rr + kRows - 1];
        grad_score[rr][c] = element_grads(a.scale, a.drop, score, dp[i][j], lse[i], delta[i], valid, keep).grad_score;
      }
    }
    __syncthreads();
    add_product_nn(dqu, grad_score, k_s, group, lane, keys);
    add_product_band(dqw, grad_score, band_s, kRows - 1, group, lane, keys);
    __syncthreads();  // the next key tile overwrites every tile but q_s and do_s
  }

  float one[kM];
#pragma unroll
  for (int i = 0; i < kM; ++i) one[i] = 1.0f;
  if (a.grad_qu != nullptr) store_rows(a.grad_qu + bh * s.tq * s.d, dqu, one, row0, s.tq, s.d, group, lane);
  if (a.grad_qw != nullptr) store_rows(a.grad_qw + bh * s.tq * s.d, dqw, one, row0, s.tq, s.d, group, lane);
}

// Batch element b's part of dr for one tile of kPos positions of head h, over every query tile.
template <int kD, int kPos, int kRows>
__global__ void __launch_bounds__(kFlashThreads) rel_backward_r_kernel(RelArgs a) {
  EMU_CHECK_LAUNCH_BOUNDS(kFlashThreads);
  constexpr int kM = kPos / kGroups, kN = kRows / kLanes, kO = kD / kLanes;
  constexpr int kKeyBand = kPos + kRows - 1;
  static_assert(kM * kGroups == kPos && kN * kLanes == kRows && kO * kLanes == kD, "tiles must split evenly");
  static_assert(
      4 * ((kPos + 2 * kRows + 2 * kKeyBand) * (kD + 1) + kPos * (kRows + 8) + 2 * kRows + kKeyBand + kPos + 2 * kD) +
              kRows * kPos <=
          kSharedLimit,
      "dr tiles exceed 48 KiB of shared memory");
  EMU_STATIC_SHARED(r_s, float[kPos][kD + 1]);
  EMU_STATIC_SHARED(q_s, float[kRows][kD + 1]);
  EMU_STATIC_SHARED(do_s, float[kRows][kD + 1]);
  EMU_STATIC_SHARED(k_band, float[kKeyBand][kD + 1]);
  EMU_STATIC_SHARED(v_band, float[kKeyBand][kD + 1]);
  EMU_STATIC_SHARED(grad_score_t, float[kPos][kRows + 8]);  // dS^T along the diagonals
  EMU_STATIC_SHARED(lse_s, float[kRows]);
  EMU_STATIC_SHARED(delta_s, float[kRows]);
  EMU_STATIC_SHARED(uk_s, float[kKeyBand]);
  EMU_STATIC_SHARED(wr_s, float[kPos]);
  EMU_STATIC_SHARED(u_s, float[kD]);
  EMU_STATIC_SHARED(w_s, float[kD]);
  EMU_STATIC_SHARED(keep_s, std::uint8_t[kRows][kPos]);

  const RelShape& s = a.shape;
  const int lane = threadIdx.x % kLanes, group = threadIdx.x / kLanes;
  const std::int64_t h = blockIdx.x, pos0 = static_cast<std::int64_t>(blockIdx.y) * kPos, b = blockIdx.z;
  const std::int64_t bh = b * s.heads + h;
  const int npos = static_cast<int>(s.tk - pos0 < kPos ? s.tk - pos0 : kPos);
  const float* q = a.q + bh * s.tq * s.d;
  const float* grad_out = a.grad_out + bh * s.tq * s.dv;
  const float* k = a.k + bh * s.tk * s.d;
  const float* v = a.v + bh * s.tk * s.dv;

  load_rows<kPos, kD>(r_s, a.r + h * s.tk * s.d, pos0, s.tk, s.d);
  load_bias(u_s, a.u + h * s.d, s.d);
  load_bias(w_s, a.w + h * s.d, s.d);
  __syncthreads();
  bias_dots(wr_s, r_s, w_s, kPos, s.d);  // read after the loop's first barrier
  float dr[kM][kO], score_sums[kM];
  set_zero(dr);
#pragma unroll
  for (int i = 0; i < kM; ++i) score_sums[i] = 0.0f;

  // Position p is at distance Tk - 1 - p from every query that meets it: within the window iff
  // p >= Tk - window. Query i meets it at key p - (Tq - 1) + i, which exists iff i >= Tq - 1 - p.
  const std::int64_t pos_first = s.window > 0 && s.tk - s.window > pos0 ? s.tk - s.window : pos0;
  if (pos_first < pos0 + npos) {  // block-uniform
    const std::int64_t last_pos = pos0 + npos - 1;
    const std::int64_t first_row = s.tq - 1 - last_pos < 0 ? 0 : s.tq - 1 - last_pos;
    for (std::int64_t row0 = first_row; row0 < s.tq; row0 += kRows) {
      const int rows = static_cast<int>(s.tq - row0 < kRows ? s.tq - row0 : kRows);
      const std::int64_t band_key0 = pos0 - (s.tq - 1) + row0;  // the key of band row 0
      load_rows<kRows, kD>(q_s, q, row0, s.tq, s.d);
      load_rows<kRows, kD>(do_s, grad_out, row0, s.tq, s.dv);
      load_rows<kKeyBand, kD>(k_band, k, band_key0, s.tk, s.d);
      load_rows<kKeyBand, kD>(v_band, v, band_key0, s.tk, s.dv);
      for (int t = threadIdx.x; t < kRows; t += kFlashThreads) {
        lse_s[t] = t < rows ? a.lse[bh * s.tq + row0 + t] : neg_inf();
        delta_s[t] = t < rows ? a.delta[bh * s.tq + row0 + t] : 0.0f;
      }
      if (a.drop.on) fill_keep(keep_s, a.drop.stream, bh, s.tq, s.tk, row0, rows, band_key0, npos, /*shift=*/1);
      __syncthreads();
      bias_dots(uk_s, k_band, u_s, kKeyBand, s.d);
      __syncthreads();

      float st[kM][kN], dpt[kM][kN];  // scores and dD along the diagonals: (position, query)
      set_zero(st);
      set_zero(dpt);
      add_scores_by_position(st, r_s, q_s, k_band, group, lane, s.d);
      add_product_diagonal(dpt, do_s, v_band, group, lane, s.dv);
#pragma unroll
      for (int i = 0; i < kM; ++i) {
        const int pl = group + kGroups * i;
#pragma unroll
        for (int j = 0; j < kN; ++j) {
          const int rr = lane + kLanes * j;
          const bool valid = pl < npos && rr < rows && pos0 + pl >= pos_first && band_key0 + pl + rr >= 0;
          const bool keep = a.drop.on && valid && keep_s[rr][pl] != 0;
          const float score = st[i][j] + uk_s[pl + rr] + wr_s[pl];
          grad_score_t[pl][rr] =
              element_grads(a.scale, a.drop, score, dpt[i][j], lse_s[rr], delta_s[rr], valid, keep).grad_score;
        }
      }
      __syncthreads();
      add_product_nn(dr, grad_score_t, q_s, group, lane, rows);
      add_row_sums(score_sums, grad_score_t, group, rows);
      __syncthreads();  // the next query tile overwrites every tile but r_s
    }
  }

  add_bias_outer(dr, w_s, score_sums, lane);  // dr_p = sum dS (q_i + w)
  float one[kM];
#pragma unroll
  for (int i = 0; i < kM; ++i) one[i] = 1.0f;
  store_rows(a.grad_r + bh * s.tk * s.d, dr, one, pos0, s.tk, s.d, group, lane);
}

// ---------------------------------------------------------------------------------------------
// Host side.

RelArgs args_of(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& r, const Tensor& u, const Tensor& w,
                std::int64_t window, double p, std::uint64_t seed, std::uint64_t offset, double scale) {
  RelArgs a{};
  a.q = q.data<float>();
  a.k = k.data<float>();
  a.v = v.data<float>();
  a.r = r.data<float>();
  a.u = u.data<float>();
  a.w = w.data<float>();
  a.shape = {q.size(1), q.size(2), k.size(2), window, static_cast<int>(q.size(3)), static_cast<int>(v.size(3))};
  a.scale = static_cast<float>(scale);
  a.drop = dropout_of(p, seed, offset);
  return a;
}

}  // namespace

void flash_rel_attention_forward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& r, const Tensor& u,
                                 const Tensor& w, const Tensor& out, const Tensor& lse, std::int64_t window, double p,
                                 std::uint64_t seed, std::uint64_t offset, double scale) {
  const char* op = "flash_rel_attention";
  // One query row a head without dropout (a step of generation against the memory): the query-row
  // kernel (flash_decode.cu).
  if (flash_rel_decode_forward(q, k, v, r, u, w, out, lse, window, p, scale)) return;
  // Otherwise the tensor cores where the device has them (flash_rel_attention_mma.cu), else these
  // FFMA kernels.
  if (flash_rel_attention_forward_mma(q, k, v, r, u, w, out, lse, window, p, seed, offset, scale)) return;
  if (is_float16(q.dtype())) {  // the tiles are float32's: widened copies, out rounded once
    const auto wide = [](const Tensor& t) { return ::define::kernels::cast(t, DType::Float32); };
    const Tensor out32 = empty(out.shape(), {DType::Float32, q.device()});
    flash_rel_attention_forward(wide(q), wide(k), wide(v), wide(r), wide(u), wide(w), out32, lse, window, p, seed,
                                offset, scale);
    ::define::kernels::copy_into(out, out32);
    return;
  }
  RelArgs args = args_of(q, k, v, r, u, w, window, p, seed, offset, scale);
  args.out = out.data<float>();
  args.lse = lse.data<float>();
  dispatch_head_dim(op, q, v, [&]<int kD>() {
    using Tiles = RelTiles<kD>;
    if (q.size(2) <= Tiles::kDecodeRows)
      launch_checked(op, rel_forward_kernel<kD, Tiles::kDecodeRows, Tiles::kDecodeKeys>,
                     flash_grid(op, q, q.size(2), Tiles::kDecodeRows), kFlashThreads, 0, args);
    else
      launch_checked(op, rel_forward_kernel<kD, Tiles::kForwardRows, Tiles::kForwardKeys>,
                     flash_grid(op, q, q.size(2), Tiles::kForwardRows), kFlashThreads, 0, args);
  });
}

void flash_rel_attention_backward(const Tensor& grad_out, const Tensor& q, const Tensor& k, const Tensor& v,
                                  const Tensor& r, const Tensor& u, const Tensor& w, const Tensor& out,
                                  const Tensor& lse, const Tensor& grad_q, const Tensor& grad_k, const Tensor& grad_v,
                                  const Tensor& grad_r, const Tensor& grad_u, const Tensor& grad_w, std::int64_t window,
                                  double p, std::uint64_t seed, std::uint64_t offset, double scale) {
  const char* op = "flash_rel_attention_backward";
  if (flash_rel_attention_backward_mma(grad_out, q, k, v, r, u, w, out, lse, grad_q, grad_k, grad_v, grad_r, grad_u,
                                       grad_w, window, p, seed, offset, scale))
    return;
  if (is_float16(q.dtype())) {  // the FFMA tiles are float32's: widened copies, gradients rounded once
    const auto wide = [](const Tensor& t) {
      return t.defined() ? ::define::kernels::cast(t, DType::Float32) : Tensor();
    };
    const auto wide_out = [&](const Tensor& t) {
      return t.defined() ? empty(t.shape(), {DType::Float32, q.device()}) : Tensor();
    };
    const Tensor gq = wide_out(grad_q), gk = wide_out(grad_k), gv = wide_out(grad_v), gr = wide_out(grad_r),
                 gu = wide_out(grad_u), gw = wide_out(grad_w);
    flash_rel_attention_backward(wide(grad_out), wide(q), wide(k), wide(v), wide(r), wide(u), wide(w), wide(out), lse,
                                 gq, gk, gv, gr, gu, gw, window, p, seed, offset, scale);
    const Tensor* got[] = {&gq, &gk, &gv, &gr, &gu, &gw};
    const Tensor* into[] = {&grad_q, &grad_k, &grad_v, &grad_r, &grad_u, &grad_w};
    for (int i = 0; i < 6; ++i)
      if (into[i]->defined()) ::define::kernels::copy_into(*into[i], *got[i]);
    return;
  }
  // The dq kernel writes dq's two parts; dq, du and dw are formed from them afterwards.
  const auto part = [&](bool needed) { return needed ? empty(q.shape(), {DType::Float32, q.device()}) : Tensor(); };
  const Tensor grad_qu = part(grad_q.defined() || grad_u.defined()),
               grad_qw = part(grad_q.defined() || grad_w.defined());
  dispatch_head_dim(op, q, v, [&]<int kD>() {
    using Tiles = RelTiles<kD>;
    const std::int64_t batch = q.size(0), heads = q.size(1), tk = k.size(2), rows = batch * heads * q.size(2);
    Tensor delta = empty({rows}, {DType::Float32, q.device()});
    launch_rows("flash_rel_attention_backward (delta)",
                DeltaRows<float>{grad_out.data<float>(), out.data<float>(), delta.data<float>(), v.size(3)}, rows,
                v.size(3));
    RelArgs args = args_of(q, k, v, r, u, w, window, p, seed, offset, scale);
    args.lse = lse.data<float>();
    args.grad_out = grad_out.data<float>();
    args.delta = delta.data<float>();
    args.grad_qu = data_or_null(grad_qu);
    args.grad_qw = data_or_null(grad_qw);
    args.grad_k = data_or_null(grad_k);
    args.grad_v = data_or_null(grad_v);
    if (grad_k.defined() || grad_v.defined())
      launch_checked(op, rel_backward_kv_kernel<kD, Tiles::kKvKeys, Tiles::kKvRows>,
                     flash_grid(op, q, tk, Tiles::kKvKeys), kFlashThreads, 0, args);
    if (grad_qu.defined() || grad_qw.defined())
      launch_checked(op, rel_backward_q_kernel<kD, Tiles::kQRows, Tiles::kQKeys>,
                     flash_grid(op, q, q.size(2), Tiles::kQRows), kFlashThreads, 0, args);
    if (grad_r.defined()) {
      const std::int64_t tiles = ceil_div(tk, Tiles::kPos);
      if (batch > 65535 || tiles > 65535 || heads > INT32_MAX)
        fail(op, "{} heads x {} position tiles x {} batch elements is past the grid's limits", heads, tiles, batch);
      // Each batch element's part of dr, then their sum in one fixed order (r is shared by the batch).
      const Tensor parts = batch == 1 ? grad_r : empty({batch, heads, tk, q.size(3)}, {DType::Float32, q.device()});
      args.grad_r = parts.data<float>();
      launch_checked(op, rel_backward_r_kernel<kD, Tiles::kPos, Tiles::kPosRows>,
                     dim3(static_cast<unsigned>(heads), static_cast<unsigned>(tiles), static_cast<unsigned>(batch)),
                     kFlashThreads, 0, args);
      if (batch > 1) ::define::kernels::copy_into(grad_r, ::define::kernels::sum(parts, {0}, false));
    }
  });
  rel_attention_common::finish_query_grads(grad_qu, grad_qw, grad_q, grad_u, grad_w);
}

}  // namespace define::kernels::DEFINE_CUDA_NS
