// What the fused attention kernel files (flash_attention.cu, flash_rel_attention.cu) share: the
// thread layout of 16 row groups of 8 lanes, tile loads into shared memory, the Philox keep flags of
// a tile, the register-tiled products, the row-group reductions and stores, the backward's delta
// rows, and the host side's head-dim dispatch and grid. The layout and why it avoids bank conflicts:
// kernels/cuda/flash_attention.cu.
//
// Included by kernel files only, after common.cuh; like a kernel file's own helpers, everything
// here is in an anonymous namespace inside the backend namespace.
#pragma once

#include <cstdint>
#include <limits>

#include "core/dtype.h"
#include "core/factory.h"
#include "core/philox.h"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/device_math.cuh"
#include "kernels/cuda/dropout_stream.cuh"
#include "kernels/cuda/float16.cuh"
#include "kernels/cuda/row_reduce.cuh"
#include "kernels/dropout.h"
#include "kernels/flash_attention.h"

namespace define::kernels::DEFINE_CUDA_NS {
namespace {

constexpr int kFlashThreads = 128;
constexpr int kLanes = 8;                        // lanes of a row group: the columns of a row
constexpr int kGroups = kFlashThreads / kLanes;  // row groups: the rows
constexpr int kSharedLimit = 48 * 1024;          // bytes of static shared memory a block may have

__device__ __forceinline__ float neg_inf() { return -std::numeric_limits<float>::infinity(); }

// The geometry of scaled dot-product attention's kernels (flash_attention.cu, flash_attention_mma.cu).
struct FlashShape {
  std::int64_t heads, tq, tk;
  int d, dv;
  bool causal;

  // Keys [0, horizon(i)) of query i may be valid; the rest are causally masked.
  __device__ std::int64_t horizon(std::int64_t i) const {
    if (!causal) return tk;
    const std::int64_t h = i + (tk - tq) + 1;
    return h < 0 ? 0 : (h > tk ? tk : h);
  }
};

// The relative family's shape (flash_rel_attention.cu, flash_rel_attention_mma.cu): Tk = M + Tq keys
// (M of memory), each query seeing the keys at distances [0, window) (all of them for window 0).
struct RelShape {
  std::int64_t heads, tq, tk, window;
  int d, dv;

  // Keys [key_begin(i), key_end(i)) are visible to query i < tq: distance i + M - j in [0, window).
  __device__ std::int64_t key_end(std::int64_t i) const { return i + (tk - tq) + 1; }
  __device__ std::int64_t key_begin(std::int64_t i) const {
    if (window <= 0) return 0;
    const std::int64_t first = i + (tk - tq) - window + 1;
    return first < 0 ? 0 : first;
  }
  __device__ bool visible(std::int64_t i, std::int64_t j) const {
    return i < tq && j >= key_begin(i) && j < key_end(i);
  }
};

struct FlashDropout {
  DropoutStream stream;
  bool on;           // p > 0
  float drop_scale;  // 1 / (1 - p) rounded to float, as dropout_scale<float>
};

// tile[r][c] = src[(row0 + r) * width + c] for 0 <= row0 + r < rows and c < width, 0 elsewhere (c < kCols),
// from float or 16-bit (exactly widened) elements. Rows whose width is a multiple of 16 bytes from a
// 16-byte aligned source move in 16-byte pieces, one a thread (4 floats or 8 16-bit words): a warp's
// request is 512 bytes, where one element a thread made it 128 (64 for 16-bit) and kept too few
// bytes in flight to cover the memory latency (kernel_bench --profile: the decoding kernels were
// latency-bound at a few percent of the copy rate). Otherwise consecutive threads read consecutive
// elements of a row. kPieces: the 16-byte form is allowed; the kernels near their register limit
// (the relative-attention backward at sm_90) spill with it and keep the element form.
template <int kRows, int kCols, bool kPieces = false, int kStride, typename S>
__device__ __forceinline__ void load_rows(float (&tile)[kRows][kStride], const S* __restrict__ src, std::int64_t row0,
                                          std::int64_t rows, int width) {
  constexpr int kVec = static_cast<int>(16 / sizeof(S));
  if (kPieces && kCols % kVec == 0 && width % kVec == 0 &&
      reinterpret_cast<std::uintptr_t>(src) % 16 == 0) {  // block-uniform
    constexpr int kPerRow = kCols / kVec;
#pragma unroll 2
    for (int t = threadIdx.x; t < kRows * kPerRow; t += kFlashThreads) {
      const int r = t / kPerRow, c = kVec * (t % kPerRow);
      const std::int64_t g = row0 + r;
      Vec16<S> piece{};
      if (g >= 0 && g < rows && c < width) piece = *reinterpret_cast<const Vec16<S>*>(src + g * width + c);
#pragma unroll
      for (int e = 0; e < kVec; ++e) tile[r][c + e] = static_cast<float>(load_value(piece.v[e]));
    }
    return;
  }
#pragma unroll 4
  for (int t = threadIdx.x; t < kRows * kCols; t += kFlashThreads) {
    const int r = t / kCols, c = t % kCols;
    const std::int64_t g = row0 + r;
    tile[r][c] = g >= 0 && g < rows && c < width ? static_cast<float>(load_value(src[g * width + c])) : 0.0f;
  }
}

// ok[c] = 1 when key key0 + c exists (< key_end) and is not padded.
template <int kKeys>
__device__ __forceinline__ void load_key_flags(std::uint8_t (&ok)[kKeys], const std::int32_t* __restrict__ pad_row,
                                               std::int64_t key0, std::int64_t key_end) {
  for (int c = threadIdx.x; c < kKeys; c += kFlashThreads) {
    const std::int64_t key = key0 + c;
    ok[c] = key < key_end && (pad_row == nullptr || pad_row[key] == 0) ? 1 : 0;
  }
}

// keep[r][c] for the tile's query rows r < rows and keys c < keys: whether element (row0 + r,
// key0 + shift * r + c) of head bh's [tq, tk] probabilities survives dropout (shift 0: a rectangle
// of keys; shift 1: a diagonal band, the keys that one run of positions meets). Keys outside
// [0, tk) get no flag (the caller masks them). The stream words of a row's keys are consecutive; a
// thread takes one Philox block (4 words) of one row at a time.
template <int kRows, int kKeys>
__device__ __forceinline__ void fill_keep(std::uint8_t (&keep)[kRows][kKeys], const DropoutStream& ds, std::int64_t bh,
                                          std::int64_t tq, std::int64_t tk, std::int64_t row0, int rows,
                                          std::int64_t key0, int keys, int shift = 0) {
  constexpr int kBlocksPerRow = kKeys / 4 + 1;  // a run of kKeys words touches at most this many blocks
  static_assert(kKeys % 4 == 0, "key tiles hold whole Philox blocks' worth of words");
  for (int t = threadIdx.x; t < kRows * kBlocksPerRow; t += kFlashThreads) {
    const int r = t / kBlocksPerRow, b = t % kBlocksPerRow;
    if (r >= rows) continue;
    // The row's keys [first, last) that exist.
    const std::int64_t start = key0 + static_cast<std::int64_t>(shift) * r;
    const std::int64_t first = start < 0 ? 0 : start;
    const std::int64_t last = start + keys < tk ? start + keys : tk;
    if (first >= last) continue;
    const std::uint64_t base = ds.offset + static_cast<std::uint64_t>((bh * tq + row0 + r) * tk);
    const std::uint64_t run = base + static_cast<std::uint64_t>(first);
    const std::uint64_t block = run / 4 + static_cast<std::uint64_t>(b);
    if (4 * block >= base + static_cast<std::uint64_t>(last)) continue;  // past the run
    const philox::U32x4 counter{{static_cast<std::uint32_t>(block), static_cast<std::uint32_t>(block >> 32), 0u, 0u}};
    const philox::U32x4 words = philox::philox4x32_10(counter, ds.key_lo, ds.key_hi);
#pragma unroll
    for (int lane = 0; lane < 4; ++lane) {
      const std::uint64_t w = 4 * block + static_cast<std::uint64_t>(lane);
      if (w < run || w >= base + static_cast<std::uint64_t>(last)) continue;
      keep[r][w - base - static_cast<std::uint64_t>(start)] = ds.keeps(words.v[lane]) ? 1 : 0;
    }
  }
}

// acc[i][j] += sum_{k < depth} a[group + 16 i][k] * b[lane + 8 j][k]: a times b transposed, both
// row-major in shared memory.
template <int kM, int kN, typename A, typename B>
__device__ __forceinline__ void add_product_nt(float (&acc)[kM][kN], const A& a, const B& b, int group, int lane,
                                               int depth) {
#pragma unroll 2
  for (int k = 0; k < depth; ++k) {
    float av[kM], bv[kN];
#pragma unroll
    for (int i = 0; i < kM; ++i) av[i] = a[group + kGroups * i][k];
#pragma unroll
    for (int j = 0; j < kN; ++j) bv[j] = b[lane + kLanes * j][k];
#pragma unroll
    for (int i = 0; i < kM; ++i)
#pragma unroll
      for (int j = 0; j < kN; ++j) acc[i][j] += av[i] * bv[j];
  }
}

// acc[i][j] += sum_{k < depth} a[group + 16 i][k] * b[k][lane + 8 j]: a times b, both row-major in
// shared memory.
template <int kM, int kN, typename A, typename B>
__device__ __forceinline__ void add_product_nn(float (&acc)[kM][kN], const A& a, const B& b, int group, int lane,
                                               int depth) {
#pragma unroll 2
  for (int k = 0; k < depth; ++k) {
    float av[kM], bv[kN];
#pragma unroll
    for (int i = 0; i < kM; ++i) av[i] = a[group + kGroups * i][k];
#pragma unroll
    for (int j = 0; j < kN; ++j) bv[j] = b[k][lane + kLanes * j];
#pragma unroll
    for (int i = 0; i < kM; ++i)
#pragma unroll
      for (int j = 0; j < kN; ++j) acc[i][j] += av[i] * bv[j];
  }
}

template <int kM, int kN>
__device__ __forceinline__ void set_zero(float (&acc)[kM][kN]) {
#pragma unroll
  for (int i = 0; i < kM; ++i)
#pragma unroll
    for (int j = 0; j < kN; ++j) acc[i][j] = 0.0f;
}

// The max and the sum over an aligned group of kWidth lanes (a power of two; the 8 lanes of a row
// group by default): xor steps whose operations commute, so every lane of the group gets the same bits.
template <int kWidth = kLanes>
__device__ __forceinline__ float group_max(float x) {
#pragma unroll
  for (int m = 1; m < kWidth; m *= 2) x = fmaxf(x, __shfl_xor_sync(kFullMask, x, m));
  return x;
}
template <int kWidth = kLanes>
__device__ __forceinline__ float group_sum(float x) {
#pragma unroll
  for (int m = 1; m < kWidth; m *= 2) x += __shfl_xor_sync(kFullMask, x, m);
  return x;
}

// Row-major [rows][width] store of a thread's kM x kO accumulator (rows row0 + group + 16 i,
// columns lane + 8 j), times `factor` per row; rows >= rows and columns >= width are not written.
template <int kM, int kO>
__device__ __forceinline__ void store_rows(float* __restrict__ dst, const float (&acc)[kM][kO],
                                           const float (&factor)[kM], std::int64_t row0, std::int64_t rows, int width,
                                           int group, int lane) {
#pragma unroll
  for (int i = 0; i < kM; ++i) {
    const std::int64_t row = row0 + group + kGroups * i;
    if (row >= rows) continue;
#pragma unroll
    for (int j = 0; j < kO; ++j) {
      const int col = lane + kLanes * j;
      if (col < width) dst[row * width + col] = acc[i][j] * factor[i];
    }
  }
}

// One key tile of the online softmax, for scores sc already scaled and masked (-inf where masked):
// each row's running max m and sum l, the output accumulator rescaled by exp(m_old - m_new), and
// the tile's probabilities exp(sc - m_new), dropped out, in p_s for the product with V. l sums the
// probabilities before dropout (the softmax's denominator), the accumulator the dropped-out ones.
template <int kM, int kN, int kO, typename PTile, typename KeepTile>
__device__ __forceinline__ void online_softmax_tile(const float (&sc)[kM][kN], float (&m)[kM], float (&l)[kM],
                                                    float (&acc)[kM][kO], PTile& p_s, const KeepTile& keep_s,
                                                    const FlashDropout& drop, int group, int lane) {
#pragma unroll
  for (int i = 0; i < kM; ++i) {
    float tile_max = neg_inf();
#pragma unroll
    for (int j = 0; j < kN; ++j) tile_max = fmaxf(tile_max, sc[i][j]);
    const float m_new = fmaxf(m[i], group_max(tile_max));
    // No valid key so far: nothing to rescale (and exp(-inf - -inf) would be NaN).
    const float alpha = m_new == neg_inf() ? 1.0f : dev_exp(m[i] - m_new);
    float sum = 0.0f;
    const int r = group + kGroups * i;
#pragma unroll
    for (int j = 0; j < kN; ++j) {
      const int c = lane + kLanes * j;
      const float p = sc[i][j] == neg_inf() ? 0.0f : dev_exp(sc[i][j] - m_new);
      sum += p;
      // keep_s is written for every valid element, and p > 0 only there.
      p_s[r][c] = !drop.on ? p : (p > 0.0f && keep_s[r][c] != 0 ? p * drop.drop_scale : 0.0f);
    }
    l[i] = l[i] * alpha + sum;
#pragma unroll
    for (int j = 0; j < kO; ++j) acc[i][j] *= alpha;
    m[i] = m_new;
  }
}

// The end of the online softmax: out = acc / l and lse = m + log(l) for the rows row0 + group + 16 i
// < tq of head bh, or zeros and -inf for a row without a valid key.
template <int kM, int kO>
__device__ __forceinline__ void finish_rows(const float (&m)[kM], const float (&l)[kM], const float (&acc)[kM][kO],
                                            float* __restrict__ out, float* __restrict__ lse, std::int64_t bh,
                                            std::int64_t row0, std::int64_t tq, int dv, int group, int lane) {
  float inv[kM];
#pragma unroll
  for (int i = 0; i < kM; ++i) {
    const float total = group_sum(l[i]);
    const bool any = m[i] != neg_inf();
    inv[i] = any ? 1.0f / total : 0.0f;
    const std::int64_t row = row0 + group + kGroups * i;
    if (lane == 0 && row < tq) lse[bh * tq + row] = any ? m[i] + dev_log(total) : neg_inf();
  }
  store_rows(out + bh * tq * dv, acc, inv, row0, tq, dv, group, lane);
}

// delta[row] = sum_j grad_out[row, j] * out[row, j] (a row op of row_reduce.cuh: a warp per row), in
// float from T's values.
template <typename T>
struct DeltaRows {
  using State = Sum<float>;
  const T* grad_out;
  const T* out;
  float* delta;
  std::int64_t dv;

  __device__ void accumulate(State& st, std::int64_t row, int first, int step) const {
    map_row(
        row * dv, 1, dv, first, step, [&](std::int64_t k) { return load_value(grad_out[k]) * load_value(out[k]); },
        [&](std::int64_t, float v) { st.add(v); });
  }
  __device__ void finish(const State& st, std::int64_t row, int first, int) const {
    if (first == 0) delta[row] = st.value();
  }
};

// P, dS (with the scale) and D of one element, from its score q . k, dD = dO . v, the row's lse and
// delta, whether the element is valid and its keep flag.
struct ElementGrads {
  float dropped;     // D = P * z
  float grad_score;  // scale * P * (dD * z - delta): d/d(q . k)
};

__device__ __forceinline__ ElementGrads element_grads(float scale, const FlashDropout& drop, float score,
                                                      float grad_dropped, float lse, float delta, bool valid,
                                                      bool keep) {
  // lse is -inf only for a row without a valid key; its P is 0.
  const float p = valid && lse != neg_inf() ? dev_exp(score * scale - lse) : 0.0f;
  float dropped = p, grad_prob = grad_dropped;
  if (drop.on) {
    dropped = keep ? p * drop.drop_scale : 0.0f;
    grad_prob = keep ? grad_dropped * drop.drop_scale : 0.0f;
  }
  return {dropped, scale * p * (grad_prob - delta)};
}

inline FlashDropout dropout_of(double p, std::uint64_t seed, std::uint64_t offset) {
  return {dropout_stream(p, seed, offset), p > 0.0, dropout_scale<float>(p)};
}

// Checks what the kernels take, and calls fn.template operator()<kD>() with the smallest largest
// head dim that holds d and dv.
template <typename Fn>
void dispatch_head_dim(const char* op, const Tensor& q, const Tensor& v, Fn&& fn) {
  if (q.dtype() != DType::Float32 && !is_float16(q.dtype()))
    fail(op, "the CUDA kernels take float32 and 16-bit tensors, not {}; float64 runs on the CPU backends",
         dtype_name(q.dtype()));
  const std::int64_t d = q.size(3), dv = v.size(3), dmax = d > dv ? d : dv;
  if (dmax > kFlashAttentionMaxHeadDim)
    fail(op, "head dims d = {}, dv = {}: the CUDA kernels take at most {}", d, dv, kFlashAttentionMaxHeadDim);
  if (dmax <= 32)
    fn.template operator()<32>();
  else if (dmax <= 64)
    fn.template operator()<64>();
  else
    fn.template operator()<128>();
}

// Grid (b * H + h, tile): tiles of `tile` rows over `length`.
inline dim3 flash_grid(const char* op, const Tensor& q, std::int64_t length, int tile) {
  const std::int64_t heads = q.size(0) * q.size(1), tiles = ceil_div(length, tile);
  if (heads > INT32_MAX || tiles > 65535)
    fail(op, "{} heads x {} tiles of {} is past the grid's limits", heads, tiles, tile);
  return dim3(static_cast<unsigned>(heads), static_cast<unsigned>(tiles));
}

inline float* data_or_null(const Tensor& t) { return t.defined() ? t.data<float>() : nullptr; }

// The kernels' key padding flags [B, Tk]: null when there are none.
inline const std::int32_t* padding_of(const Tensor& key_padding) {
  return key_padding.defined() ? key_padding.data<std::int32_t>() : nullptr;
}

// The geometry of q [B, H, Tq, d] against v [B, H, Tk, dv].
inline FlashShape shape_of(const Tensor& q, const Tensor& v, bool causal) {
  return {q.size(1), q.size(2), v.size(2), static_cast<int>(q.size(3)), static_cast<int>(v.size(3)), causal};
}

}  // namespace
}  // namespace define::kernels::DEFINE_CUDA_NS
