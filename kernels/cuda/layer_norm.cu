// CUDA layer-norm family: forward (y, mean, rstd per row) and backward (dx, dweight, dbias).
// Entry points and checks: kernels/layer_norm.cpp (inputs arrive contiguous, viewed as
// [rows, cols] with cols the last dim); reference: kernels/ref/layer_norm.cpp; tests: the op
// harness in mode emu (tests/ops/layer_norm_test.cpp) and tests/cuda/layer_norm_kernels_test.cpp.
//
// Row kernels (forward, and dx in the backward pass) give each row either one warp (short rows,
// four rows per 128-thread block) or one 256-thread block (long rows). Statistics are two-pass:
// the first pass sums the row and keeps each thread's elements in shared memory, the second sums
// squared deviations from the mean (stable when |mean| >> std). Each thread only re-reads
// elements it cached itself, so the cache needs no barrier; rows too long for the cache are
// re-read from global memory instead. Row sums are warp butterflies (every lane ends with the
// same bits), then, in block mode, per-warp partials added in warp order through shared memory.
// Every sum is a SumAcc (float_sum.cuh: compensated float for float32): a long row puts thousands
// of elements on one thread, and a plain float sum drops those below half an ulp of its total.
//
// 16-bit activations (Half / BFloat16) are read and written in their format and everything else
// happens in float: the statistics (mean and rstd are float32 tensors), the row cache, the sums
// and the partials. The affine parameters either share x's dtype or are float32 (the master
// weights of a mixed-precision run); dweight / dbias come out in the parameters' dtype.
//
// dweight/dbias are column sums over rows, done without atomics: rows are cut into chunks whose
// number depends only on the shape, a partial sum per (chunk, column) goes into a scratch tensor,
// and a second kernel adds the partials of each column in chunk order. The result is therefore
// bit-identical for any schedule of the blocks and threads.
//
// The backward pass of rows up to 2,048 long reads dy and x once (layer_norm_backward_kernel): a
// 256-thread block (fewer warps for rows under 256) takes the rows of one chunk in turn, each
// thread owning the same columns of every row, so it computes its elements of dx and adds their
// dy * xhat and dy to per-column sums it keeps in registers, written as the chunk's partials at
// the end. Whichever gradients are asked for, the same kernel computes them, so each comes out
// the same bits either way. Longer rows take dx (layer_norm_dx_kernel) and the partials
// (layer_norm_param_partials_kernel) separately, each reading the inputs.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <type_traits>

#include "core/dtype.h"
#include "core/factory.h"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/float16.cuh"
#include "kernels/cuda/float_sum.cuh"
#include "kernels/cuda/map_row.cuh"

namespace define::kernels::DEFINE_CUDA_NS {
namespace {

constexpr int kWarp = 32;
// Rows up to this long get one warp each (at most 32 elements per lane); longer rows a block.
constexpr std::int64_t kMaxWarpRowCols = 1024;
constexpr int kWarpRowsPerBlock = 4;  // warp-per-row: 4 warps = 4 rows per 128-thread block
constexpr int kRowBlockWarps = 8;     // block-per-row: 256 threads per row
constexpr int kMaxRowThreads = kWarp * kRowBlockWarps;  // the larger of the two row block shapes
// Shared memory for the per-row element cache; beyond it rows are re-read from global memory.
constexpr std::size_t kMaxRowCacheBytes = 32 * 1024;

// Column-sum kernels: a block covers kColTile columns x one chunk of rows, with kColRowThreads
// threads striding down the chunk's rows for each column.
constexpr int kColTile = 32;
constexpr int kColRowThreads = 8;
constexpr std::int64_t kMinRowsPerChunk = 32;
constexpr std::int64_t kMaxChunks = 256;

__device__ __forceinline__ float square_root(float v) { return sqrtf(v); }
__device__ __forceinline__ double square_root(double v) { return sqrt(v); }

// Sum over the 32 lanes of a warp by butterfly exchange. The merge is commutative, so every lane
// computes bit-identical sums at every step and ends with the same result.
template <typename T>
__device__ __forceinline__ SumAcc<T> warp_all_sum(SumAcc<T> v) {
#pragma unroll
  for (int m = kWarp / 2; m > 0; m >>= 1) v = v.merged(v.shfl_xor(m));
  return v;
}

// Sums each of the N values over the threads that share a row (the warp, or the whole block when
// kBlockPerRow), leaving the totals in every thread. Block mode has two barriers, so it must be
// reached by the whole block; warp mode by the whole warp.
template <bool kBlockPerRow, int N, typename T>
__device__ __forceinline__ void row_all_sum(SumAcc<T> (&v)[N]) {
#pragma unroll
  for (int k = 0; k < N; ++k) v[k] = warp_all_sum(v[k]);
  if constexpr (kBlockPerRow) {
    EMU_STATIC_SHARED(warp_sums, SumAcc<T>[N][kWarp]);
    if (threadIdx.x == 0) {
#pragma unroll
      for (int k = 0; k < N; ++k) warp_sums[k][threadIdx.y] = v[k];
    }
    __syncthreads();
#pragma unroll
    for (int k = 0; k < N; ++k) {
      SumAcc<T> total = SumAcc<T>::zero();
      for (unsigned w = 0; w < blockDim.y; ++w) total = total.merged(warp_sums[k][w]);  // fixed warp order
      v[k] = total;
    }
    __syncthreads();  // the next reduction overwrites warp_sums
  }
}

// How the threads of a block map onto rows: blockDim is (32, warps); a row belongs to one warp
// (threadIdx.y picks the row) or to the whole block.
template <bool kBlockPerRow>
struct RowThreads {
  int index;                 // this thread's position among the row's threads
  int count;                 // threads per row
  std::int64_t first_row;    // this thread's first row; then every row_step rows
  std::int64_t row_step;
  int slot;                  // which per-row cache slice of the block this thread uses

  __device__ __forceinline__ RowThreads() {
    if constexpr (kBlockPerRow) {
      index = static_cast<int>(threadIdx.y * blockDim.x + threadIdx.x);
      count = static_cast<int>(blockDim.x * blockDim.y);
      first_row = blockIdx.x;
      row_step = gridDim.x;
      slot = 0;
    } else {
      index = static_cast<int>(threadIdx.x);
      count = kWarp;
      first_row = static_cast<std::int64_t>(blockIdx.x) * blockDim.y + threadIdx.y;
      row_step = static_cast<std::int64_t>(gridDim.x) * blockDim.y;
      slot = static_cast<int>(threadIdx.y);
    }
  }
};

// One row per warp or block: mean and rstd by two passes, then y = (x - mean) * rstd * w + b.
// `cache` says whether the dynamic shared memory holds `cols` elements per row slot.
template <typename T, typename W, bool kBlockPerRow>
__global__ void __launch_bounds__(kMaxRowThreads)
    layer_norm_forward_kernel(const T* __restrict__ x, const W* __restrict__ weight, const W* __restrict__ bias,
                              T* __restrict__ y, compute_t<T>* __restrict__ mean, compute_t<T>* __restrict__ rstd,
                              std::int64_t rows, std::int64_t cols, compute_t<T> eps, bool cache) {
  EMU_CHECK_LAUNCH_BOUNDS(kMaxRowThreads);
  using C = compute_t<T>;
  EMU_DYNAMIC_SHARED(C, smem);
  const RowThreads<kBlockPerRow> t;
  C* row_cache = cache ? smem + t.slot * cols : nullptr;
  for (std::int64_t row = t.first_row; row < rows; row += t.row_step) {  // uniform over the row's threads
    const T* xr = x + row * cols;
    SumAcc<C> sum[1] = {SumAcc<C>::zero()};
    map_row(
        0, 1, cols, t.index, t.count, [&](std::int64_t j) { return load_value(xr[j]); },
        [&](std::int64_t j, C v) {
          if (row_cache) row_cache[j] = v;
          sum[0].add(v);
        });
    row_all_sum<kBlockPerRow>(sum);
    const C mu = sum[0].value() / static_cast<C>(cols);

    // Only this thread's own elements are re-read, from the cache or from x. When x is already in
    // the compute type, one pointer serves both (fewer live registers: the float64 form spills on
    // sm_80 with a branch per element).
    const C* plain = nullptr;
    if constexpr (std::is_same_v<T, C>) plain = row_cache ? row_cache : xr;
    auto element = [&](std::int64_t j) -> C {
      if constexpr (std::is_same_v<T, C>)
        return plain[j];
      else
        return row_cache ? row_cache[j] : load_value(xr[j]);
    };
    SumAcc<C> sq[1] = {SumAcc<C>::zero()};
    map_row(0, 1, cols, t.index, t.count, element, [&](std::int64_t, C v) {
      const C c = v - mu;
      sq[0].add(c * c);
    });
    row_all_sum<kBlockPerRow>(sq);
    const C rs = C(1) / square_root(sq[0].value() / static_cast<C>(cols) + eps);

    // The element and its weight and bias (1 and 0 where there are none), loaded ahead together.
    struct Affine {
      C v, w, b;
    };
    T* yr = y + row * cols;
    map_row(
        0, 1, cols, t.index, t.count,
        [&](std::int64_t j) {
          return Affine{element(j), weight ? static_cast<C>(load_value(weight[j])) : C(1),
                        bias ? static_cast<C>(load_value(bias[j])) : C(0)};
        },
        [&](std::int64_t j, const Affine& a) {
          C v = (a.v - mu) * rs;  // (x - mean) first: x * rstd - mean * rstd would cancel when |mean| >> std
          if (weight) v *= a.w;
          if (bias) v += a.b;
          yr[j] = store_value<T>(v);
        });
    if (t.index == 0) {
      mean[row] = mu;
      rstd[row] = rs;
    }
  }
}

// dx of one row per warp or block: dx = rstd * (g - mean(g) - xhat * mean(g * xhat)) with
// g = dy * w and xhat = (x - mean) * rstd. With `cache`, the first pass keeps xhat and g in
// shared memory (2 * cols elements per row slot) for the second.
template <typename T, typename W, bool kBlockPerRow>
__global__ void __launch_bounds__(kMaxRowThreads)
    layer_norm_dx_kernel(const T* __restrict__ dy, const T* __restrict__ x, const W* __restrict__ weight,
                         const compute_t<T>* __restrict__ mean, const compute_t<T>* __restrict__ rstd,
                         T* __restrict__ dx, std::int64_t rows, std::int64_t cols, bool cache) {
  EMU_CHECK_LAUNCH_BOUNDS(kMaxRowThreads);
  using C = compute_t<T>;
  EMU_DYNAMIC_SHARED(C, smem);
  const RowThreads<kBlockPerRow> t;
  C* xhat_cache = cache ? smem + 2 * t.slot * cols : nullptr;
  C* g_cache = cache ? xhat_cache + cols : nullptr;
  for (std::int64_t row = t.first_row; row < rows; row += t.row_step) {  // uniform over the row's threads
    const T* xr = x + row * cols;
    const T* dyr = dy + row * cols;
    const C mu = mean[row], rs = rstd[row];
    auto xhat_at = [&](std::int64_t j) -> C { return (load_value(xr[j]) - mu) * rs; };
    auto g_at = [&](std::int64_t j) -> C {
      const C d = load_value(dyr[j]);
      return weight ? d * static_cast<C>(load_value(weight[j])) : d;
    };
    SumAcc<C> sums[2] = {SumAcc<C>::zero(), SumAcc<C>::zero()};  // sum of g, sum of g * xhat
    for (std::int64_t j = t.index; j < cols; j += t.count) {
      const C xhat = xhat_at(j);
      const C g = g_at(j);
      if (cache) {
        xhat_cache[j] = xhat;
        g_cache[j] = g;
      }
      sums[0].add(g);
      sums[1].add(g * xhat);
    }
    row_all_sum<kBlockPerRow>(sums);
    const C mean_g = sums[0].value() / static_cast<C>(cols), mean_gx = sums[1].value() / static_cast<C>(cols);

    T* dxr = dx + row * cols;
    for (std::int64_t j = t.index; j < cols; j += t.count) {
      const C xhat = cache ? xhat_cache[j] : xhat_at(j);
      const C g = cache ? g_cache[j] : g_at(j);
      dxr[j] = store_value<T>(rs * (g - mean_g - xhat * mean_gx));
    }
  }
}

// dx, and the partial column sums of dy * xhat and dy, of the rows of chunk blockIdx.x in one pass
// (each output may be null: not needed).
// Block (32, warps): kFusedWarps, or as many as a row shorter than kFusedThreads needs (one warp for
// a row of 32 or fewer: the other warps would only add zeros, at two barriers a row). Thread t owns
// columns t, t + threads, ... (kPer of them, the last ones possibly past the row's end) of every
// row; the rows of the chunk are taken in order, each by the whole block (two block reductions a
// row: the sums of g and g * xhat).
constexpr int kFusedWarps = 8;
constexpr int kFusedThreads = kWarp * kFusedWarps;
constexpr int kFusedMaxPerThread = 8;  // columns per thread: rows up to 2,048 long

template <typename T, typename W, int kPer>
__global__ void __launch_bounds__(kFusedThreads)
    layer_norm_backward_kernel(const T* __restrict__ dy, const T* __restrict__ x, const W* __restrict__ weight,
                               const compute_t<T>* __restrict__ mean, const compute_t<T>* __restrict__ rstd,
                               T* __restrict__ dx, compute_t<T>* __restrict__ partial_w,
                               compute_t<T>* __restrict__ partial_b, std::int64_t rows, std::int64_t cols,
                               std::int64_t rows_per_chunk) {
  EMU_CHECK_LAUNCH_BOUNDS(kFusedThreads);
  using C = compute_t<T>;
  const int t = static_cast<int>(threadIdx.y * blockDim.x + threadIdx.x);
  const std::int64_t threads = static_cast<std::int64_t>(blockDim.x) * blockDim.y;
  C w[kPer];
  SumAcc<C> pw[kPer], pb[kPer];
#pragma unroll
  for (int k = 0; k < kPer; ++k) {
    const std::int64_t col = t + k * threads;
    w[k] = weight && col < cols ? static_cast<C>(load_value(weight[col])) : C(1);
    pw[k] = SumAcc<C>::zero();
    pb[k] = SumAcc<C>::zero();
  }
  const std::int64_t chunk = blockIdx.x;
  const std::int64_t row_begin = chunk * rows_per_chunk;
  const std::int64_t row_end = row_begin + rows_per_chunk < rows ? row_begin + rows_per_chunk : rows;
  for (std::int64_t row = row_begin; row < row_end; ++row) {  // block-uniform: the barriers are safe
    const C mu = mean[row], rs = rstd[row];
    C xhat[kPer], g[kPer];
    if (!dx) {  // parameter gradients only: no row sums (block-uniform)
      EMU_UNROLL
      for (int k = 0; k < kPer; ++k) {
        const std::int64_t col = t + k * threads;
        if (col < cols) {
          const C d = load_value(dy[row * cols + col]);
          pw[k].add(d * ((load_value(x[row * cols + col]) - mu) * rs));
          pb[k].add(d);
        }
      }
      continue;
    }
    SumAcc<C> sums[2] = {SumAcc<C>::zero(), SumAcc<C>::zero()};  // sum of g, sum of g * xhat
    // Unrolled (in the emulator too: EMU_UNROLL), the kPer elements' loads of dy and x are all in
    // flight before the first is used.
    EMU_UNROLL
    for (int k = 0; k < kPer; ++k) {
      const std::int64_t col = t + k * threads;
      xhat[k] = C(0);
      g[k] = C(0);
      if (col < cols) {
        const C d = load_value(dy[row * cols + col]);
        xhat[k] = (load_value(x[row * cols + col]) - mu) * rs;
        g[k] = weight ? d * w[k] : d;
        sums[0].add(g[k]);
        sums[1].add(g[k] * xhat[k]);
        pw[k].add(d * xhat[k]);
        pb[k].add(d);
      }
    }
    row_all_sum<true>(sums);
    const C mean_g = sums[0].value() / static_cast<C>(cols), mean_gx = sums[1].value() / static_cast<C>(cols);
#pragma unroll
    for (int k = 0; k < kPer; ++k) {
      const std::int64_t col = t + k * threads;
      if (dx && col < cols) dx[row * cols + col] = store_value<T>(rs * (g[k] - mean_g - xhat[k] * mean_gx));
    }
  }
#pragma unroll
  for (int k = 0; k < kPer; ++k) {
    const std::int64_t col = t + k * threads;
    if (col < cols) {
      if (partial_w) partial_w[chunk * cols + col] = pw[k].value();
      if (partial_b) partial_b[chunk * cols + col] = pb[k].value();
    }
  }
}

// A column's kRows partial sums merged in y order (thread y = 0 of the column does it).
template <int kRows, typename C>
__device__ __forceinline__ SumAcc<C> merge_column(const SumAcc<C> (&tile)[kRows][kColTile], int x) {
  SumAcc<C> t = SumAcc<C>::zero();
#pragma unroll
  for (int k = 0; k < kRows; ++k) t = t.merged(tile[k][x]);  // fixed order
  return t;
}

// Partial column sums of dy * xhat (dweight) and dy (dbias) over the rows of chunk blockIdx.y, for
// columns blockIdx.x * kColTile + threadIdx.x. Block (kColTile, kColRowThreads): the threads of a
// column take every kColRowThreads-th row of the chunk, then thread y = 0 adds their sums in y
// order. Writes partial_w/partial_b[chunk * cols + col] (either may be null: not needed).
template <typename T>
__global__ void layer_norm_param_partials_kernel(const T* __restrict__ dy, const T* __restrict__ x,
                                                 const compute_t<T>* __restrict__ mean,
                                                 const compute_t<T>* __restrict__ rstd,
                                                 compute_t<T>* __restrict__ partial_w,
                                                 compute_t<T>* __restrict__ partial_b, std::int64_t rows,
                                                 std::int64_t cols, std::int64_t rows_per_chunk) {
  using C = compute_t<T>;
  EMU_STATIC_SHARED(tile_w, SumAcc<C>[kColRowThreads][kColTile]);
  EMU_STATIC_SHARED(tile_b, SumAcc<C>[kColRowThreads][kColTile]);
  const std::int64_t col = static_cast<std::int64_t>(blockIdx.x) * kColTile + threadIdx.x;
  const std::int64_t chunk = blockIdx.y;
  const std::int64_t row_begin = chunk * rows_per_chunk;
  const std::int64_t row_end = row_begin + rows_per_chunk < rows ? row_begin + rows_per_chunk : rows;
  SumAcc<C> sw = SumAcc<C>::zero(), sb = SumAcc<C>::zero();
  if (col < cols) {
    for (std::int64_t r = row_begin + threadIdx.y; r < row_end; r += kColRowThreads) {
      const C g = load_value(dy[r * cols + col]);
      if (partial_w) sw.add(g * ((load_value(x[r * cols + col]) - mean[r]) * rstd[r]));
      sb.add(g);
    }
  }
  tile_w[threadIdx.y][threadIdx.x] = sw;
  tile_b[threadIdx.y][threadIdx.x] = sb;
  __syncthreads();
  if (threadIdx.y == 0 && col < cols) {
    const SumAcc<C> tw = merge_column(tile_w, threadIdx.x), tb = merge_column(tile_b, threadIdx.x);
    if (partial_w) partial_w[chunk * cols + col] = tw.value();
    if (partial_b) partial_b[chunk * cols + col] = tb.value();
  }
}

// dweight/dbias[col] = the column's chunk partials added, rounded once to the parameters' dtype W
// (either output may be null). Block (kColTile, kFinishRowThreads): the threads of a column take
// every kFinishRowThreads-th chunk, four loads ahead each (map_row), then thread y = 0 merges their
// sums in y order. One chain of `chunks` (up to 512) dependent additions a column, or eight threads
// a column, leave the launch's few blocks waiting on memory latency (kernel_bench --profile).
constexpr int kFinishRowThreads = 32;
constexpr int kFinishThreads = kColTile * kFinishRowThreads;

template <typename C, typename W>
__global__ void __launch_bounds__(kFinishThreads)
    layer_norm_param_finish_kernel(const C* __restrict__ partial_w, const C* __restrict__ partial_b,
                                   W* __restrict__ dweight, W* __restrict__ dbias, std::int64_t chunks,
                                   std::int64_t cols) {
  EMU_CHECK_LAUNCH_BOUNDS(kFinishThreads);
  EMU_STATIC_SHARED(tile_w, SumAcc<C>[kFinishRowThreads][kColTile]);
  EMU_STATIC_SHARED(tile_b, SumAcc<C>[kFinishRowThreads][kColTile]);
  const std::int64_t col = static_cast<std::int64_t>(blockIdx.x) * kColTile + threadIdx.x;
  struct Partials {
    C w, b;
  };
  SumAcc<C> sw = SumAcc<C>::zero(), sb = SumAcc<C>::zero();
  if (col < cols)
    map_row(
        col, cols, chunks, static_cast<int>(threadIdx.y), kFinishRowThreads,
        [&](std::int64_t k) {
          return Partials{dweight ? partial_w[k] : C(0), dbias ? partial_b[k] : C(0)};
        },
        [&](std::int64_t, const Partials& p) {
          if (dweight) sw.add(p.w);
          if (dbias) sb.add(p.b);
        });
  tile_w[threadIdx.y][threadIdx.x] = sw;
  tile_b[threadIdx.y][threadIdx.x] = sb;
  __syncthreads();
  if (threadIdx.y == 0 && col < cols) {
    const SumAcc<C> tw = merge_column(tile_w, threadIdx.x), tb = merge_column(tile_b, threadIdx.x);
    if (dweight) dweight[col] = store_value<W>(static_cast<compute_t<W>>(tw.value()));
    if (dbias) dbias[col] = store_value<W>(static_cast<compute_t<W>>(tb.value()));
  }
}

// Launch shape of a row kernel: warp or block per row, and whether the per-row cache of
// `cached_per_row` elements fits in shared memory.
struct RowLaunch {
  bool block_per_row;
  dim3 grid, block;
  bool cache;
  std::size_t smem;
};

template <typename T>
RowLaunch row_launch(std::int64_t rows, std::int64_t cols, std::int64_t cached_per_row) {
  RowLaunch l{};
  l.block_per_row = cols > kMaxWarpRowCols;
  const int rows_per_block = l.block_per_row ? 1 : kWarpRowsPerBlock;
  l.block = dim3(kWarp, l.block_per_row ? kRowBlockWarps : kWarpRowsPerBlock);
  l.grid = dim3(grid_for(rows, rows_per_block));
  const std::size_t bytes =
      static_cast<std::size_t>(rows_per_block) * static_cast<std::size_t>(cached_per_row) * sizeof(T);
  l.cache = bytes <= kMaxRowCacheBytes;
  l.smem = l.cache ? bytes : 0;
  return l;
}

template <typename T>
const T* optional_data(const Tensor& t) {
  return t.defined() ? t.data<T>() : nullptr;
}
template <typename T>
T* optional_mutable_data(const Tensor& t) {
  return t.defined() ? t.data<T>() : nullptr;
}

// The finishing kernel's launch: a block per kColTile columns.
template <typename C, typename W>
void finish_params(const char* op, const C* partial_w, const C* partial_b, const Tensor& dweight, const Tensor& dbias,
                   std::int64_t chunks, std::int64_t cols) {
  launch_checked(op, layer_norm_param_finish_kernel<C, W>,
                 dim3(static_cast<unsigned>((cols + kColTile - 1) / kColTile)), dim3(kColTile, kFinishRowThreads), 0,
                 partial_w, partial_b, optional_mutable_data<W>(dweight), optional_mutable_data<W>(dbias), chunks,
                 cols);
}

template <typename T>
void forward_typed(const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& y, const Tensor& mean,
                   const Tensor& rstd, double eps) {
  using C = compute_t<T>;
  const char* op = "layer_norm";
  const std::int64_t cols = x.shape().back(), rows = x.numel() / cols;
  const RowLaunch l = row_launch<C>(rows, cols, cols);
  // The parameters share x's type or are float32 (the entry point, kernels/layer_norm.cpp, allows
  // nothing else).
  const Tensor& param = weight.defined() ? weight : bias;
  with_same_or_float32<T>(op, "parameters", param.defined() ? param.dtype() : x.dtype(), [&](auto w_tag) {
    using W = decltype(w_tag);
    auto* kernel = l.block_per_row ? layer_norm_forward_kernel<T, W, true> : layer_norm_forward_kernel<T, W, false>;
    launch_checked(op, kernel, l.grid, l.block, l.smem, x.data<T>(), optional_data<W>(weight), optional_data<W>(bias),
                   y.data<T>(), mean.data<C>(), rstd.data<C>(), rows, cols, static_cast<C>(eps), l.cache);
  });
}

// Rows per chunk of the parameter-gradient sums: a function of the row count only, which is what
// makes dweight/dbias reproducible.
std::int64_t param_chunks(std::int64_t rows) {
  const std::int64_t chunks = (rows + kMinRowsPerChunk - 1) / kMinRowsPerChunk;
  return chunks < kMaxChunks ? chunks : kMaxChunks;
}

template <typename T, typename W>
void param_grads(const Tensor& dy, const Tensor& x, const Tensor& mean, const Tensor& rstd, const Tensor& dweight,
                 const Tensor& dbias) {
  using C = compute_t<T>;
  const char* op = "layer_norm_backward";
  const std::int64_t cols = x.shape().back(), rows = x.numel() / cols;
  const std::int64_t chunks = param_chunks(rows);
  const std::int64_t rows_per_chunk = (rows + chunks - 1) / chunks;
  // Scratch for the partial sums: [2, chunks, cols] (dweight's, then dbias's), in the compute type.
  const Tensor partials = empty({2, chunks, cols}, {dtype_of<C>::value, x.device()});
  C* partial_w = dweight.defined() ? partials.data<C>() : nullptr;
  C* partial_b = dbias.defined() ? partials.data<C>() + chunks * cols : nullptr;
  const dim3 grid(static_cast<unsigned>((cols + kColTile - 1) / kColTile), static_cast<unsigned>(chunks));
  launch_checked(op, layer_norm_param_partials_kernel<T>, grid, dim3(kColTile, kColRowThreads), 0, dy.data<T>(),
                 x.data<T>(), mean.data<C>(), rstd.data<C>(), partial_w, partial_b, rows, cols, rows_per_chunk);
  finish_params<C, W>(op, partial_w, partial_b, dweight, dbias, chunks, cols);
}

// Chunks of the one-pass backward: a function of the row count only (reproducible dweight/dbias),
// about 16 rows each and at most 512 of them. The kernel runs a block per chunk: 256 left an H200
// half empty and bound by memory latency at 16,384 rows (kernel_bench --profile); the finishing
// kernel reads every chunk's partials of a column, so many more would make it the slower part.
std::int64_t fused_chunks(std::int64_t rows) { return std::min<std::int64_t>((rows + 15) / 16, 512); }

// dx, dweight and dbias (whichever are defined) in one pass over dy and x
// (layer_norm_backward_kernel), then the chunks' partials added.
template <typename T, typename W>
void fused_backward(const Tensor& dy, const Tensor& x, const Tensor& weight, const Tensor& mean, const Tensor& rstd,
                    const Tensor& dx, const Tensor& dweight, const Tensor& dbias) {
  using C = compute_t<T>;
  const char* op = "layer_norm_backward";
  const std::int64_t cols = x.shape().back(), rows = x.numel() / cols;
  const std::int64_t chunks = fused_chunks(rows);
  const std::int64_t rows_per_chunk = (rows + chunks - 1) / chunks;
  const bool params = dweight.defined() || dbias.defined();
  const Tensor partials = params ? empty({2, chunks, cols}, {dtype_of<C>::value, x.device()}) : Tensor();
  C* partial_w = dweight.defined() ? partials.data<C>() : nullptr;
  C* partial_b = dbias.defined() ? partials.data<C>() + chunks * cols : nullptr;
  const std::int64_t per = ceil_div(cols, kFusedThreads);
  const unsigned warps = static_cast<unsigned>(std::min<std::int64_t>(ceil_div(cols, kWarp), kFusedWarps));
  auto* kernel = per <= 1   ? layer_norm_backward_kernel<T, W, 1>
                 : per <= 2 ? layer_norm_backward_kernel<T, W, 2>
                 : per <= 4 ? layer_norm_backward_kernel<T, W, 4>
                            : layer_norm_backward_kernel<T, W, kFusedMaxPerThread>;
  launch_checked(op, kernel, dim3(static_cast<unsigned>(chunks)), dim3(kWarp, warps), 0, dy.data<T>(), x.data<T>(),
                 optional_data<W>(weight), mean.data<C>(), rstd.data<C>(), optional_mutable_data<T>(dx), partial_w,
                 partial_b, rows, cols, rows_per_chunk);
  if (dweight.defined() || dbias.defined()) finish_params<C, W>(op, partial_w, partial_b, dweight, dbias, chunks, cols);
}

template <typename T>
void backward_typed(const Tensor& dy, const Tensor& x, const Tensor& weight, const Tensor& mean, const Tensor& rstd,
                    const Tensor& dx, const Tensor& dweight, const Tensor& dbias) {
  using C = compute_t<T>;
  const char* op = "layer_norm_backward";
  const std::int64_t cols = x.shape().back(), rows = x.numel() / cols;
  // The parameter gradients' dtype names W when there is no weight (a bias alone).
  const Tensor& param = weight.defined() ? weight : (dweight.defined() ? dweight : dbias);
  with_same_or_float32<T>(op, "parameters", param.defined() ? param.dtype() : x.dtype(), [&](auto w_tag) {
    using W = decltype(w_tag);
    if (cols <= kFusedThreads * kFusedMaxPerThread) {
      fused_backward<T, W>(dy, x, weight, mean, rstd, dx, dweight, dbias);
      return;
    }
    if (dx.defined()) {
      const RowLaunch l = row_launch<C>(rows, cols, 2 * cols);
      auto* kernel = l.block_per_row ? layer_norm_dx_kernel<T, W, true> : layer_norm_dx_kernel<T, W, false>;
      launch_checked(op, kernel, l.grid, l.block, l.smem, dy.data<T>(), x.data<T>(), optional_data<W>(weight),
                     mean.data<C>(), rstd.data<C>(), dx.data<T>(), rows, cols, l.cache);
    }
    if (dweight.defined() || dbias.defined()) param_grads<T, W>(dy, x, mean, rstd, dweight, dbias);
  });
}

}  // namespace

void layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& y, const Tensor& mean,
                const Tensor& rstd, double eps) {
  DEFINE_DISPATCH_FLOATING(x.dtype(), "layer_norm",
                           [&] { forward_typed<scalar_t>(x, weight, bias, y, mean, rstd, eps); });
}

void layer_norm_backward(const Tensor& dy, const Tensor& x, const Tensor& weight, const Tensor& mean,
                         const Tensor& rstd, const Tensor& dx, const Tensor& dweight, const Tensor& dbias) {
  DEFINE_DISPATCH_FLOATING(x.dtype(), "layer_norm_backward",
                           [&] { backward_typed<scalar_t>(dy, x, weight, mean, rstd, dx, dweight, dbias); });
}

}  // namespace define::kernels::DEFINE_CUDA_NS
