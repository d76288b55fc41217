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
// dweight/dbias are column sums over rows, done without atomics: rows are cut into chunks whose
// number depends only on the shape, one kernel writes a partial sum per (chunk, column) into a
// scratch tensor, and a second adds the partials of each column in chunk order. The result is
// therefore bit-identical for any schedule of the blocks and threads.
#include <cmath>
#include <cstdint>

#include "core/dtype.h"
#include "core/factory.h"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/float_sum.cuh"

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
template <typename T, bool kBlockPerRow>
__global__ void __launch_bounds__(kMaxRowThreads)
    layer_norm_forward_kernel(const T* __restrict__ x, const T* __restrict__ weight, const T* __restrict__ bias,
                              T* __restrict__ y, T* __restrict__ mean, T* __restrict__ rstd, std::int64_t rows,
                              std::int64_t cols, T eps, bool cache) {
  EMU_CHECK_LAUNCH_BOUNDS(kMaxRowThreads);
  EMU_DYNAMIC_SHARED(T, smem);
  const RowThreads<kBlockPerRow> t;
  T* row_cache = cache ? smem + t.slot * cols : nullptr;
  for (std::int64_t row = t.first_row; row < rows; row += t.row_step) {  // uniform over the row's threads
    const T* xr = x + row * cols;
    SumAcc<T> sum[1] = {SumAcc<T>::zero()};
    for (std::int64_t j = t.index; j < cols; j += t.count) {
      const T v = xr[j];
      if (row_cache) row_cache[j] = v;
      sum[0].add(v);
    }
    row_all_sum<kBlockPerRow>(sum);
    const T mu = sum[0].value() / static_cast<T>(cols);

    const T* src = row_cache ? row_cache : xr;  // only this thread's own elements are re-read
    SumAcc<T> sq[1] = {SumAcc<T>::zero()};
    for (std::int64_t j = t.index; j < cols; j += t.count) {
      const T c = src[j] - mu;
      sq[0].add(c * c);
    }
    row_all_sum<kBlockPerRow>(sq);
    const T rs = T(1) / square_root(sq[0].value() / static_cast<T>(cols) + eps);

    // (x - mean) first: x * rstd - mean * rstd would cancel when |mean| >> std.
    T* yr = y + row * cols;
    for (std::int64_t j = t.index; j < cols; j += t.count) {
      T v = (src[j] - mu) * rs;
      if (weight) v *= weight[j];
      if (bias) v += bias[j];
      yr[j] = v;
    }
    if (t.index == 0) {
      mean[row] = mu;
      rstd[row] = rs;
    }
  }
}

// dx of one row per warp or block: dx = rstd * (g - mean(g) - xhat * mean(g * xhat)) with
// g = dy * w and xhat = (x - mean) * rstd. With `cache`, the first pass keeps xhat and g in
// shared memory (2 * cols elements per row slot) for the second.
template <typename T, bool kBlockPerRow>
__global__ void __launch_bounds__(kMaxRowThreads)
    layer_norm_dx_kernel(const T* __restrict__ dy, const T* __restrict__ x, const T* __restrict__ weight,
                         const T* __restrict__ mean, const T* __restrict__ rstd, T* __restrict__ dx, std::int64_t rows,
                         std::int64_t cols, bool cache) {
  EMU_CHECK_LAUNCH_BOUNDS(kMaxRowThreads);
  EMU_DYNAMIC_SHARED(T, smem);
  const RowThreads<kBlockPerRow> t;
  T* xhat_cache = cache ? smem + 2 * t.slot * cols : nullptr;
  T* g_cache = cache ? xhat_cache + cols : nullptr;
  for (std::int64_t row = t.first_row; row < rows; row += t.row_step) {  // uniform over the row's threads
    const T* xr = x + row * cols;
    const T* dyr = dy + row * cols;
    const T mu = mean[row], rs = rstd[row];
    SumAcc<T> sums[2] = {SumAcc<T>::zero(), SumAcc<T>::zero()};  // sum of g, sum of g * xhat
    for (std::int64_t j = t.index; j < cols; j += t.count) {
      const T xhat = (xr[j] - mu) * rs;
      const T g = weight ? dyr[j] * weight[j] : dyr[j];
      if (cache) {
        xhat_cache[j] = xhat;
        g_cache[j] = g;
      }
      sums[0].add(g);
      sums[1].add(g * xhat);
    }
    row_all_sum<kBlockPerRow>(sums);
    const T mean_g = sums[0].value() / static_cast<T>(cols), mean_gx = sums[1].value() / static_cast<T>(cols);

    T* dxr = dx + row * cols;
    for (std::int64_t j = t.index; j < cols; j += t.count) {
      const T xhat = cache ? xhat_cache[j] : (xr[j] - mu) * rs;
      const T g = cache ? g_cache[j] : (weight ? dyr[j] * weight[j] : dyr[j]);
      dxr[j] = rs * (g - mean_g - xhat * mean_gx);
    }
  }
}

// Partial column sums of dy * xhat (dweight) and dy (dbias) over the rows of chunk blockIdx.y, for
// columns blockIdx.x * kColTile + threadIdx.x. Block (kColTile, kColRowThreads): the threads of a
// column take every kColRowThreads-th row of the chunk, then thread y = 0 adds their sums in y
// order. Writes partial_w/partial_b[chunk * cols + col] (either may be null: not needed).
template <typename T>
__global__ void layer_norm_param_partials_kernel(const T* __restrict__ dy, const T* __restrict__ x,
                                                 const T* __restrict__ mean, const T* __restrict__ rstd,
                                                 T* __restrict__ partial_w, T* __restrict__ partial_b,
                                                 std::int64_t rows, std::int64_t cols, std::int64_t rows_per_chunk) {
  EMU_STATIC_SHARED(tile_w, SumAcc<T>[kColRowThreads][kColTile]);
  EMU_STATIC_SHARED(tile_b, SumAcc<T>[kColRowThreads][kColTile]);
  const std::int64_t col = static_cast<std::int64_t>(blockIdx.x) * kColTile + threadIdx.x;
  const std::int64_t chunk = blockIdx.y;
  const std::int64_t row_begin = chunk * rows_per_chunk;
  const std::int64_t row_end = row_begin + rows_per_chunk < rows ? row_begin + rows_per_chunk : rows;
  SumAcc<T> sw = SumAcc<T>::zero(), sb = SumAcc<T>::zero();
  if (col < cols) {
    for (std::int64_t r = row_begin + threadIdx.y; r < row_end; r += kColRowThreads) {
      const T g = dy[r * cols + col];
      if (partial_w) sw.add(g * ((x[r * cols + col] - mean[r]) * rstd[r]));
      sb.add(g);
    }
  }
  tile_w[threadIdx.y][threadIdx.x] = sw;
  tile_b[threadIdx.y][threadIdx.x] = sb;
  __syncthreads();
  if (threadIdx.y == 0 && col < cols) {
    SumAcc<T> tw = SumAcc<T>::zero(), tb = SumAcc<T>::zero();
#pragma unroll
    for (int k = 0; k < kColRowThreads; ++k) {  // fixed order
      tw = tw.merged(tile_w[k][threadIdx.x]);
      tb = tb.merged(tile_b[k][threadIdx.x]);
    }
    if (partial_w) partial_w[chunk * cols + col] = tw.value();
    if (partial_b) partial_b[chunk * cols + col] = tb.value();
  }
}

// dweight/dbias[col] = the column's chunk partials added in chunk order (either output may be null).
template <typename T>
__global__ void layer_norm_param_finish_kernel(const T* __restrict__ partial_w, const T* __restrict__ partial_b,
                                               T* __restrict__ dweight, T* __restrict__ dbias, std::int64_t chunks,
                                               std::int64_t cols) {
  const std::int64_t step = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t col = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; col < cols;
       col += step) {
    if (dweight) {
      SumAcc<T> s = SumAcc<T>::zero();
      for (std::int64_t ch = 0; ch < chunks; ++ch) s.add(partial_w[ch * cols + col]);
      dweight[col] = s.value();
    }
    if (dbias) {
      SumAcc<T> s = SumAcc<T>::zero();
      for (std::int64_t ch = 0; ch < chunks; ++ch) s.add(partial_b[ch * cols + col]);
      dbias[col] = s.value();
    }
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

template <typename T>
void forward_typed(const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& y, const Tensor& mean,
                   const Tensor& rstd, double eps) {
  const char* op = "layer_norm";
  const std::int64_t cols = x.shape().back(), rows = x.numel() / cols;
  const RowLaunch l = row_launch<T>(rows, cols, cols);
  auto* kernel = l.block_per_row ? layer_norm_forward_kernel<T, true> : layer_norm_forward_kernel<T, false>;
  launch_checked(op, kernel, l.grid, l.block, l.smem, x.data<T>(), optional_data<T>(weight), optional_data<T>(bias),
                 y.data<T>(), mean.data<T>(), rstd.data<T>(), rows, cols, static_cast<T>(eps), l.cache);
}

// Rows per chunk of the parameter-gradient sums: a function of the row count only, which is what
// makes dweight/dbias reproducible.
std::int64_t param_chunks(std::int64_t rows) {
  const std::int64_t chunks = (rows + kMinRowsPerChunk - 1) / kMinRowsPerChunk;
  return chunks < kMaxChunks ? chunks : kMaxChunks;
}

template <typename T>
void param_grads(const Tensor& dy, const Tensor& x, const Tensor& mean, const Tensor& rstd, const Tensor& dweight,
                 const Tensor& dbias) {
  const char* op = "layer_norm_backward";
  const std::int64_t cols = x.shape().back(), rows = x.numel() / cols;
  const std::int64_t chunks = param_chunks(rows);
  const std::int64_t rows_per_chunk = (rows + chunks - 1) / chunks;
  // Scratch for the partial sums: [2, chunks, cols] (dweight's, then dbias's).
  const Tensor partials = empty({2, chunks, cols}, {x.dtype(), x.device()});
  T* partial_w = dweight.defined() ? partials.data<T>() : nullptr;
  T* partial_b = dbias.defined() ? partials.data<T>() + chunks * cols : nullptr;
  const dim3 grid(static_cast<unsigned>((cols + kColTile - 1) / kColTile), static_cast<unsigned>(chunks));
  launch_checked(op, layer_norm_param_partials_kernel<T>, grid, dim3(kColTile, kColRowThreads), 0, dy.data<T>(),
                 x.data<T>(), mean.data<T>(), rstd.data<T>(), partial_w, partial_b, rows, cols, rows_per_chunk);
  launch_checked(op, layer_norm_param_finish_kernel<T>, grid_for(cols), kBlockSize, 0,
                 partial_w, partial_b, optional_mutable_data<T>(dweight), optional_mutable_data<T>(dbias), chunks, cols);
}

template <typename T>
void backward_typed(const Tensor& dy, const Tensor& x, const Tensor& weight, const Tensor& mean, const Tensor& rstd,
                    const Tensor& dx, const Tensor& dweight, const Tensor& dbias) {
  const std::int64_t cols = x.shape().back(), rows = x.numel() / cols;
  if (dx.defined()) {
    const RowLaunch l = row_launch<T>(rows, cols, 2 * cols);
    auto* kernel = l.block_per_row ? layer_norm_dx_kernel<T, true> : layer_norm_dx_kernel<T, false>;
    launch_checked("layer_norm_backward", kernel, l.grid, l.block, l.smem, dy.data<T>(), x.data<T>(),
                   optional_data<T>(weight), mean.data<T>(), rstd.data<T>(), dx.data<T>(), rows, cols, l.cache);
  }
  if (dweight.defined() || dbias.defined()) param_grads<T>(dy, x, mean, rstd, dweight, dbias);
}

}  // namespace

void layer_norm(const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& y, const Tensor& mean,
                const Tensor& rstd, double eps) {
  DEFINE_DISPATCH_FLOAT(x.dtype(), "layer_norm", [&] { forward_typed<scalar_t>(x, weight, bias, y, mean, rstd, eps); });
}

void layer_norm_backward(const Tensor& dy, const Tensor& x, const Tensor& weight, const Tensor& mean,
                         const Tensor& rstd, const Tensor& dx, const Tensor& dweight, const Tensor& dbias) {
  DEFINE_DISPATCH_FLOAT(x.dtype(), "layer_norm_backward",
                        [&] { backward_typed<scalar_t>(dy, x, weight, mean, rstd, dx, dweight, dbias); });
}

}  // namespace define::kernels::DEFINE_CUDA_NS
