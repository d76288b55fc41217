// Decoding in the flash-attention family: a step of incremental decoding is one query row a head
// against the key / value cache, a matrix-vector product that streams the cache once. The tiled
// forward (flash_attention.cu) would give it a 16-row query tile with one real row, a block per
// head and 42 KiB of shared memory: latency-bound at a few percent of the copy rate in the
// emulator's model. Entry points: flash_decode.h; tests: tests/cuda/flash_attention_kernels_test.cpp,
// tests/cuda/flash_rel_attention_kernels_test.cpp and the op harness's decoding cases.
//
// The query-row kernel (flash_decode_row_kernel). A key row of d <= kD elements is read by a group
// of kD / 8 lanes, 8 elements a lane in two pieces of 4 (16 bytes of float, 8 of 16-bit words, laid
// out so that each load instruction of a warp reads whole stretches of rows: every sector used);
// the group's partial dot products meet in a butterfly (xor shuffles within the group, whose
// additions commute bit for bit, so every lane of the group holds the same score). Each group
// takes kStepKeys consecutive keys a step, all of their key and value pieces loaded before any is
// used (the bytes a thread has in flight are what a memory-bound kernel is made of), and keeps its
// own online softmax: running max m, sum l and the 8 output columns its lanes own. No shared memory
// in the loop.
//
// A block (4 warps) decodes 1, 2 or 4 rows, chosen from the cache's length so that short caches
// (beam search over a sentence) do not leave groups idle and long ones give each row the whole
// block; a row's groups fill whole warps, so every loop and shuffle is warp-uniform. At the end the
// groups of a warp merge by butterflies over the group bits (max, then the sum of the rescaled l
// and columns, identical bits in every lane), each lane stores a disjoint slice of its warp's row
// (the slices of the 32 lanes are contiguous: conflict-free), and the warps of a row merge in a
// fixed order through shared memory. Results are bit-identical under any schedule.
//
// Relative attention (Transformer-XL, kernels/flash_rel_attention.h) takes the same kernel with a
// third row a key: the score is (q + u) . k_j + (q + w) . r_p, and for the row i of Tq the position
// p = j + Tq - 1 - i walks r as j walks the keys, so r streams beside k and v (both dots in one
// butterfly); the window sets the first visible key.
//
// Split decoding: when the launch has too few blocks to fill the GPU, blockIdx.z takes a share of
// the keys and the block writes its unnormalised row with its max and sum; the last block of a row's
// splits to finish combines the shares in a fixed order, in the same launch (last_block.cuh). The
// decoding tile of flash_attention.cu (2 to 16 query rows, or dropout) splits the same way and
// merges in a kernel of its own.
#include "kernels/cuda/flash_decode.h"

#include <algorithm>
#include <cstdint>

#include "kernels/cuda/flash_tiles.cuh"
#include "kernels/cuda/last_block.cuh"

namespace define::kernels::DEFINE_CUDA_NS {
namespace {

constexpr int kRowWarps = kFlashThreads / 32;
constexpr int kLaneElems = 8;  // elements of a key or value row a lane holds
constexpr int kStepKeys = 4;   // consecutive keys a group takes a step

// The lanes of a key row for the largest head dim kD: lane x of a group holds piece p's elements
// (p * kLanesPerKey + x) * 4 + e, e < 4, so that piece p's load instruction reads kLanesPerKey * 4
// consecutive elements of each row (16 bytes a lane for float, 8 for 16-bit words). The layout
// depends on kD only: 16-bit inputs are summed in the same order as their widened float copies,
// bit for bit.
template <int kD>
struct RowLayout {
  static constexpr int kLanesPerKey = kD / kLaneElems;        // 4, 8, 16
  static constexpr int kGroupsPerWarp = 32 / kLanesPerKey;    // 8, 4, 2
  static constexpr int kGroups = kRowWarps * kGroupsPerWarp;  // 32, 16, 8
  static constexpr int kWidth = 4;                            // elements a piece
  static constexpr int kPieces = kLaneElems / kWidth;
  static constexpr int kSlice = kLaneElems / kGroupsPerWarp;  // columns a lane stores at the end
  __device__ static int column(int x, int element) {
    return ((element / kWidth) * kLanesPerKey + x) * kWidth + element % kWidth;
  }
};

template <typename In>
struct DecodeArgs {
  const In* q;                  // [rows, d]
  const In* k;                  // [B H, Tk, d]
  const In* v;                  // [B H, Tk, dv]
  // Relative attention (kernels/flash_rel_attention.h): r [H, Tk, d], u and w [H, d]; the window of
  // distances (0: none). Scores are (q + u) . k_j + (q + w) . r_p, p = j + Tq - 1 - i.
  const In* r;
  const In* u;
  const In* w;
  std::int64_t window;
  In* out;                      // [rows, dv], rounded once from float
  float* lse;                   // [rows]
  const std::int32_t* padding;  // null, or [B, Tk]
  FlashShape shape;
  float scale;
  std::int64_t rows;   // B * H * Tq
  int rows_per_block;  // 1, 2 or 4
  // Split decoding: blockIdx.z's keys [z * split_keys, (z + 1) * split_keys) (0: all keys), its partial
  // rows acc [splits][rows][dv] unnormalised and (max, sum) [splits][rows][2].
  std::int64_t split_keys;
  float* part_acc;
  float* part_max_sum;
  unsigned* tickets;  // split decoding: the last block of each blockIdx.x merges its rows' splits
};

// dst[e] = row[column(x, e)] for columns < width, 0 beyond. kWide: a load a piece (width a multiple
// of a piece, rows aligned to a piece), whole pieces in or out; else element by element.
template <int kD, bool kWide, typename In>
__device__ __forceinline__ void load_lane(float (&dst)[kLaneElems], const In* __restrict__ row, int width, int x) {
  using L = RowLayout<kD>;
#pragma unroll
  for (int p = 0; p < L::kPieces; ++p) {
    const int c0 = L::column(x, p * L::kWidth);
    if constexpr (kWide) {
      Vec<In, L::kWidth> piece{};
      if (c0 < width) piece = *reinterpret_cast<const Vec<In, L::kWidth>*>(row + c0);
#pragma unroll
      for (int e = 0; e < L::kWidth; ++e) dst[p * L::kWidth + e] = static_cast<float>(load_value(piece.v[e]));
    } else {
#pragma unroll
      for (int e = 0; e < L::kWidth; ++e)
        dst[p * L::kWidth + e] = c0 + e < width ? static_cast<float>(load_value(row[c0 + e])) : 0.0f;
    }
  }
}

// Split decoding's merge: M = max_s m_s, L = sum_s l_s exp(m_s - M), out = sum_s acc_s exp(m_s - M) / L,
// lse = M + log L (zeros and -inf where no split saw a valid key). A warp per (query row b * H + h, i;
// chunk of 8 output columns): lane z holds splits z and z + 32 (at most 64), their m and l and their
// 8 columns of acc (two 16-byte loads where dv is a multiple of 8, every lane a different split), so M,
// L and the columns are warp butterflies. Many warps with wide loads: a warp per row, walking the
// splits, kept too few bytes in flight (kernel_bench --profile). A butterfly leaves the same bits in
// every lane (a + b == b + a) and its order is fixed by the lanes: bit-identical under any schedule.
// out is float, or the 16-bit inputs' type (rounded once). The partial rows are read from L2: the row
// kernel merges in the launch that wrote them (kernels/cuda/last_block.cuh).
constexpr int kMergeColumns = 8;
constexpr std::int64_t kMaxSplits = 64;

// One item of the merge, by a whole warp: query row `row`, output columns [c0, c0 + kMergeColumns).
template <typename Out>
__device__ __forceinline__ void merge_splits(const float* part_acc, const float* part_max_sum, Out* out, float* lse,
                                             std::int64_t rows, int splits, int dv, std::int64_t row, int c0,
                                             int lane) {
  const bool wide = dv % kMergeColumns == 0;  // every chunk whole and 32-byte aligned
  float m[2], max = neg_inf(), total = 0.0f;
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const std::int64_t z = lane + 32 * i;
    m[i] = z < splits ? load_from_l2(part_max_sum + 2 * (z * rows + row)) : neg_inf();
    max = fmaxf(max, m[i]);
  }
#pragma unroll
  for (int x = 16; x > 0; x /= 2) max = fmaxf(max, __shfl_xor_sync(kFullMask, max, x));
  float o[kMergeColumns];
#pragma unroll
  for (int e = 0; e < kMergeColumns; ++e) o[e] = 0.0f;
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const std::int64_t z = lane + 32 * i;
    if (z >= splits) continue;
    // A split without a valid key has m = -inf, weight 0 and acc 0.
    const float w = m[i] == neg_inf() ? 0.0f : dev_exp(m[i] - max);
    total += load_from_l2(part_max_sum + 2 * (z * rows + row) + 1) * w;
    const float* a = part_acc + (z * rows + row) * dv + c0;
    if (wide) {
      const Vec16<float> lo = load_from_l2(reinterpret_cast<const Vec16<float>*>(a)),
                         hi = load_from_l2(reinterpret_cast<const Vec16<float>*>(a + 4));
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        o[e] += lo.v[e] * w;
        o[4 + e] += hi.v[e] * w;
      }
    } else {
#pragma unroll
      for (int e = 0; e < kMergeColumns; ++e)
        if (c0 + e < dv) o[e] += load_from_l2(a + e) * w;
    }
  }
#pragma unroll
  for (int x = 16; x > 0; x /= 2) {
    total += __shfl_xor_sync(kFullMask, total, x);
#pragma unroll
    for (int e = 0; e < kMergeColumns; ++e) o[e] += __shfl_xor_sync(kFullMask, o[e], x);
  }
  const float inv = max != neg_inf() ? 1.0f / total : 0.0f;
  if (lane < kMergeColumns && c0 + lane < dv) {
    float mine = o[0];
#pragma unroll
    for (int e = 1; e < kMergeColumns; ++e) mine = lane == e ? o[e] : mine;
    out[row * dv + c0 + lane] = store_value<Out>(mine * inv);
  }
  if (lane == 0 && c0 == 0) lse[row] = max != neg_inf() ? max + dev_log(total) : neg_inf();
}

// The merge as a kernel of its own, for the decoding tile of flash_attention.cu.
template <typename Out>
__global__ void __launch_bounds__(kFlashThreads)
    flash_decode_merge_kernel(const float* __restrict__ part_acc, const float* __restrict__ part_max_sum,
                              Out* __restrict__ out, float* __restrict__ lse, std::int64_t rows, int splits, int dv) {
  EMU_CHECK_LAUNCH_BOUNDS(kFlashThreads);
  const int lane = threadIdx.x % 32;
  const int chunks = (dv + kMergeColumns - 1) / kMergeColumns;
  const std::int64_t warps = static_cast<std::int64_t>(gridDim.x) * (blockDim.x / 32);
  for (std::int64_t item = (static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x) / 32;
       item < rows * chunks; item += warps)  // warp-uniform
    merge_splits<Out>(part_acc, part_max_sum, out, lse, rows, splits, dv, item / chunks,
                      kMergeColumns * static_cast<int>(item % chunks), lane);
}

template <int kD, bool kWide, typename In, bool kRel = false>
__global__ void __launch_bounds__(kFlashThreads) flash_decode_row_kernel(DecodeArgs<In> a) {
  EMU_CHECK_LAUNCH_BOUNDS(kFlashThreads);
  using L = RowLayout<kD>;
  constexpr int kX = L::kLanesPerKey;
  EMU_STATIC_SHARED_ALIGN16(acc_s, float[kRowWarps][kD]);
  EMU_STATIC_SHARED(max_s, float[kRowWarps]);
  EMU_STATIC_SHARED(sum_s, float[kRowWarps]);

  const FlashShape& s = a.shape;
  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
  const int x = lane % kX, group_in_warp = lane / kX;
  const int warps_per_row = kRowWarps / a.rows_per_block;
  const int slot = warp / warps_per_row;                                       // the block's row of this warp
  const int sub = (warp % warps_per_row) * L::kGroupsPerWarp + group_in_warp;  // the group within the row
  const int groups = warps_per_row * L::kGroupsPerWarp;                        // the row's groups
  const std::int64_t row = static_cast<std::int64_t>(blockIdx.x) * a.rows_per_block + slot;
  const bool real = row < a.rows;  // warp-uniform
  const std::int64_t bh = real ? row / s.tq : 0, i = real ? row % s.tq : 0, h = bh % s.heads;

  // The row's keys: visible (causally; relative attention also within the window), and the split's share.
  std::int64_t key_begin = 0, key_end = real ? s.horizon(i) : 0;
  if (kRel && a.window > 0) {
    const std::int64_t first = i + (s.tk - s.tq) - a.window + 1;
    key_begin = first > 0 ? first : 0;
  }
  if (a.split_keys > 0) {
    const std::int64_t share = static_cast<std::int64_t>(blockIdx.z) * a.split_keys;
    key_begin = key_begin > share ? key_begin : share;
    key_end = key_end < share + a.split_keys ? key_end : share + a.split_keys;
  }
  const In* k = a.k + bh * s.tk * s.d;
  const In* v = a.v + bh * s.tk * s.dv;
  const std::int32_t* pad_row = a.padding == nullptr ? nullptr : a.padding + (bh / s.heads) * s.tk;

  // q, or q + u with q + w beside it (relative attention).
  float q[kLaneElems], qw[kRel ? kLaneElems : 1], acc[kLaneElems], m = neg_inf(), l = 0.0f;
  load_lane<kD, kWide>(q, a.q + (real ? row : 0) * s.d, real ? s.d : 0, x);
  const In* r = nullptr;
  if constexpr (kRel) {
    float u[kLaneElems], w[kLaneElems];
    load_lane<kD, kWide>(u, a.u + h * s.d, real ? s.d : 0, x);
    load_lane<kD, kWide>(w, a.w + h * s.d, real ? s.d : 0, x);
#pragma unroll
    for (int e = 0; e < kLaneElems; ++e) {
      qw[e] = q[e] + w[e];
      q[e] += u[e];
    }
    r = a.r + h * s.tk * s.d + (s.tq - 1 - i) * s.d;  // position row of key 0 (key j: row j of this)
  }
#pragma unroll
  for (int e = 0; e < kLaneElems; ++e) acc[e] = 0.0f;

  for (std::int64_t step = key_begin; step < key_end; step += static_cast<std::int64_t>(groups) * kStepKeys) {
    const std::int64_t key0 = step + static_cast<std::int64_t>(sub) * kStepKeys;  // warp-uniform trip count
    float kr[kStepKeys][kLaneElems], vr[kStepKeys][kLaneElems], rr[kRel ? kStepKeys : 1][kLaneElems];
    EMU_UNROLL
    for (int u = 0; u < kStepKeys; ++u) {
      const bool in = key0 + u < key_end;
      const std::int64_t key = in ? key0 + u : 0;
      load_lane<kD, kWide>(kr[u], k + key * s.d, in ? s.d : 0, x);
      load_lane<kD, kWide>(vr[u], v + key * s.dv, in ? s.dv : 0, x);
      if constexpr (kRel) load_lane<kD, kWide>(rr[u], r + key * s.d, in ? s.d : 0, x);
    }
    float score[kStepKeys], step_max = neg_inf();
#pragma unroll
    for (int u = 0; u < kStepKeys; ++u) {
      float dot = 0.0f;
#pragma unroll
      for (int e = 0; e < kLaneElems; ++e) {
        dot += q[e] * kr[u][e];
        if constexpr (kRel) dot += qw[e] * rr[u][e];
      }
#pragma unroll
      for (int b = 1; b < kX; b *= 2) dot += __shfl_xor_sync(kFullMask, dot, b);
      const std::int64_t key = key0 + u;
      const bool valid = key < key_end && (pad_row == nullptr || pad_row[key] == 0);
      score[u] = valid ? dot * a.scale : neg_inf();
      step_max = fmaxf(step_max, score[u]);
    }
    // Predicated, not branched: every lane of the warp takes the step's shuffles above.
    const float m_new = fmaxf(m, step_max);
    const float rescale = m == neg_inf() ? 0.0f : dev_exp(m - m_new);
    l *= rescale;
#pragma unroll
    for (int e = 0; e < kLaneElems; ++e) acc[e] *= rescale;
#pragma unroll
    for (int u = 0; u < kStepKeys; ++u) {
      const float p = score[u] == neg_inf() ? 0.0f : dev_exp(score[u] - m_new);
      l += p;
#pragma unroll
      for (int e = 0; e < kLaneElems; ++e) acc[e] += p * vr[u][e];
    }
    m = m_new;
  }

  // The warp's groups merge: butterflies over the group bits of the lane.
  float warp_max = m;
#pragma unroll
  for (int b = kX; b < 32; b *= 2) warp_max = fmaxf(warp_max, __shfl_xor_sync(kFullMask, warp_max, b));
  const float weight = m == neg_inf() ? 0.0f : dev_exp(m - warp_max);
  l *= weight;
#pragma unroll
  for (int e = 0; e < kLaneElems; ++e) acc[e] *= weight;
#pragma unroll
  for (int b = kX; b < 32; b *= 2) {
    l += __shfl_xor_sync(kFullMask, l, b);
#pragma unroll
    for (int e = 0; e < kLaneElems; ++e) acc[e] += __shfl_xor_sync(kFullMask, acc[e], b);
  }
  // Lane (group g, x) stores its elements [g * kSlice, (g + 1) * kSlice): together one contiguous row.
  Vec<float, L::kSlice> slice;
#pragma unroll
  for (int e = 0; e < L::kSlice; ++e) slice.v[e] = acc[group_in_warp * L::kSlice + e];
  *reinterpret_cast<Vec<float, L::kSlice>*>(&acc_s[warp][L::column(x, group_in_warp * L::kSlice)]) = slice;
  if (lane == 0) {
    max_s[warp] = warp_max;
    sum_s[warp] = l;
  }
  __syncthreads();

  // The warps of each row merge in a fixed order; thread t writes column t % kD of row slot t / kD.
  for (int t = static_cast<int>(threadIdx.x); t < a.rows_per_block * kD; t += kFlashThreads) {
    const int r = t / kD, c = t % kD;
    const std::int64_t out_row = static_cast<std::int64_t>(blockIdx.x) * a.rows_per_block + r;
    if (out_row >= a.rows || c >= s.dv) continue;
    const int w0 = r * warps_per_row;
    float max = neg_inf();
    for (int w = w0; w < w0 + warps_per_row; ++w) max = fmaxf(max, max_s[w]);
    float total = 0.0f, o = 0.0f;
    for (int w = w0; w < w0 + warps_per_row; ++w) {
      const float wt = max_s[w] == neg_inf() ? 0.0f : dev_exp(max_s[w] - max);
      total += sum_s[w] * wt;
      o += acc_s[w][c] * wt;
    }
    if (a.split_keys > 0) {
      const std::int64_t part = static_cast<std::int64_t>(blockIdx.z) * a.rows + out_row;
      a.part_acc[part * s.dv + c] = o;
      if (c == 0) {
        a.part_max_sum[2 * part] = max;
        a.part_max_sum[2 * part + 1] = total;
      }
    } else {
      const bool any = max != neg_inf();
      a.out[out_row * s.dv + c] = store_value<In>(any ? o * (1.0f / total) : 0.0f);
      if (c == 0) a.lse[out_row] = any ? max + dev_log(total) : neg_inf();
    }
  }

  // Split decoding: the last of the splits of this block's rows merges them, a warp an item.
  if (a.split_keys > 0 && last_of_group(a.tickets, blockIdx.x, gridDim.z)) {  // block-uniform
    const std::int64_t row0 = static_cast<std::int64_t>(blockIdx.x) * a.rows_per_block;
    const std::int64_t count = a.rows - row0 < a.rows_per_block ? a.rows - row0 : a.rows_per_block;
    const int chunks = (s.dv + kMergeColumns - 1) / kMergeColumns;
    for (std::int64_t item = warp; item < count * chunks; item += kRowWarps)  // warp-uniform
      merge_splits<In>(a.part_acc, a.part_max_sum, a.out, a.lse, a.rows, static_cast<int>(gridDim.z), s.dv,
                       row0 + item / chunks, kMergeColumns * static_cast<int>(item % chunks), lane);
  }
}

template <typename Out>
void launch_merge(const char* op, const float* part_acc, const float* part_max_sum, Out* out, float* lse,
                  std::int64_t rows, int splits, int dv) {
  const std::int64_t items = rows * ceil_div(dv, kMergeColumns);
  launch_checked(op, flash_decode_merge_kernel<Out>, grid_for(items, kFlashThreads / 32), kFlashThreads, 0, part_acc,
                 part_max_sum, out, lse, rows, splits, dv);
}

// The query rows a block decodes for a cache of `keys` keys: 4 (a warp a row) while one step of the
// block's groups would cover the cache, fewer as it grows, 1 (the whole block on a row) from two
// steps of the block up.
template <int kD>
int rows_per_block(std::int64_t keys) {
  constexpr std::int64_t kBlockStep = RowLayout<kD>::kGroups * kStepKeys;
  return keys >= 2 * kBlockStep ? 1 : keys >= kBlockStep ? 2 : 4;
}

template <int kD, typename In, bool kRel>
void launch_row_decode(const char* op, const Tensor& k, const Tensor& v, DecodeArgs<In> a) {
  const std::int64_t keys = k.size(2);
  a.rows_per_block = rows_per_block<kD>(keys);
  const std::int64_t blocks = ceil_div(a.rows, a.rows_per_block);
  if (blocks > INT32_MAX) fail(op, "{} query rows are past the grid's limits", a.rows);
  // A block's step: its row's groups times kStepKeys keys.
  const int step = RowLayout<kD>::kGroups / a.rows_per_block * kStepKeys;
  const int splits = flash_decode_splits(blocks, keys, step);
  constexpr int kWidth = RowLayout<kD>::kWidth;
  constexpr std::uintptr_t kAlign = sizeof(Vec<In, kWidth>);
  bool wide = a.shape.d % kWidth == 0 && a.shape.dv % kWidth == 0;
  const In* const operands[] = {a.q, a.k, a.v, a.r, a.u, a.w};  // r, u, w: null (aligned) but for kRel
  for (const In* operand : operands) wide = wide && reinterpret_cast<std::uintptr_t>(operand) % kAlign == 0;
  const auto kernel = wide ? flash_decode_row_kernel<kD, true, In, kRel> : flash_decode_row_kernel<kD, false, In, kRel>;
  const dim3 grid(static_cast<unsigned>(blocks), 1, static_cast<unsigned>(splits));
  if (splits == 1) {
    a.split_keys = 0;
    launch_checked(op, kernel, grid, kFlashThreads, 0, a);
    return;
  }
  const TensorOptions f32{DType::Float32, k.device()};
  const Tensor part_acc = empty({splits, a.rows, v.size(3)}, f32), part_max_sum = empty({splits, a.rows, 2}, f32);
  a.split_keys = ceil_div(ceil_div(keys, step), splits) * step;
  a.part_acc = part_acc.data<float>();
  a.part_max_sum = part_max_sum.data<float>();
  a.tickets = group_tickets();
  launch_checked(op, kernel, grid, kFlashThreads, 0, a);
}

template <typename In>
DecodeArgs<In> decode_args(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out, const Tensor& lse,
                           bool causal, double scale) {
  DecodeArgs<In> a{};
  a.q = q.data<In>();
  a.k = k.data<In>();
  a.v = v.data<In>();
  a.out = out.data<In>();
  a.lse = lse.data<float>();
  a.shape = shape_of(q, v, causal);
  a.scale = static_cast<float>(scale);
  a.rows = q.size(0) * q.size(1) * q.size(2);
  return a;
}

template <typename In>
void row_decode(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out, const Tensor& lse,
                const Tensor& key_padding, bool causal, double scale) {
  const char* op = "flash_attention (decoding)";
  DecodeArgs<In> a = decode_args<In>(q, k, v, out, lse, causal, scale);
  a.padding = padding_of(key_padding);
  dispatch_head_dim(op, q, v, [&]<int kD>() { launch_row_decode<kD, In, false>(op, k, v, a); });
}

// Relative attention is causal: query i sees keys up to i + Tk - Tq (the horizon), r, u and w by head.
// 16-bit memories, r, u and w are read as they are, like a 16-bit cache.
template <typename In>
void rel_row_decode(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& r, const Tensor& u,
                    const Tensor& w, const Tensor& out, const Tensor& lse, std::int64_t window, double scale) {
  const char* op = "flash_rel_attention (decoding)";
  DecodeArgs<In> a = decode_args<In>(q, k, v, out, lse, true, scale);
  a.r = r.data<In>();
  a.u = u.data<In>();
  a.w = w.data<In>();
  a.window = window;
  dispatch_head_dim(op, q, v, [&]<int kD>() { launch_row_decode<kD, In, true>(op, k, v, a); });
}

}  // namespace

// Enough blocks for four per multiprocessor (a block loads, then computes, so several per
// multiprocessor keep its loads in flight; the model put two at 40 us and four at 21 us for the
// decoding tile at 1 x 8 x 4,096 keys, kernel_bench --profile), at least two of a block's key
// steps a split (fewer would spend more on the merge and the partial rows than they save), at most
// 64 (the merge's lanes). One block per b * H is what a step of incremental decoding with a small
// batch launches: a few of a large GPU's multiprocessors streaming the whole cache while the rest
// idle.
int flash_decode_splits(std::int64_t blocks, std::int64_t keys, int tile) {
  constexpr std::int64_t kMinTilesPerSplit = 2;
  const std::int64_t target = 4 * static_cast<std::int64_t>(multiprocessor_count());
  if (blocks >= target || blocks > kMaxGridBlocks) return 1;  // the row kernel's groups: one ticket each
  const std::int64_t by_keys = ceil_div(keys, tile) / kMinTilesPerSplit;
  const std::int64_t splits = std::min({ceil_div(target, blocks), by_keys, kMaxSplits});
  return splits > 1 ? static_cast<int>(splits) : 1;
}

void launch_flash_decode_merge(const char* op, const float* part_acc, const float* part_max_sum, float* out, float* lse,
                               std::int64_t rows, int splits, int dv) {
  launch_merge(op, part_acc, part_max_sum, out, lse, rows, splits, dv);
}

bool flash_decode_forward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& out, const Tensor& lse,
                          const Tensor& key_padding, bool causal, double p, double scale) {
  if (q.size(2) != 1 || p > 0.0 || k.dtype() != q.dtype() || v.dtype() != q.dtype() || out.dtype() != q.dtype())
    return false;
  switch (q.dtype()) {
    case DType::Float32:
      row_decode<float>(q, k, v, out, lse, key_padding, causal, scale);
      return true;
    case DType::Float16:
      row_decode<Half>(q, k, v, out, lse, key_padding, causal, scale);
      return true;
    case DType::BFloat16:
      row_decode<BFloat16>(q, k, v, out, lse, key_padding, causal, scale);
      return true;
    default:
      return false;
  }
}

bool flash_rel_decode_forward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& r, const Tensor& u,
                              const Tensor& w, const Tensor& out, const Tensor& lse, std::int64_t window, double p,
                              double scale) {
  if (q.size(2) != 1 || p > 0.0) return false;
  for (const Tensor* t : {&k, &v, &r, &u, &w, &out})
    if (t->dtype() != q.dtype()) return false;
  switch (q.dtype()) {
    case DType::Float32:
      rel_row_decode<float>(q, k, v, r, u, w, out, lse, window, scale);
      return true;
    case DType::Float16:
      rel_row_decode<Half>(q, k, v, r, u, w, out, lse, window, scale);
      return true;
    case DType::BFloat16:
      rel_row_decode<BFloat16>(q, k, v, r, u, w, out, lse, window, scale);
      return true;
    default:
      return false;
  }
}

}  // namespace define::kernels::DEFINE_CUDA_NS
