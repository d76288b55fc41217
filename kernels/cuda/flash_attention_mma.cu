// The flash-attention forward and backward on tensor cores (kernels/flash_attention.h), for 16-bit
// q, k and v:
// mma.sync.m16n8k8 with float accumulation, float16 from sm_75 and bfloat16 from sm_80, fragments
// loaded from shared memory with ldmatrix (kernels/cuda/mma.cuh; the emulator runs both as warp
// collectives with the PTX ISA's lane mappings). The same algorithm as flash_forward_kernel in
// flash_attention.cu (key tiles streamed through shared memory, an online softmax, the row
// log-sum-exp kept), the same masks and the same Philox dropout mask; what differs is who computes:
//
// - each of the 4 warps of a block owns 16 query rows; S = Q K^T for a key tile is kKeys / 8 mma
//   tiles of 16 x 8 per warp, accumulated in float over d in steps of 8 (Q's A fragment by
//   ldmatrix.x2 of its rows, K's B fragment by ldmatrix.x1 of key rows: K row-major is B
//   column-major);
// - the probabilities stay in registers: the accumulator fragment of S tile n (rows g, g + 8, keys
//   2t, 2t + 1 of the tile's 8 for lane 4g + t) is, rounded to 16 bits, exactly the A fragment of P
//   for the k-step n of P V, so P never goes to shared memory (FlashAttention-2's arrangement);
// - V's B fragment comes from ldmatrix.x1.trans of value rows; the output accumulates in float;
// - tiles move from global memory by asynchronous copies on sm_80 and newer (kernels/cuda/
//   async_copy.cuh; plain 16-byte loads and stores on sm_75): the forward has a tile's V in flight
//   while Q K^T and the softmax run and the next tile's K while P V runs (FlashAttention-2's
//   order, no extra shared memory); the backward kernels wait for their copies at once.
// P is rounded to the inputs' 16-bit format before it multiplies V (as the unfused path rounds D
// under mixed precision); the running max, sum and lse stay float. out is rounded once at the end.
//
// A row's values are spread over the 4 lanes of its group (lane = 4g + t), so its max and sum are
// two __shfl_xor_sync steps (xor 1, 2), whose additions commute bit for bit: every result is
// one thread's fixed-order sum, bit-identical under any schedule. Shared rows are d + 8 16-bit
// words long: 16-byte units an odd number apart, so the 8 rows of an ldmatrix hit 8 different
// 16-byte bank groups. The backward (below) has the FFMA kernels' split: dK and dV per key tile, dQ
// per query tile.
//
// Tests: tests/cuda/flash_attention_kernels_test.cpp runs these kernels through
// flash_attention_forward / _backward on the emulated device set to sm_75 (float16) and sm_80
// (bfloat16): against the reference, against the FFMA fallback, under every schedule, and through
// the autocast route.
#include "kernels/cuda/flash_attention_mma.h"

#include <cstdint>

#include "kernels/cuda/flash_mma_tiles.cuh"

namespace define::kernels::DEFINE_CUDA_NS {
namespace {

// Key tiles by the largest head dim: Q, K and V tiles of 16-bit words under 48 KiB of shared memory
// (kernels with static shared memory only: sm_61's limit, and no opt-in needed anywhere).
template <int kD>
struct MmaTiles {
  static constexpr int kKeys = kD <= 64 ? 64 : 32;
};

struct MmaForwardArgs {
  const std::uint16_t* q;
  const std::uint16_t* k;
  const std::uint16_t* v;
  std::uint16_t* out;
  float* lse;
  const std::int32_t* padding;  // null, or [B, Tk]
  FlashShape shape;
  float scale;
  FlashDropout drop;
};

template <typename T, int kD, int kKeys>
__global__ void __launch_bounds__(kFlashThreads) flash_forward_mma_kernel(MmaForwardArgs a) {
  EMU_CHECK_LAUNCH_BOUNDS(kFlashThreads);
  constexpr int kStride = kD + 8;  // 16-bit words per shared row
  constexpr int kN = kKeys / 8;    // S fragments per warp: 8 keys each
  constexpr int kO = kD / 8;       // output fragments per warp: 8 columns each
  static_assert(2 * (kMmaRows + 2 * kKeys) * kStride + kKeys + kMmaRows * kKeys <= kSharedLimit,
                "tensor-core forward tiles exceed 48 KiB of shared memory");
  EMU_STATIC_SHARED_ALIGN16(q_s, std::uint16_t[kMmaRows][kStride]);
  EMU_STATIC_SHARED_ALIGN16(k_s, std::uint16_t[kKeys][kStride]);
  EMU_STATIC_SHARED_ALIGN16(v_s, std::uint16_t[kKeys][kStride]);
  EMU_STATIC_SHARED(key_ok, std::uint8_t[kKeys]);
  EMU_STATIC_SHARED(keep_s, std::uint8_t[kMmaRows][kKeys]);

  const FlashShape& s = a.shape;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
  const int g = lane / 4, t = lane % 4;  // the PTX ISA's groupID and threadID_in_group
  const std::int64_t bh = blockIdx.x, row0 = static_cast<std::int64_t>(blockIdx.y) * kMmaRows;
  const int rows = static_cast<int>(s.tq - row0 < kMmaRows ? s.tq - row0 : kMmaRows);
  const std::uint16_t* k = a.k + bh * s.tk * s.d;
  const std::uint16_t* v = a.v + bh * s.tk * s.dv;
  const std::int32_t* pad_row = a.padding == nullptr ? nullptr : a.padding + (bh / s.heads) * s.tk;

  load_words<kMmaRows, kD>(q_s, a.q + bh * s.tq * s.d, row0, s.tq, s.d);
  // This lane's two rows of the warp's 16: g and g + 8 (fragment elements 0, 1 and 2, 3).
  int local[2];
  float m[2], l[2], acc[kO][4];
  std::int64_t horizon[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    local[h] = 16 * warp + g + 8 * h;
    const std::int64_t row = row0 + local[h];
    m[h] = neg_inf();
    l[h] = 0.0f;
    horizon[h] = row < s.tq ? s.horizon(row) : 0;
  }
  zero_fragments(acc);

  // The copies are pipelined (asynchronous from sm_80): V of a tile is in flight while Q K^T and the
  // softmax run, K of the next tile while P V runs. Group order: Q with the first K, then per tile
  // its V and the next K; wait_group 1 lands all but the newest.
  const std::int64_t key_end = s.horizon(row0 + rows - 1);
  load_words<kKeys, kD>(k_s, k, 0, key_end, s.d);
  copy_async_commit();
  for (std::int64_t key0 = 0; key0 < key_end; key0 += kKeys) {  // block-uniform: barriers are safe
    const int keys = static_cast<int>(key_end - key0 < kKeys ? key_end - key0 : kKeys);
    load_words<kKeys, kD>(v_s, v, key0, key_end, s.dv);
    copy_async_commit();
    load_key_flags(key_ok, pad_row, key0, key_end);
    if (a.drop.on) fill_keep(keep_s, a.drop.stream, bh, s.tq, s.tk, row0, rows, key0, keys);
    copy_async_wait<1>();  // Q and this tile's K
    __syncthreads();

    // S = Q K^T for the warp's 16 rows: element e of sc[n] is (row g + 8 (e >> 1), key 8 n + 2 t + (e & 1)).
    float sc[kN][4];
    zero_fragments(sc);
    add_rows_product<T, kD>(sc, q_s, 16 * warp, k_s, lane);

    // Masks and the scale, then the online softmax of each of the lane's two rows.
#pragma unroll
    for (int n = 0; n < kN; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int c = 8 * n + 2 * t + (e & 1);
        const bool valid = key_ok[c] != 0 && key0 + c < horizon[e >> 1];
        sc[n][e] = valid ? sc[n][e] * a.scale : neg_inf();
      }
    std::uint32_t pa[kN][2];  // P (dropped out, 16-bit) as the A fragments of P V
    online_softmax_fragments<T>(sc, m, l, acc, pa, keep_s, local, a.drop, t);

    __syncthreads();  // every warp is done with k_s: the next tile's K may overwrite it
    if (key0 + kKeys < key_end) load_words<kKeys, kD>(k_s, k, key0 + kKeys, key_end, s.d);
    copy_async_commit();
    copy_async_wait<1>();  // this tile's V
    __syncthreads();

    // acc += P V: V's B fragment (keys 8 n + 2 t, + 1 of column 8 o + g) by a transposed load.
    add_fragment_product<T>(acc, pa, v_s, lane);
    __syncthreads();  // the next tile overwrites v_s, key_ok and keep_s
  }

  finish_fragments<T>(m, l, acc, a.out + bh * s.tq * s.dv, a.lse + bh * s.tq, local, row0, s.tq, s.dv, t);
}

// ---------------------------------------------------------------------------------------------
// Backward: the FFMA kernels' split (flash_attention.cu), on tensor cores. Each recomputes
// P = exp(scale S - lse) for its tiles from the float accumulators of S, and dD = dO V^T; dS and D
// are rounded to 16 bits to multiply Q, K or dO, the gradients accumulate in float and are rounded
// once.

struct MmaBackwardArgs {
  const std::uint16_t* q;
  const std::uint16_t* k;
  const std::uint16_t* v;
  const std::uint16_t* grad_out;
  const float* lse;
  const float* delta;
  std::uint16_t* grad_q;  // null when not asked for (each kernel writes only its own)
  std::uint16_t* grad_k;
  std::uint16_t* grad_v;
  const std::int32_t* padding;
  FlashShape shape;
  float scale;
  FlashDropout drop;
};

// Key tiles of the dQ kernel and query tiles of the dK/dV kernel by the largest head dim: four tiles
// of 16-bit words under 48 KiB.
template <int kD>
struct MmaBackwardTiles {
  static constexpr int kOther = kD <= 64 ? 64 : 16;
};

// dK and dV of 64 keys (16 a warp: the rows of S^T), over every query tile that can see them.
template <typename T, int kD, int kQ>
__global__ void __launch_bounds__(kFlashThreads) flash_backward_kv_mma_kernel(MmaBackwardArgs a) {
  EMU_CHECK_LAUNCH_BOUNDS(kFlashThreads);
  constexpr int kKeys = kMmaRows;
  constexpr int kStride = kD + 8;
  constexpr int kN = kQ / 8;  // S^T fragments per warp: 8 queries each
  constexpr int kO = kD / 8;
  static_assert(2 * (2 * kKeys + 2 * kQ) * kStride + 8 * kQ + kKeys + kQ * kKeys <= kSharedLimit,
                "tensor-core dK/dV tiles exceed 48 KiB of shared memory");
  EMU_STATIC_SHARED_ALIGN16(k_s, std::uint16_t[kKeys][kStride]);
  EMU_STATIC_SHARED_ALIGN16(v_s, std::uint16_t[kKeys][kStride]);
  EMU_STATIC_SHARED_ALIGN16(q_s, std::uint16_t[kQ][kStride]);
  EMU_STATIC_SHARED_ALIGN16(do_s, std::uint16_t[kQ][kStride]);
  EMU_STATIC_SHARED(lse_s, float[kQ]);
  EMU_STATIC_SHARED(delta_s, float[kQ]);
  EMU_STATIC_SHARED(key_ok, std::uint8_t[kKeys]);
  EMU_STATIC_SHARED(keep_s, std::uint8_t[kQ][kKeys]);

  const FlashShape& s = a.shape;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, g = lane / 4, t = lane % 4;
  const std::int64_t bh = blockIdx.x, key0 = static_cast<std::int64_t>(blockIdx.y) * kKeys;
  const int keys = static_cast<int>(s.tk - key0 < kKeys ? s.tk - key0 : kKeys);
  const std::uint16_t* q = a.q + bh * s.tq * s.d;
  const std::uint16_t* grad_out = a.grad_out + bh * s.tq * s.dv;
  const std::int32_t* pad_row = a.padding == nullptr ? nullptr : a.padding + (bh / s.heads) * s.tk;
  const bool want_k = a.grad_k != nullptr, want_v = a.grad_v != nullptr;

  load_words<kKeys, kD>(k_s, a.k + bh * s.tk * s.d, key0, s.tk, s.d);
  load_words<kKeys, kD>(v_s, a.v + bh * s.tk * s.dv, key0, s.tk, s.dv);
  load_key_flags(key_ok, pad_row, key0, s.tk);
  const int local[2] = {16 * warp + g, 16 * warp + g + 8};  // this lane's keys (rows of S^T)
  float dk[kO][4], dv[kO][4];
  zero_fragments(dk);
  zero_fragments(dv);

  std::int64_t first_row = s.causal ? key0 - (s.tk - s.tq) : 0;
  first_row = first_row < 0 ? 0 : first_row;
  for (std::int64_t row0 = first_row; row0 < s.tq; row0 += kQ) {  // block-uniform
    const int rows = static_cast<int>(s.tq - row0 < kQ ? s.tq - row0 : kQ);
    load_words<kQ, kD>(q_s, q, row0, s.tq, s.d);
    load_words<kQ, kD>(do_s, grad_out, row0, s.tq, s.dv);
    for (int r = threadIdx.x; r < kQ; r += kFlashThreads) {
      lse_s[r] = r < rows ? a.lse[bh * s.tq + row0 + r] : neg_inf();
      delta_s[r] = r < rows ? a.delta[bh * s.tq + row0 + r] : 0.0f;
    }
    if (a.drop.on) fill_keep(keep_s, a.drop.stream, bh, s.tq, s.tk, row0, rows, key0, keys);
    copy_async_commit();
    copy_async_wait<0>();
    __syncthreads();

    // S^T = K Q^T and dD^T = V dO^T: element e of [n] is (key local[e >> 1], query 8 n + 2 t + (e & 1)).
    float st[kN][4], dpt[kN][4];
    zero_fragments(st);
    zero_fragments(dpt);
    add_rows_product<T, kD>(st, k_s, 16 * warp, q_s, lane);
    add_rows_product<T, kD>(dpt, v_s, 16 * warp, do_s, lane);
    std::uint32_t dropped[kN][2], grad_score[kN][2];  // D^T and dS^T as A fragments
#pragma unroll
    for (int n = 0; n < kN; ++n) {
      float de[4], ge[4];
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int c = local[e >> 1], r = 8 * n + 2 * t + (e & 1);
        const bool valid = r < rows && key_ok[c] != 0 && key0 + c < s.horizon(row0 + r);
        const bool keep = a.drop.on && valid && keep_s[r][c] != 0;
        const ElementGrads eg = element_grads(a.scale, a.drop, st[n][e], dpt[n][e], lse_s[r], delta_s[r], valid, keep);
        de[e] = eg.dropped;
        ge[e] = eg.grad_score;
      }
      dropped[n][0] = mma_pack(to_bits<T>(de[0]), to_bits<T>(de[1]));
      dropped[n][1] = mma_pack(to_bits<T>(de[2]), to_bits<T>(de[3]));
      grad_score[n][0] = mma_pack(to_bits<T>(ge[0]), to_bits<T>(ge[1]));
      grad_score[n][1] = mma_pack(to_bits<T>(ge[2]), to_bits<T>(ge[3]));
    }
    // dV += D^T dO, dK += dS^T Q: dO's and Q's B fragments by transposed loads of their rows.
    if (want_v) add_fragment_product<T>(dv, dropped, do_s, lane);
    if (want_k) add_fragment_product<T>(dk, grad_score, q_s, lane);
    __syncthreads();  // the next query tile overwrites q_s, do_s, lse_s, delta_s and keep_s
  }

  const float one[2] = {1.0f, 1.0f};
  if (want_k) store_fragments<T>(a.grad_k + bh * s.tk * s.d, dk, one, local, key0, s.tk, s.d, t);
  if (want_v) store_fragments<T>(a.grad_v + bh * s.tk * s.dv, dv, one, local, key0, s.tk, s.dv, t);
}

// dQ of 64 queries (16 a warp), over every key tile they can see.
template <typename T, int kD, int kKeys>
__global__ void __launch_bounds__(kFlashThreads) flash_backward_q_mma_kernel(MmaBackwardArgs a) {
  EMU_CHECK_LAUNCH_BOUNDS(kFlashThreads);
  constexpr int kStride = kD + 8;
  constexpr int kN = kKeys / 8;
  constexpr int kO = kD / 8;
  static_assert(2 * (2 * kMmaRows + 2 * kKeys) * kStride + kKeys + kMmaRows * kKeys <= kSharedLimit,
                "tensor-core dQ tiles exceed 48 KiB of shared memory");
  EMU_STATIC_SHARED_ALIGN16(q_s, std::uint16_t[kMmaRows][kStride]);
  EMU_STATIC_SHARED_ALIGN16(do_s, std::uint16_t[kMmaRows][kStride]);
  EMU_STATIC_SHARED_ALIGN16(k_s, std::uint16_t[kKeys][kStride]);
  EMU_STATIC_SHARED_ALIGN16(v_s, std::uint16_t[kKeys][kStride]);
  EMU_STATIC_SHARED(key_ok, std::uint8_t[kKeys]);
  EMU_STATIC_SHARED(keep_s, std::uint8_t[kMmaRows][kKeys]);

  const FlashShape& s = a.shape;
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, g = lane / 4, t = lane % 4;
  const std::int64_t bh = blockIdx.x, row0 = static_cast<std::int64_t>(blockIdx.y) * kMmaRows;
  const int rows = static_cast<int>(s.tq - row0 < kMmaRows ? s.tq - row0 : kMmaRows);
  const std::uint16_t* k = a.k + bh * s.tk * s.d;
  const std::uint16_t* v = a.v + bh * s.tk * s.dv;
  const std::int32_t* pad_row = a.padding == nullptr ? nullptr : a.padding + (bh / s.heads) * s.tk;

  load_words<kMmaRows, kD>(q_s, a.q + bh * s.tq * s.d, row0, s.tq, s.d);
  load_words<kMmaRows, kD>(do_s, a.grad_out + bh * s.tq * s.dv, row0, s.tq, s.dv);
  const int local[2] = {16 * warp + g, 16 * warp + g + 8};
  float lse[2], delta[2];
  std::int64_t horizon[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    const std::int64_t row = row0 + local[h];
    lse[h] = row < s.tq ? a.lse[bh * s.tq + row] : neg_inf();
    delta[h] = row < s.tq ? a.delta[bh * s.tq + row] : 0.0f;
    horizon[h] = row < s.tq ? s.horizon(row) : 0;
  }
  float dq[kO][4];
  zero_fragments(dq);

  const std::int64_t key_end = s.horizon(row0 + rows - 1);
  for (std::int64_t key0 = 0; key0 < key_end; key0 += kKeys) {  // block-uniform
    const int keys = static_cast<int>(key_end - key0 < kKeys ? key_end - key0 : kKeys);
    load_words<kKeys, kD>(k_s, k, key0, key_end, s.d);
    load_words<kKeys, kD>(v_s, v, key0, key_end, s.dv);
    load_key_flags(key_ok, pad_row, key0, key_end);
    if (a.drop.on) fill_keep(keep_s, a.drop.stream, bh, s.tq, s.tk, row0, rows, key0, keys);
    copy_async_commit();
    copy_async_wait<0>();
    __syncthreads();

    float sc[kN][4], dp[kN][4];  // S (unscaled) and dD
    zero_fragments(sc);
    zero_fragments(dp);
    add_rows_product<T, kD>(sc, q_s, 16 * warp, k_s, lane);
    add_rows_product<T, kD>(dp, do_s, 16 * warp, v_s, lane);
    std::uint32_t grad_score[kN][2];
#pragma unroll
    for (int n = 0; n < kN; ++n) {
      float ge[4];
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int h = e >> 1, c = 8 * n + 2 * t + (e & 1);
        const bool valid = key_ok[c] != 0 && key0 + c < horizon[h];
        const bool keep = a.drop.on && valid && keep_s[local[h]][c] != 0;
        ge[e] = element_grads(a.scale, a.drop, sc[n][e], dp[n][e], lse[h], delta[h], valid, keep).grad_score;
      }
      grad_score[n][0] = mma_pack(to_bits<T>(ge[0]), to_bits<T>(ge[1]));
      grad_score[n][1] = mma_pack(to_bits<T>(ge[2]), to_bits<T>(ge[3]));
    }
    // dQ += dS K: K's B fragment by a transposed load of key rows.
    add_fragment_product<T>(dq, grad_score, k_s, lane);
    __syncthreads();  // the next key tile overwrites k_s, v_s, key_ok and keep_s
  }

  const float one[2] = {1.0f, 1.0f};
  store_fragments<T>(a.grad_q + bh * s.tq * s.d, dq, one, local, row0, s.tq, s.d, t);
}

template <typename T>
void launch_mma(const char* op, const Tensor& q, const MmaForwardArgs& args, int dmax) {
  const dim3 grid = flash_grid(op, q, q.size(2), kMmaRows);
  if (dmax <= 32)
    launch_checked(op, flash_forward_mma_kernel<T, 32, MmaTiles<32>::kKeys>, grid, kFlashThreads, 0, args);
  else if (dmax <= 64)
    launch_checked(op, flash_forward_mma_kernel<T, 64, MmaTiles<64>::kKeys>, grid, kFlashThreads, 0, args);
  else
    launch_checked(op, flash_forward_mma_kernel<T, 128, MmaTiles<128>::kKeys>, grid, kFlashThreads, 0, args);
}

template <typename T, int kD>
void launch_mma_backward(const char* op, const Tensor& q, const Tensor& k, const MmaBackwardArgs& args, bool kv,
                         bool dq) {
  constexpr int kOther = MmaBackwardTiles<kD>::kOther;
  if (kv)
    launch_checked(op, flash_backward_kv_mma_kernel<T, kD, kOther>, flash_grid(op, q, k.size(2), kMmaRows),
                   kFlashThreads, 0, args);
  if (dq)
    launch_checked(op, flash_backward_q_mma_kernel<T, kD, kOther>, flash_grid(op, q, q.size(2), kMmaRows),
                   kFlashThreads, 0, args);
}

template <typename T>
void launch_mma_backward(const char* op, const Tensor& q, const Tensor& k, const MmaBackwardArgs& args, int dmax,
                         bool kv, bool dq) {
  if (dmax <= 32)
    launch_mma_backward<T, 32>(op, q, k, args, kv, dq);
  else if (dmax <= 64)
    launch_mma_backward<T, 64>(op, q, k, args, kv, dq);
  else
    launch_mma_backward<T, 128>(op, q, k, args, kv, dq);
}

// Whether the tensor-core kernels take these tensors on their device.
bool mma_applies(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& lse) {
  const DType dtype = q.dtype();
  if (!is_float16(dtype) || k.dtype() != dtype || v.dtype() != dtype || lse.dtype() != DType::Float32) return false;
  const std::int64_t dmax = q.size(3) > v.size(3) ? q.size(3) : v.size(3);
  if (dmax > kFlashAttentionMaxHeadDim) return false;
  return device_arch(q.device().index) >= (dtype == DType::Float16 ? 75 : 80);
}

}  // namespace

bool flash_attention_forward_mma(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out,
                                 const Tensor& lse, const Tensor& key_padding, bool causal, double p,
                                 std::uint64_t seed, std::uint64_t offset, double scale) {
  const char* op = "flash_attention (tensor cores)";
  if (!mma_applies(q, k, v, lse)) return false;
  const DType dtype = q.dtype();
  const std::int64_t dmax = q.size(3) > v.size(3) ? q.size(3) : v.size(3);
  const MmaForwardArgs args{words(q),
                            words(k),
                            words(v),
                            words_or_null(out),
                            lse.data<float>(),
                            padding_of(key_padding),
                            shape_of(q, v, causal),
                            static_cast<float>(scale),
                            dropout_of(p, seed, offset)};
  if (dtype == DType::Float16)
    launch_mma<Half>(op, q, args, static_cast<int>(dmax));
  else
    launch_mma<BFloat16>(op, q, args, static_cast<int>(dmax));
  return true;
}

bool flash_attention_backward_mma(const Tensor& grad_out, const Tensor& q, const Tensor& k, const Tensor& v,
                                  const Tensor& out, const Tensor& lse, const Tensor& grad_q, const Tensor& grad_k,
                                  const Tensor& grad_v, const Tensor& key_padding, bool causal, double p,
                                  std::uint64_t seed, std::uint64_t offset, double scale) {
  const char* op = "flash_attention_backward (tensor cores)";
  if (!mma_applies(q, k, v, lse) || grad_out.dtype() != q.dtype() || out.dtype() != q.dtype()) return false;
  for (const Tensor* g : {&grad_q, &grad_k, &grad_v})
    if (g->defined() && g->dtype() != q.dtype()) return false;
  const std::int64_t rows = q.size(0) * q.size(1) * q.size(2), dv = v.size(3);
  Tensor delta = empty({rows}, {DType::Float32, q.device()});
  const std::int64_t dmax = q.size(3) > dv ? q.size(3) : dv;
  const MmaBackwardArgs args{words(q),
                             words(k),
                             words(v),
                             words(grad_out),
                             lse.data<float>(),
                             delta.data<float>(),
                             words_or_null(grad_q),
                             words_or_null(grad_k),
                             words_or_null(grad_v),
                             padding_of(key_padding),
                             shape_of(q, v, causal),
                             static_cast<float>(scale),
                             dropout_of(p, seed, offset)};
  const bool kv = grad_k.defined() || grad_v.defined(), dq = grad_q.defined();
  if (q.dtype() == DType::Float16) {
    launch_rows("flash_attention_backward (delta)",
                DeltaRows<Half>{grad_out.data<Half>(), out.data<Half>(), delta.data<float>(), dv}, rows, dv);
    launch_mma_backward<Half>(op, q, k, args, static_cast<int>(dmax), kv, dq);
  } else {
    launch_rows("flash_attention_backward (delta)",
                DeltaRows<BFloat16>{grad_out.data<BFloat16>(), out.data<BFloat16>(), delta.data<float>(), dv}, rows,
                dv);
    launch_mma_backward<BFloat16>(op, q, k, args, static_cast<int>(dmax), kv, dq);
  }
  return true;
}

}  // namespace define::kernels::DEFINE_CUDA_NS
