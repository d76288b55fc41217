// CUDA flash-attention kernels (kernels/flash_attention.h): scaled dot-product attention in one
// pass over key / value tiles held in shared memory, with an online softmax, and its backward, which
// recomputes the probabilities tile by tile from q, k and the forward's row log-sum-exp. No
// [B, H, Tq, Tk] tensor is ever written. The entry points are in kernels/flash_attention.cpp;
// reference: kernels/ref/flash_attention.cpp; tests: tests/ops/flash_attention_test.cpp (mode emu)
// and tests/cuda/flash_attention_kernels_test.cpp.
//
// This is the FFMA path: float32 products and sums on the CUDA cores, nothing newer than sm_61
// needs (no tensor cores, no asynchronous copies), so it runs on every GPU define supports.
//
// Threads. Every kernel runs 128 threads as 16 row groups of 8 lanes (threadIdx.x = 8 * group +
// lane; the 8 lanes of a group are consecutive lanes of one warp). In each product a thread owns
// the rows group, group + 16, ... of the result and the columns lane, lane + 8, ...: a row's values
// are spread over the 8 lanes of its group, so a row's max and sum are three __shfl_xor_sync steps
// (xor 1, 2, 4: butterflies whose additions commute bit for bit, so every lane gets the same bits),
// and in the inner loops a warp reads 4 rows of one operand (each a broadcast to 8 lanes) and 8 rows
// or 8 consecutive columns of the other: no shared-memory bank conflicts with rows padded to an odd
// length (a row of kD + 1 floats starts one bank further on). The probability tiles, written by
// one thread layout and read by another, have rows 8 floats longer than the tile (a multiple of 8
// banks on from the last), so a warp's 4 x 8 stores land on 32 different banks. (The emulator's
// profile of the d = 64 kernels reports one wavefront per request, kernel_bench --profile.)
//
// Forward (flash_forward_kernel): one block per (b * H + h, tile of kRows queries). The query tile
// stays in shared memory; the key and value tiles are loaded one after another. For each key tile:
// S = scale * Q K^T in registers (each thread a kRows/16 x kKeys/8 micro-tile), masked; the
// row max over the tile (shuffles); the running max m and sum l updated and the output accumulator
// rescaled by exp(m_old - m_new) (the online softmax); the probabilities exp(S - m_new), dropped
// out, go to shared memory and multiply V into the accumulator. l sums the probabilities before
// dropout (the softmax's denominator), the accumulator the dropped-out ones. At the end
// out = acc / l and lse = m + log(l), or zeros and -inf for a row without a valid key.
// Split decoding (flash_decode_splits): when a decoding launch has too few blocks to fill the GPU,
// blockIdx.z takes a share of the keys, each block writes its unnormalised acc with its m and l,
// and flash_decode_merge_kernel combines the shares in a fixed order (both in flash_decode.cu). One
// query row a head without dropout (a step of incremental decoding) goes to flash_decode.cu's
// query-row kernel instead.
//
// Backward: delta_i = rowsum(dO_i * out_i) first (a warp per row, row_reduce.cuh; why it is the
// softmax term rowsum(P_i * dP_i) even with dropout: kernels/flash_attention.h), then two kernels
// that each recompute P = exp(scale * Q K^T - lse) and dD = dO V^T for their tiles:
//   flash_backward_kv_kernel: one block per (b * H + h, tile of kKeys keys), K and V tiles in
//     shared memory, dK and dV in registers, summed over every query tile that can see the keys;
//   flash_backward_q_kernel: one block per (b * H + h, tile of kRows queries), dQ in registers,
//     summed over every key tile the queries can see.
// dS = P * (dP - delta) with dP = dD * z (z = keep / (1 - p)), D = P * z; dV += D^T dO,
// dK += scale * dS^T Q, dQ += scale * dS K. Every gradient element is one thread's sum in a fixed
// order: no atomics, results bit-identical under any block order or thread schedule.
//
// Masks: a key tile loads a 0/1 flag per key (in range and not padded); the causal horizon comes
// from the query index. Key tiles past the last query's horizon are skipped by the forward and dQ
// kernels, query tiles before the first query that sees the key tile by the dK/dV kernel.
//
// Dropout: the same Philox stream as the unfused kernels (dropout_stream.cuh): word offset + e for
// element e of the logical [B, H, Tq, Tk] tensor, kept iff (word >> 8) >= ceil(p * 2^24). Each
// tile's keep flags are computed by the whole block into shared memory, a Philox block (4 words, 4
// consecutive keys of one query row) per thread at a time: about a quarter of the Philox rounds
// that one draw per element would cost.
//
// Tiles (queries x keys, per kernel, by the largest head dim kD in {32, 64, 128} that holds d and
// dv): chosen so that every kernel's static shared memory stays under 48 KiB, the limit of a block
// on every architecture without an opt-in (sm_61 has no opt-in beyond it), with the largest tiles
// that fit: the forward holds Q, K, V tiles and the probability tile; the backward kernels Q, dO,
// K, V tiles and one or two probability-gradient tiles. See FlashTiles below.
#include <algorithm>
#include <cstdint>
#include <type_traits>
#include <utility>

#include "kernels/copy.h"
#include "kernels/cuda/flash_attention_mma.h"
#include "kernels/cuda/flash_decode.h"
#include "kernels/cuda/flash_tiles.cuh"
#include "kernels/flash_attention.h"

namespace define::kernels::DEFINE_CUDA_NS {
namespace {

// Tile sizes per kernel and largest head dim kD. Static shared memory (float32 tiles, rows padded
// as described above): forward 46.8 / 44.5 / 35.8 KiB, decoding forward 45.7 / 42.1 / 43.3 KiB,
// dK/dV 47.1 / 43.8 / 35.6 KiB, dQ 36.8 / 38.5 / 34.0 KiB for kD = 32 / 64 / 128. Doubling the
// query or the key tile of any of them would pass 48 KiB. The decoding tile (kDecodeRows queries,
// for 2 <= Tq <= kDecodeRows, or one row with dropout; one row without is flash_decode.cu's) wastes
// less of the block on query rows that do not exist than the forward's 32 or 64.
template <int kD>
struct FlashTiles;
template <>
struct FlashTiles<32> {
  static constexpr int kForwardRows = 64, kForwardKeys = 64;
  static constexpr int kDecodeRows = 16, kDecodeKeys = 128;
  static constexpr int kKvKeys = 64, kKvRows = 32;
  static constexpr int kQRows = 64, kQKeys = 32;
};
template <>
struct FlashTiles<64> {
  static constexpr int kForwardRows = 64, kForwardKeys = 32;
  static constexpr int kDecodeRows = 16, kDecodeKeys = 64;
  static constexpr int kKvKeys = 32, kKvRows = 32;
  static constexpr int kQRows = 32, kQKeys = 32;
};
template <>
struct FlashTiles<128> {
  static constexpr int kForwardRows = 32, kForwardKeys = 16;
  static constexpr int kDecodeRows = 16, kDecodeKeys = 32;
  static constexpr int kKvKeys = 16, kKvRows = 16;
  static constexpr int kQRows = 16, kQKeys = 16;
};

// In: the inputs' element type, float, or Half / BFloat16 for the decoding path (read as they are,
// widened exactly in the tiles); out and lse are float.
template <typename In>
struct ForwardArgsOf {
  const In* q;
  const In* k;
  const In* v;
  float* out;
  float* lse;
  const std::int32_t* padding;  // null, or [B, Tk]
  FlashShape shape;
  float scale;
  FlashDropout drop;
  // Split decoding (kSplit): blockIdx.z's keys [z * split_keys, (z + 1) * split_keys), and where its
  // partial rows go: acc unnormalised [splits][B H][Tq][dv], then (max, sum) [splits][B H][Tq][2].
  std::int64_t split_keys = 0;
  float* part_acc = nullptr;
  float* part_max_sum = nullptr;
};
using ForwardArgs = ForwardArgsOf<float>;

struct BackwardArgs {
  const float* q;
  const float* k;
  const float* v;
  const float* grad_out;
  const float* lse;
  const float* delta;
  float* grad_q;  // null when not asked for (each kernel writes only its own)
  float* grad_k;
  float* grad_v;
  const std::int32_t* padding;
  FlashShape shape;
  float scale;
  FlashDropout drop;
};

// ---------------------------------------------------------------------------------------------
// Forward.

template <int kD, int kRows, int kKeys, bool kSplit = false, typename In = float>
__global__ void __launch_bounds__(kFlashThreads) flash_forward_kernel(ForwardArgsOf<In> a) {
  EMU_CHECK_LAUNCH_BOUNDS(kFlashThreads);
  constexpr int kM = kRows / kGroups;  // query rows per thread
  constexpr int kN = kKeys / kLanes;   // keys per thread in a score tile
  constexpr int kO = kD / kLanes;      // output columns per thread
  static_assert(kM * kGroups == kRows && kN * kLanes == kKeys && kO * kLanes == kD, "tiles must split evenly");
  static_assert(
      4 * (kRows * (kD + 1) + 2 * kKeys * (kD + 1) + kRows * (kKeys + 8)) + kKeys + kRows * kKeys <= kSharedLimit,
      "forward tiles exceed 48 KiB of shared memory");
  EMU_STATIC_SHARED(q_s, float[kRows][kD + 1]);
  EMU_STATIC_SHARED(k_s, float[kKeys][kD + 1]);
  EMU_STATIC_SHARED(v_s, float[kKeys][kD + 1]);
  EMU_STATIC_SHARED(p_s, float[kRows][kKeys + 8]);
  EMU_STATIC_SHARED(key_ok, std::uint8_t[kKeys]);
  EMU_STATIC_SHARED(keep_s, std::uint8_t[kRows][kKeys]);

  const FlashShape& s = a.shape;
  const int lane = threadIdx.x % kLanes, group = threadIdx.x / kLanes;
  const std::int64_t bh = blockIdx.x, row0 = static_cast<std::int64_t>(blockIdx.y) * kRows;
  const int rows = static_cast<int>(s.tq - row0 < kRows ? s.tq - row0 : kRows);
  const In* q = a.q + bh * s.tq * s.d;
  const In* k = a.k + bh * s.tk * s.d;
  const In* v = a.v + bh * s.tk * s.dv;
  const std::int32_t* pad_row = a.padding == nullptr ? nullptr : a.padding + (bh / s.heads) * s.tk;

  load_rows<kRows, kD, true>(q_s, q, row0, s.tq, s.d);
  float m[kM], l[kM], acc[kM][kO];
  std::int64_t horizon[kM];  // of each row; 0 for rows past the end
#pragma unroll
  for (int i = 0; i < kM; ++i) {
    const std::int64_t row = row0 + group + kGroups * i;
    m[i] = neg_inf();
    l[i] = 0.0f;
    horizon[i] = row < s.tq ? s.horizon(row) : 0;
  }
  set_zero(acc);

  // Keys past the last row's horizon are masked for every row of the tile.
  std::int64_t key_begin = 0, key_end = s.horizon(row0 + rows - 1);
  if constexpr (kSplit) {
    key_begin = static_cast<std::int64_t>(blockIdx.z) * a.split_keys;
    key_end = key_end < key_begin + a.split_keys ? key_end : key_begin + a.split_keys;
  }
  for (std::int64_t key0 = key_begin; key0 < key_end; key0 += kKeys) {  // block-uniform: barriers are safe
    const int keys = static_cast<int>(key_end - key0 < kKeys ? key_end - key0 : kKeys);
    load_rows<kKeys, kD, true>(k_s, k, key0, key_end, s.d);
    load_rows<kKeys, kD, true>(v_s, v, key0, key_end, s.dv);
    load_key_flags(key_ok, pad_row, key0, key_end);
    if (a.drop.on) fill_keep(keep_s, a.drop.stream, bh, s.tq, s.tk, row0, rows, key0, keys);
    __syncthreads();

    float sc[kM][kN];
    set_zero(sc);
    add_product_nt(sc, q_s, k_s, group, lane, s.d);
#pragma unroll
    for (int i = 0; i < kM; ++i)
#pragma unroll
      for (int j = 0; j < kN; ++j) {
        const int c = lane + kLanes * j;
        const bool valid = key_ok[c] != 0 && key0 + c < horizon[i];
        sc[i][j] = valid ? sc[i][j] * a.scale : neg_inf();
      }
    online_softmax_tile(sc, m, l, acc, p_s, keep_s, a.drop, group, lane);
    __syncthreads();
    add_product_nn(acc, p_s, v_s, group, lane, keys);
    __syncthreads();  // the next tile overwrites k_s, v_s, p_s and keep_s
  }

  if constexpr (kSplit) {
    // The split's partial rows, unnormalised: flash_decode_merge_kernel merges the splits.
    const std::int64_t part = static_cast<std::int64_t>(blockIdx.z) * gridDim.x + bh;
    float one[kM];
#pragma unroll
    for (int i = 0; i < kM; ++i) {
      one[i] = 1.0f;
      const float total = group_sum(l[i]);
      const std::int64_t row = row0 + group + kGroups * i;
      if (lane == 0 && row < s.tq) {
        a.part_max_sum[2 * (part * s.tq + row)] = m[i];
        a.part_max_sum[2 * (part * s.tq + row) + 1] = total;
      }
    }
    store_rows(a.part_acc + part * s.tq * s.dv, acc, one, row0, s.tq, s.dv, group, lane);
  } else {
    finish_rows(m, l, acc, a.out, a.lse, bh, row0, s.tq, s.dv, group, lane);
  }
}

// ---------------------------------------------------------------------------------------------
// Backward.

// dK and dV of one tile of kKeys keys, over every query tile of kRows rows that can see them.
template <int kD, int kKeys, int kRows>
__global__ void __launch_bounds__(kFlashThreads) flash_backward_kv_kernel(BackwardArgs a) {
  EMU_CHECK_LAUNCH_BOUNDS(kFlashThreads);
  constexpr int kM = kKeys / kGroups;  // keys per thread
  constexpr int kN = kRows / kLanes;   // queries per thread in a score tile
  constexpr int kO = kD / kLanes;      // gradient columns per thread
  static_assert(kM * kGroups == kKeys && kN * kLanes == kRows && kO * kLanes == kD, "tiles must split evenly");
  static_assert(
      4 * (2 * kKeys * (kD + 1) + 2 * kRows * (kD + 1) + 2 * kKeys * (kRows + 8) + 2 * kRows) + kKeys + kRows * kKeys <=
          kSharedLimit,
      "dK/dV tiles exceed 48 KiB of shared memory");
  EMU_STATIC_SHARED(k_s, float[kKeys][kD + 1]);
  EMU_STATIC_SHARED(v_s, float[kKeys][kD + 1]);
  EMU_STATIC_SHARED(q_s, float[kRows][kD + 1]);
  EMU_STATIC_SHARED(do_s, float[kRows][kD + 1]);
  EMU_STATIC_SHARED(dropped_t, float[kKeys][kRows + 8]);     // D^T
  EMU_STATIC_SHARED(grad_score_t, float[kKeys][kRows + 8]);  // dS^T
  EMU_STATIC_SHARED(lse_s, float[kRows]);
  EMU_STATIC_SHARED(delta_s, float[kRows]);
  EMU_STATIC_SHARED(key_ok, std::uint8_t[kKeys]);
  EMU_STATIC_SHARED(keep_s, std::uint8_t[kRows][kKeys]);

  const FlashShape& s = a.shape;
  const int lane = threadIdx.x % kLanes, group = threadIdx.x / kLanes;
  const std::int64_t bh = blockIdx.x, key0 = static_cast<std::int64_t>(blockIdx.y) * kKeys;
  const int keys = static_cast<int>(s.tk - key0 < kKeys ? s.tk - key0 : kKeys);
  const float* q = a.q + bh * s.tq * s.d;
  const float* grad_out = a.grad_out + bh * s.tq * s.dv;
  const std::int32_t* pad_row = a.padding == nullptr ? nullptr : a.padding + (bh / s.heads) * s.tk;
  const bool want_k = a.grad_k != nullptr, want_v = a.grad_v != nullptr;

  load_rows<kKeys, kD>(k_s, a.k + bh * s.tk * s.d, key0, s.tk, s.d);
  load_rows<kKeys, kD>(v_s, a.v + bh * s.tk * s.dv, key0, s.tk, s.dv);
  load_key_flags(key_ok, pad_row, key0, s.tk);
  float dk[kM][kO], dv[kM][kO];
  set_zero(dk);
  set_zero(dv);

  // Query i sees key key0 when key0 < horizon(i), i.e. i >= key0 - (Tk - Tq): earlier query tiles
  // see none of these keys.
  std::int64_t first_row = s.causal ? key0 - (s.tk - s.tq) : 0;
  first_row = first_row < 0 ? 0 : first_row;
  for (std::int64_t row0 = first_row / kRows * kRows; row0 < s.tq; row0 += kRows) {  // block-uniform
    const int rows = static_cast<int>(s.tq - row0 < kRows ? s.tq - row0 : kRows);
    load_rows<kRows, kD>(q_s, q, row0, s.tq, s.d);
    load_rows<kRows, kD>(do_s, grad_out, row0, s.tq, s.dv);
    for (int r = threadIdx.x; r < kRows; r += kFlashThreads) {
      lse_s[r] = r < rows ? a.lse[bh * s.tq + row0 + r] : neg_inf();
      delta_s[r] = r < rows ? a.delta[bh * s.tq + row0 + r] : 0.0f;
    }
    if (a.drop.on) fill_keep(keep_s, a.drop.stream, bh, s.tq, s.tk, row0, rows, key0, keys);
    __syncthreads();

    float st[kM][kN], dpt[kM][kN];  // S^T (unscaled) and dD^T
    set_zero(st);
    set_zero(dpt);
    add_product_nt(st, k_s, q_s, group, lane, s.d);
    add_product_nt(dpt, v_s, do_s, group, lane, s.dv);
#pragma unroll
    for (int i = 0; i < kM; ++i) {
      const int c = group + kGroups * i;
#pragma unroll
      for (int j = 0; j < kN; ++j) {
        const int r = lane + kLanes * j;
        const bool valid = r < rows && key_ok[c] != 0 && key0 + c < s.horizon(row0 + r);
        const bool keep = a.drop.on && valid && keep_s[r][c] != 0;
        const ElementGrads e = element_grads(a.scale, a.drop, st[i][j], dpt[i][j], lse_s[r], delta_s[r], valid, keep);
        dropped_t[c][r] = e.dropped;
        grad_score_t[c][r] = e.grad_score;
      }
    }
    __syncthreads();
    if (want_v) add_product_nn(dv, dropped_t, do_s, group, lane, rows);
    if (want_k) add_product_nn(dk, grad_score_t, q_s, group, lane, rows);
    __syncthreads();  // the next query tile overwrites every tile
  }

  float one[kM];
#pragma unroll
  for (int i = 0; i < kM; ++i) one[i] = 1.0f;
  if (want_k) store_rows(a.grad_k + bh * s.tk * s.d, dk, one, key0, s.tk, s.d, group, lane);
  if (want_v) store_rows(a.grad_v + bh * s.tk * s.dv, dv, one, key0, s.tk, s.dv, group, lane);
}

// dQ of one tile of kRows queries, over every key tile of kKeys keys they can see.
template <int kD, int kRows, int kKeys>
__global__ void __launch_bounds__(kFlashThreads) flash_backward_q_kernel(BackwardArgs a) {
  EMU_CHECK_LAUNCH_BOUNDS(kFlashThreads);
  constexpr int kM = kRows / kGroups;  // query rows per thread
  constexpr int kN = kKeys / kLanes;   // keys per thread in a score tile
  constexpr int kO = kD / kLanes;      // gradient columns per thread
  static_assert(kM * kGroups == kRows && kN * kLanes == kKeys && kO * kLanes == kD, "tiles must split evenly");
  static_assert(
      4 * (2 * kRows * (kD + 1) + 2 * kKeys * (kD + 1) + kRows * (kKeys + 8)) + kKeys + kRows * kKeys <= kSharedLimit,
      "dQ tiles exceed 48 KiB of shared memory");
  EMU_STATIC_SHARED(q_s, float[kRows][kD + 1]);
  EMU_STATIC_SHARED(do_s, float[kRows][kD + 1]);
  EMU_STATIC_SHARED(k_s, float[kKeys][kD + 1]);
  EMU_STATIC_SHARED(v_s, float[kKeys][kD + 1]);
  EMU_STATIC_SHARED(grad_score, float[kRows][kKeys + 8]);  // dS
  EMU_STATIC_SHARED(key_ok, std::uint8_t[kKeys]);
  EMU_STATIC_SHARED(keep_s, std::uint8_t[kRows][kKeys]);

  const FlashShape& s = a.shape;
  const int lane = threadIdx.x % kLanes, group = threadIdx.x / kLanes;
  const std::int64_t bh = blockIdx.x, row0 = static_cast<std::int64_t>(blockIdx.y) * kRows;
  const int rows = static_cast<int>(s.tq - row0 < kRows ? s.tq - row0 : kRows);
  const float* k = a.k + bh * s.tk * s.d;
  const float* v = a.v + bh * s.tk * s.dv;
  const std::int32_t* pad_row = a.padding == nullptr ? nullptr : a.padding + (bh / s.heads) * s.tk;

  load_rows<kRows, kD>(q_s, a.q + bh * s.tq * s.d, row0, s.tq, s.d);
  load_rows<kRows, kD>(do_s, a.grad_out + bh * s.tq * s.dv, row0, s.tq, s.dv);
  float lse[kM], delta[kM];
  std::int64_t horizon[kM];
#pragma unroll
  for (int i = 0; i < kM; ++i) {
    const std::int64_t row = row0 + group + kGroups * i;
    lse[i] = row < s.tq ? a.lse[bh * s.tq + row] : neg_inf();
    delta[i] = row < s.tq ? a.delta[bh * s.tq + row] : 0.0f;
    horizon[i] = row < s.tq ? s.horizon(row) : 0;
  }
  float dq[kM][kO];
  set_zero(dq);

  const std::int64_t key_end = s.horizon(row0 + rows - 1);
  for (std::int64_t key0 = 0; key0 < key_end; key0 += kKeys) {  // block-uniform
    const int keys = static_cast<int>(key_end - key0 < kKeys ? key_end - key0 : kKeys);
    load_rows<kKeys, kD>(k_s, k, key0, key_end, s.d);
    load_rows<kKeys, kD>(v_s, v, key0, key_end, s.dv);
    load_key_flags(key_ok, pad_row, key0, key_end);
    if (a.drop.on) fill_keep(keep_s, a.drop.stream, bh, s.tq, s.tk, row0, rows, key0, keys);
    __syncthreads();

    float sc[kM][kN], dp[kM][kN];  // S (unscaled) and dD
    set_zero(sc);
    set_zero(dp);
    add_product_nt(sc, q_s, k_s, group, lane, s.d);
    add_product_nt(dp, do_s, v_s, group, lane, s.dv);
#pragma unroll
    for (int i = 0; i < kM; ++i) {
      const int r = group + kGroups * i;
#pragma unroll
      for (int j = 0; j < kN; ++j) {
        const int c = lane + kLanes * j;
        const bool valid = key_ok[c] != 0 && key0 + c < horizon[i];
        const bool keep = a.drop.on && valid && keep_s[r][c] != 0;
        grad_score[r][c] = element_grads(a.scale, a.drop, sc[i][j], dp[i][j], lse[i], delta[i], valid, keep).grad_score;
      }
    }
    __syncthreads();
    add_product_nn(dq, grad_score, k_s, group, lane, keys);
    __syncthreads();  // the next key tile overwrites every tile
  }

  float one[kM];
#pragma unroll
  for (int i = 0; i < kM; ++i) one[i] = 1.0f;
  store_rows(a.grad_q + bh * s.tq * s.d, dq, one, row0, s.tq, s.d, group, lane);
}

// ---------------------------------------------------------------------------------------------
// Host side.

// The FFMA forward for inputs of type In into float out and lse. float: every shape; 16-bit
// (Half, BFloat16): decoding shapes only (q.size(2) <= the decoding tile's rows).
template <typename In>
void launch_forward(const char* op, const Tensor& q, const Tensor& k, const Tensor& v, const ForwardArgsOf<In>& args) {
  dispatch_head_dim(op, q, v, [&]<int kD>() {
    using Tiles = FlashTiles<kD>;
    if constexpr (std::is_same_v<In, float>) {
      if (q.size(2) > Tiles::kDecodeRows) {
        launch_checked(op, flash_forward_kernel<kD, Tiles::kForwardRows, Tiles::kForwardKeys>,
                       flash_grid(op, q, q.size(2), Tiles::kForwardRows), kFlashThreads, 0, args);
        return;
      }
    } else {
      DEFINE_CHECK(q.size(2) <= Tiles::kDecodeRows, op, "16-bit inputs take the FFMA forward only to decode");
    }
    const dim3 grid = flash_grid(op, q, q.size(2), Tiles::kDecodeRows);
    const int splits = flash_decode_splits(std::int64_t{grid.x} * grid.y, k.size(2), Tiles::kDecodeKeys);
    if (splits == 1) {
      launch_checked(op, flash_forward_kernel<kD, Tiles::kDecodeRows, Tiles::kDecodeKeys, false, In>, grid,
                     kFlashThreads, 0, args);
      return;
    }
    // Split decoding: the keys over `splits` blocks per query tile, then the merge.
    const std::int64_t rows = q.size(0) * q.size(1) * q.size(2);
    const TensorOptions f32{DType::Float32, q.device()};
    const Tensor part_acc = empty({splits, rows, v.size(3)}, f32), part_max_sum = empty({splits, rows, 2}, f32);
    ForwardArgsOf<In> split = args;
    split.split_keys = ceil_div(ceil_div(k.size(2), Tiles::kDecodeKeys), splits) * Tiles::kDecodeKeys;
    split.part_acc = part_acc.data<float>();
    split.part_max_sum = part_max_sum.data<float>();
    launch_checked(op, flash_forward_kernel<kD, Tiles::kDecodeRows, Tiles::kDecodeKeys, true, In>,
                   dim3(grid.x, grid.y, static_cast<unsigned>(splits)), kFlashThreads, 0, split);
    launch_flash_decode_merge(op, split.part_acc, split.part_max_sum, args.out, args.lse, rows, splits,
                              static_cast<int>(v.size(3)));
  });
}

// Rows of the decoding tile for these head dims: a forward with at most this many queries decodes.
std::int64_t decode_rows(const Tensor& q, const Tensor& v) {
  const std::int64_t dmax = std::max(q.size(3), v.size(3));
  return dmax <= 32   ? FlashTiles<32>::kDecodeRows
         : dmax <= 64 ? FlashTiles<64>::kDecodeRows
                      : FlashTiles<128>::kDecodeRows;
}

template <typename In>
ForwardArgsOf<In> forward_args(const Tensor& q, const Tensor& k, const Tensor& v, float* out, const Tensor& lse,
                               const Tensor& key_padding, bool causal, double p, std::uint64_t seed,
                               std::uint64_t offset, double scale) {
  return {q.data<In>(),
          k.data<In>(),
          v.data<In>(),
          out,
          lse.data<float>(),
          padding_of(key_padding),
          shape_of(q, v, causal),
          static_cast<float>(scale),
          dropout_of(p, seed, offset)};
}

}  // namespace

void flash_attention_forward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out, const Tensor& lse,
                             const Tensor& key_padding, bool causal, double p, std::uint64_t seed, std::uint64_t offset,
                             double scale) {
  const char* op = "flash_attention";
  // One query row a head without dropout (a step of incremental decoding): the query-row kernel
  // (flash_decode.cu), on every dtype.
  if (flash_decode_forward(q, k, v, out, lse, key_padding, causal, p, scale)) return;
  if (is_float16(q.dtype())) {
    const TensorOptions wide{DType::Float32, q.device()};
    const Tensor out32 = empty(out.shape(), wide);
    // Decoding (a few query rows against a cache): the FFMA decoding tile reads the 16-bit cache as
    // it is, with split decoding, where a tensor-core tile would use one row of its 64 and one block
    // per head; out is rounded once.
    if (q.size(2) <= decode_rows(q, v) && k.dtype() == q.dtype() && v.dtype() == q.dtype()) {
      if (q.dtype() == DType::Float16)
        launch_forward(
            op, q, k, v,
            forward_args<Half>(q, k, v, out32.data<float>(), lse, key_padding, causal, p, seed, offset, scale));
      else
        launch_forward(
            op, q, k, v,
            forward_args<BFloat16>(q, k, v, out32.data<float>(), lse, key_padding, causal, p, seed, offset, scale));
      ::define::kernels::copy_into(out, out32);
      return;
    }
    // Otherwise the tensor cores where the device has them (flash_attention_mma.cu), else the FFMA
    // kernels on widened copies, out rounded once.
    if (flash_attention_forward_mma(q, k, v, out, lse, key_padding, causal, p, seed, offset, scale)) return;
    flash_attention_forward(::define::kernels::cast(q, DType::Float32), ::define::kernels::cast(k, DType::Float32),
                            ::define::kernels::cast(v, DType::Float32), out32, lse, key_padding, causal, p, seed,
                            offset, scale);
    ::define::kernels::copy_into(out, out32);
    return;
  }
  launch_forward(op, q, k, v,
                 forward_args<float>(q, k, v, out.data<float>(), lse, key_padding, causal, p, seed, offset, scale));
}

void flash_attention_backward(const Tensor& grad_out, const Tensor& q, const Tensor& k, const Tensor& v,
                              const Tensor& out, const Tensor& lse, const Tensor& grad_q, const Tensor& grad_k,
                              const Tensor& grad_v, const Tensor& key_padding, bool causal, double p,
                              std::uint64_t seed, std::uint64_t offset, double scale) {
  const char* op = "flash_attention_backward";
  // 16-bit inputs as in the forward: tensor cores, else the FFMA kernels on widened copies.
  if (is_float16(q.dtype())) {
    if (flash_attention_backward_mma(grad_out, q, k, v, out, lse, grad_q, grad_k, grad_v, key_padding, causal, p, seed,
                                     offset, scale))
      return;
    const auto wide = [](const Tensor& t) { return ::define::kernels::cast(t, DType::Float32); };
    const auto wide_out = [](const Tensor& t) {
      return t.defined() ? empty(t.shape(), {DType::Float32, t.device()}) : Tensor();
    };
    const Tensor gq = wide_out(grad_q), gk = wide_out(grad_k), gv = wide_out(grad_v);
    flash_attention_backward(wide(grad_out), wide(q), wide(k), wide(v), wide(out), lse, gq, gk, gv, key_padding, causal,
                             p, seed, offset, scale);
    for (const auto& [dst, src] : {std::pair{grad_q, gq}, std::pair{grad_k, gk}, std::pair{grad_v, gv}})
      if (dst.defined()) ::define::kernels::copy_into(dst, src);
    return;
  }
  dispatch_head_dim(op, q, v, [&]<int kD>() {
    using Tiles = FlashTiles<kD>;
    const std::int64_t rows = q.size(0) * q.size(1) * q.size(2);
    Tensor delta = empty({rows}, {DType::Float32, q.device()});
    launch_rows("flash_attention_backward (delta)",
                DeltaRows<float>{grad_out.data<float>(), out.data<float>(), delta.data<float>(), v.size(3)}, rows,
                v.size(3));
    const BackwardArgs args{q.data<float>(),
                            k.data<float>(),
                            v.data<float>(),
                            grad_out.data<float>(),
                            lse.data<float>(),
                            delta.data<float>(),
                            data_or_null(grad_q),
                            data_or_null(grad_k),
                            data_or_null(grad_v),
                            padding_of(key_padding),
                            shape_of(q, v, causal),
                            static_cast<float>(scale),
                            dropout_of(p, seed, offset)};
    if (grad_k.defined() || grad_v.defined())
      launch_checked(op, flash_backward_kv_kernel<kD, Tiles::kKvKeys, Tiles::kKvRows>,
                     flash_grid(op, q, k.size(2), Tiles::kKvKeys), kFlashThreads, 0, args);
    if (grad_q.defined())
      launch_checked(op, flash_backward_q_kernel<kD, Tiles::kQRows, Tiles::kQKeys>,
                     flash_grid(op, q, q.size(2), Tiles::kQRows), kFlashThreads, 0, args);
  });
}

}  // namespace define::kernels::DEFINE_CUDA_NS
