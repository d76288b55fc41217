// The flash-attention forward on tensor cores (kernels/flash_attention.h), for 16-bit q, k and v:
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
// - V's B fragment comes from ldmatrix.x1.trans of value rows; the output accumulates in float.
// P is rounded to the inputs' 16-bit format before it multiplies V (as the unfused path rounds D
// under mixed precision); the running max, sum and lse stay float. out is rounded once at the end.
//
// A row's values are spread over the 4 lanes of its group (lane = 4g + t), so its max and sum are
// two __shfl_xor_sync steps (xor 1, 2), whose additions commute bit for bit: every result is
// one thread's fixed-order sum, bit-identical under any schedule. Shared rows are d + 8 16-bit
// words long: 16-byte units an odd number apart, so the 8 rows of an ldmatrix hit 8 different
// 16-byte bank groups. The backward stays the FFMA kernels' (on widened inputs): no tensor-core
// backward yet.
#include "kernels/cuda/flash_attention_mma.h"

#include <cstdint>
#include <type_traits>

#include "core/float16.h"
#include "kernels/cuda/flash_tiles.cuh"
#include "kernels/cuda/float16.cuh"
#include "kernels/cuda/mma.cuh"

namespace define::kernels::DEFINE_CUDA_NS {
namespace {

constexpr int kMmaWarps = kFlashThreads / 32;
constexpr int kMmaRows = 16 * kMmaWarps;  // a block's query rows: 16 per warp

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

// tile[r][c] = src[(row0 + r) * width + c] for row0 + r < rows and c < width, 0 elsewhere (c < kCols):
// 16-bit words as they are.
template <int kRowsT, int kCols, int kStride>
__device__ __forceinline__ void load_words(std::uint16_t (&tile)[kRowsT][kStride],
                                           const std::uint16_t* __restrict__ src, std::int64_t row0, std::int64_t rows,
                                           int width) {
#pragma unroll 4
  for (int t = threadIdx.x; t < kRowsT * kCols; t += kFlashThreads) {
    const int r = t / kCols, c = t % kCols;
    const std::int64_t g = row0 + r;
    tile[r][c] = g < rows && c < width ? src[g * width + c] : std::uint16_t{0};
  }
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

template <typename T, int kD, int kKeys>
__global__ void __launch_bounds__(kFlashThreads) flash_forward_mma_kernel(MmaForwardArgs a) {
  EMU_CHECK_LAUNCH_BOUNDS(kFlashThreads);
  constexpr int kStride = kD + 8;  // 16-bit words per shared row
  constexpr int kN = kKeys / 8;    // S fragments per warp: 8 keys each
  constexpr int kO = kD / 8;       // output fragments per warp: 8 columns each
  static_assert(2 * (kMmaRows + 2 * kKeys) * kStride + kKeys + kMmaRows * kKeys <= kSharedLimit,
                "tensor-core forward tiles exceed 48 KiB of shared memory");
  EMU_STATIC_SHARED(q_s, std::uint16_t[kMmaRows][kStride]);
  EMU_STATIC_SHARED(k_s, std::uint16_t[kKeys][kStride]);
  EMU_STATIC_SHARED(v_s, std::uint16_t[kKeys][kStride]);
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
#pragma unroll
  for (int o = 0; o < kO; ++o)
#pragma unroll
    for (int e = 0; e < 4; ++e) acc[o][e] = 0.0f;

  const std::int64_t key_end = s.horizon(row0 + rows - 1);
  for (std::int64_t key0 = 0; key0 < key_end; key0 += kKeys) {  // block-uniform: barriers are safe
    const int keys = static_cast<int>(key_end - key0 < kKeys ? key_end - key0 : kKeys);
    load_words<kKeys, kD>(k_s, k, key0, key_end, s.d);
    load_words<kKeys, kD>(v_s, v, key0, key_end, s.dv);
    load_key_flags(key_ok, pad_row, key0, key_end);
    if (a.drop.on) fill_keep(keep_s, a.drop.stream, bh, s.tq, s.tk, row0, rows, key0, keys);
    __syncthreads();

    // S = Q K^T for the warp's 16 rows: element e of sc[n] is (row g + 8 (e >> 1), key 8 n + 2 t + (e & 1)).
    float sc[kN][4];
#pragma unroll
    for (int n = 0; n < kN; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) sc[n][e] = 0.0f;
#pragma unroll
    for (int kk = 0; kk < kD / 8; ++kk) {
      std::uint32_t qa[2];
      ldmatrix_x2(qa, &q_s[16 * warp + lane % 16][8 * kk]);  // lanes 16-31 repeat valid addresses
#pragma unroll
      for (int n = 0; n < kN; ++n) {
        std::uint32_t kb[1];
        ldmatrix_x1(kb, &k_s[8 * n + lane % 8][8 * kk]);
        mma_16x8x8<T>(sc[n], qa, kb);
      }
    }

    // Masks and the scale, then the online softmax of each of the lane's two rows.
    float tile_max[2] = {neg_inf(), neg_inf()};
#pragma unroll
    for (int n = 0; n < kN; ++n)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int h = e >> 1, c = 8 * n + 2 * t + (e & 1);
        const bool valid = key_ok[c] != 0 && key0 + c < horizon[h];
        sc[n][e] = valid ? sc[n][e] * a.scale : neg_inf();
        tile_max[h] = fmaxf(tile_max[h], sc[n][e]);
      }
    float alpha[2], m_new[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      float x = tile_max[h];
      x = fmaxf(x, __shfl_xor_sync(kFullMask, x, 1));
      x = fmaxf(x, __shfl_xor_sync(kFullMask, x, 2));
      m_new[h] = fmaxf(m[h], x);
      // No valid key so far: nothing to rescale (and exp(-inf - -inf) would be NaN).
      alpha[h] = m_new[h] == neg_inf() ? 1.0f : dev_exp(m[h] - m_new[h]);
    }
    float sum[2] = {0.0f, 0.0f};
    std::uint32_t pa[kN][2];  // P (dropped out, 16-bit) as the A fragments of P V
#pragma unroll
    for (int n = 0; n < kN; ++n) {
      float p[4];
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int h = e >> 1, c = 8 * n + 2 * t + (e & 1);
        const float pe = sc[n][e] == neg_inf() ? 0.0f : dev_exp(sc[n][e] - m_new[h]);
        sum[h] += pe;
        // keep_s is written for every valid element, and pe > 0 only there.
        p[e] = !a.drop.on ? pe : (pe > 0.0f && keep_s[local[h]][c] != 0 ? pe * a.drop.drop_scale : 0.0f);
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

        // acc += P V: V's B fragment (keys 8 n + 2 t, + 1 of column 8 o + g) by a transposed load.
#pragma unroll
    for (int n = 0; n < kN; ++n)
#pragma unroll
      for (int o = 0; o < kO; ++o) {
        std::uint32_t vb[1];
        ldmatrix_x1_trans(vb, &v_s[8 * n + lane % 8][8 * o]);
        mma_16x8x8<T>(acc[o], pa[n], vb);
      }
    __syncthreads();  // the next tile overwrites k_s, v_s, key_ok and keep_s
  }

  float inv[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    float total = l[h];
    total += __shfl_xor_sync(kFullMask, total, 1);
    total += __shfl_xor_sync(kFullMask, total, 2);
    const bool any = m[h] != neg_inf();
    inv[h] = any ? 1.0f / total : 0.0f;
    const std::int64_t row = row0 + local[h];
    if (t == 0 && row < s.tq) a.lse[bh * s.tq + row] = any ? m[h] + dev_log(total) : neg_inf();
  }
  std::uint16_t* out = a.out + bh * s.tq * s.dv;
#pragma unroll
  for (int o = 0; o < kO; ++o)
#pragma unroll
    for (int e = 0; e < 4; ++e) {
      const int h = e >> 1, col = 8 * o + 2 * t + (e & 1);
      const std::int64_t row = row0 + local[h];
      if (row < s.tq && col < s.dv) out[row * s.dv + col] = to_bits<T>(acc[o][e] * inv[h]);
    }
}

int device_arch(int index) {
  int major = 0, minor = 0;
  DEFINE_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, index));
  DEFINE_CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, index));
  return 10 * major + minor;
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

}  // namespace

bool flash_attention_forward_mma(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out,
                                 const Tensor& lse, const Tensor& key_padding, bool causal, double p,
                                 std::uint64_t seed, std::uint64_t offset, double scale) {
  const char* op = "flash_attention (tensor cores)";
  const DType dtype = q.dtype();
  if (!is_float16(dtype) || k.dtype() != dtype || v.dtype() != dtype || lse.dtype() != DType::Float32) return false;
  const std::int64_t dmax = q.size(3) > v.size(3) ? q.size(3) : v.size(3);
  if (dmax > kFlashAttentionMaxHeadDim) return false;
  if (device_arch(q.device().index) < (dtype == DType::Float16 ? 75 : 80)) return false;
  const MmaForwardArgs args{
      reinterpret_cast<const std::uint16_t*>(q.raw_data()),
      reinterpret_cast<const std::uint16_t*>(k.raw_data()),
      reinterpret_cast<const std::uint16_t*>(v.raw_data()),
      reinterpret_cast<std::uint16_t*>(out.raw_data()),
      lse.data<float>(),
      key_padding.defined() ? key_padding.data<std::int32_t>() : nullptr,
      {q.size(1), q.size(2), k.size(2), static_cast<int>(q.size(3)), static_cast<int>(v.size(3)), causal},
      static_cast<float>(scale),
      dropout_of(p, seed, offset)};
  if (dtype == DType::Float16)
    launch_mma<Half>(op, q, args, static_cast<int>(dmax));
  else
    launch_mma<BFloat16>(op, q, args, static_cast<int>(dmax));
  return true;
}

}  // namespace define::kernels::DEFINE_CUDA_NS
