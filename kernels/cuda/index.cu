// CUDA index family: gather, index_select, scatter_add, index_add. Entry points and checks:
// kernels/index.cpp; reference: kernels/ref/index.cpp; tests: tests/ops/index_test.cpp (every
// case in mode emu) and tests/cuda/index_kernels_test.cpp.
//
// The reading ops (gather, index_select) are one elementwise kernel: x is viewed with stride 0
// along dim, so the TensorIterator walks out, index and x together and the kernel only adds
// index * x.stride(dim).
//
// Every kernel that reads an index checks it on the device (index_check.cuh): a bad one is
// reported to the host at its next synchronisation point and its access skipped, so the entry
// points need not copy indices to the host.
//
// The adding ops are deterministic without atomics; every output element receives its terms in
// index order, so float results are bit-identical to the CPU path (kernels/cpu/index.cpp) and do
// not depend on the schedule:
//   * scatter_add: one thread per index column (all coordinates but dim), walking the column in
//     order. Columns write disjoint output elements, so no two threads touch the same element.
//   * index_add, and scatter_add with a single index column: a stable LSD radix sort groups the
//     index positions by target row (embedding_backward shares this, see sum_rows_by_index), then
//     one thread per output element sums its row's group in position order.
#include <algorithm>
#include <cstdint>

#include "core/dtype.h"
#include "core/factory.h"
#include "kernels/copy.h"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/float16.cuh"
#include "kernels/cuda/gather_rows.cuh"
#include "kernels/cuda/index_check.cuh"
#include "kernels/cuda/sum_rows_by_index.cuh"

namespace define::kernels::DEFINE_CUDA_NS {
namespace {

constexpr unsigned kFullMask = 0xffffffffu;

// ---------------------------------------------------------------------------------------------
// Gather-style reads: out[o0] = x[o2 + index[o1] * x_dim_stride] over a 3-operand iteration.

// The iteration's offsets are 32-bit where they fit (kIndex32, common.cuh); the index term is
// always 64-bit, since x's dim can be longer than the iteration reaches.
template <bool kIndex32, typename T, typename I>
__global__ void gather_kernel(T* __restrict__ out, const I* __restrict__ index, const T* __restrict__ x,
                              std::int64_t x_dim_stride, std::int64_t n, OffsetCalc<3> calc, IndexCheck check) {
  using L = typename IndexWidth<kIndex32>::linear_t;
  const L count = static_cast<L>(n), step = static_cast<L>(gridDim.x) * blockDim.x;
  for (L i = static_cast<L>(blockIdx.x) * blockDim.x + threadIdx.x; i < count; i += step) {
    typename IndexWidth<kIndex32>::offset_t off[3];
    calc.get(i, off);
    const auto j = static_cast<std::int64_t>(index[off[1]]);
    out[off[0]] = check.in_range(j) ? x[off[2] + j * x_dim_stride] : T(0);
  }
}

// ---------------------------------------------------------------------------------------------
// scatter_add by columns: thread c owns index column c (fixed coordinates outside dim) and adds
// src along the column into out in index order. Offsets of the column's first element come from
// calc (operands out, index, src); the *_dim strides step along dim.

template <typename T, typename I>
__global__ void scatter_add_columns_kernel(T* out, const I* __restrict__ index, const T* __restrict__ src,
                                           std::int64_t columns, std::int64_t length, std::int64_t out_dim,
                                           std::int64_t index_dim, std::int64_t src_dim, OffsetCalc<3> calc,
                                           IndexCheck check) {
  const std::int64_t step = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t c = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; c < columns; c += step) {
    std::int64_t off[3];
    calc.get(c, off);
    for (std::int64_t j = 0; j < length; ++j) {
      const auto row = static_cast<std::int64_t>(index[off[1] + j * index_dim]);
      if (check.in_range(row)) {
        T& dst = out[off[0] + row * out_dim];
        dst = store_value<T>(load_value(dst) + load_value(src[off[2] + j * src_dim]));
      }
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Stable LSD radix sort of index positions by index value (4-bit digits). Each pass splits the
// keys into tiles of kTileItems; thread t of a tile owns kItemsPerThread consecutive items, so
// thread order is position order. A pass is three launches:
//   count_tile_digits:      per (digit, tile) item counts, stored digit-major;
//   exclusive_scan_kernel:  their exclusive prefix sums = where each (digit, tile) run starts;
//   scatter_tile_by_digit:  every item goes to run start + items of its digit before it in the
//                           tile (a block-wide exclusive scan of per-thread digit counts).
// Integer counts only, no atomics: the permutation is the same under any schedule.

constexpr int kSortThreads = 256;  // the block scans below assume exactly this block size
constexpr int kSortWarps = kSortThreads / 32;
constexpr int kItemsPerThread = 8;
constexpr std::int64_t kTileItems = static_cast<std::int64_t>(kSortThreads) * kItemsPerThread;
constexpr int kRadixBits = 4;
constexpr int kDigits = 1 << kRadixBits;

// Sixteen 16-bit digit counters packed in four words, so a block scan over all digits at once
// is four 64-bit scans. A tile holds at most kTileItems (2048) items, so no field overflows
// into its neighbour.
struct DigitCounts {
  unsigned long long w[4];
};
static_assert(kDigits == 16 && kTileItems < (1 << 16), "DigitCounts packs 16 digits in 16-bit fields");

__device__ __forceinline__ DigitCounts operator+(const DigitCounts& a, const DigitCounts& b) {
  DigitCounts r;
#pragma unroll
  for (int j = 0; j < 4; ++j) r.w[j] = a.w[j] + b.w[j];
  return r;
}

__device__ __forceinline__ DigitCounts operator-(const DigitCounts& a, const DigitCounts& b) {
  DigitCounts r;
#pragma unroll
  for (int j = 0; j < 4; ++j) r.w[j] = a.w[j] - b.w[j];
  return r;
}

// Selects the word by comparisons rather than w[digit >> 2]: a run-time index into a register
// array would put the array in local memory.
__device__ __forceinline__ unsigned count_of(const DigitCounts& c, unsigned digit) {
  const unsigned q = digit >> 2;
  const unsigned long long word = q == 0 ? c.w[0] : q == 1 ? c.w[1] : q == 2 ? c.w[2] : c.w[3];
  return static_cast<unsigned>(word >> (16 * (digit & 3))) & 0xffffu;
}

__device__ __forceinline__ void add_one(DigitCounts& c, unsigned digit) {
  const unsigned long long one = 1ull << (16 * (digit & 3));
  const unsigned q = digit >> 2;
#pragma unroll
  for (unsigned j = 0; j < 4; ++j) c.w[j] += q == j ? one : 0ull;
}

__device__ __forceinline__ DigitCounts shfl_up(const DigitCounts& c, unsigned delta) {
  DigitCounts r;
#pragma unroll
  for (int j = 0; j < 4; ++j) r.w[j] = __shfl_up_sync(kFullMask, c.w[j], delta);
  return r;
}

__device__ __forceinline__ std::int64_t shfl_up(std::int64_t v, unsigned delta) {
  return static_cast<std::int64_t>(__shfl_up_sync(kFullMask, static_cast<long long>(v), delta));
}

// Exclusive prefix sum of `value` over the threads of a kSortThreads block, in thread order;
// `total` receives the sum over the block. Every thread of the block must call it (barriers).
template <typename V>
__device__ V block_exclusive_scan(V value, V& total) {
  EMU_STATIC_SHARED(warp_sums, V[kSortWarps]);
  const unsigned lane = threadIdx.x & 31u, warp = threadIdx.x >> 5;
  V inclusive = value;
#pragma unroll
  for (unsigned delta = 1; delta < 32; delta <<= 1) {
    const V up = shfl_up(inclusive, delta);
    if (lane >= delta) inclusive = inclusive + up;
  }
  if (lane == 31) warp_sums[warp] = inclusive;
  __syncthreads();
  V before{};
  total = V{};
#pragma unroll
  for (unsigned w = 0; w < kSortWarps; ++w) {
    if (w < warp) before = before + warp_sums[w];
    total = total + warp_sums[w];
  }
  __syncthreads();  // warp_sums is rewritten by the next call
  return before + inclusive - value;
}

template <typename K>
__device__ __forceinline__ unsigned digit_of(K key, int shift) {
  return static_cast<unsigned>(static_cast<unsigned long long>(key) >> shift) & (kDigits - 1);
}

// Digit counts of a thread's items of one tile (the items inside [0, n)).
template <typename K>
__device__ __forceinline__ DigitCounts count_thread_items(const K* keys, std::int64_t first, std::int64_t n,
                                                          int shift) {
  DigitCounts mine{};
#pragma unroll
  for (int k = 0; k < kItemsPerThread; ++k)
    if (first + k < n) add_one(mine, digit_of(keys[first + k], shift));
  return mine;
}

// verify: the first pass, which also checks every key against check's bound. Keys outside it are
// sorted by their low digits like any other: the permutation stays in bounds, only the grouping
// is wrong, and the error is reported.
template <typename K>
__global__ void __launch_bounds__(kSortThreads)
    count_tile_digits_kernel(const K* __restrict__ keys, std::int64_t n, int shift, std::int64_t tiles,
                             std::int64_t* __restrict__ counts, bool verify, IndexCheck check) {
  EMU_CHECK_LAUNCH_BOUNDS(kSortThreads);
  // Block-uniform loop: every thread of the block runs the same tiles (the scan has barriers).
  for (std::int64_t tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
    const std::int64_t first = tile * kTileItems + threadIdx.x * kItemsPerThread;
    if (verify)
      for (int k = 0; k < kItemsPerThread && first + k < n; ++k) check.in_range(static_cast<std::int64_t>(keys[first + k]));
    const DigitCounts mine = count_thread_items(keys, first, n, shift);
    DigitCounts total;
    block_exclusive_scan(mine, total);
    if (threadIdx.x < kDigits) counts[threadIdx.x * tiles + tile] = count_of(total, threadIdx.x);
  }
}

// In-place exclusive prefix sum of data[0, m) by one block: each thread sums a contiguous chunk,
// the block scans the chunk sums, then each thread rewrites its chunk.
__global__ void __launch_bounds__(kSortThreads) exclusive_scan_kernel(std::int64_t* data, std::int64_t m) {
  EMU_CHECK_LAUNCH_BOUNDS(kSortThreads);
  const std::int64_t per_thread = (m + kSortThreads - 1) / kSortThreads;
  const std::int64_t first = threadIdx.x * per_thread, last = first + per_thread < m ? first + per_thread : m;
  std::int64_t sum = 0;
  for (std::int64_t i = first; i < last; ++i) sum += data[i];
  std::int64_t total;
  std::int64_t running = block_exclusive_scan(sum, total);
  for (std::int64_t i = first; i < last; ++i) {
    const std::int64_t v = data[i];
    data[i] = running;
    running += v;
  }
}

// order_in == nullptr: the input order is the identity (first pass).
template <typename K>
__global__ void __launch_bounds__(kSortThreads)
    scatter_tile_by_digit_kernel(const K* __restrict__ keys_in, const std::int64_t* __restrict__ order_in,
                                 std::int64_t n, int shift, std::int64_t tiles,
                                 const std::int64_t* __restrict__ run_starts, K* __restrict__ keys_out,
                                 std::int64_t* __restrict__ order_out) {
  EMU_CHECK_LAUNCH_BOUNDS(kSortThreads);
  EMU_STATIC_SHARED(tile_start, std::int64_t[kDigits]);
  for (std::int64_t tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
    if (threadIdx.x < kDigits) tile_start[threadIdx.x] = run_starts[threadIdx.x * tiles + tile];
    const std::int64_t first = tile * kTileItems + threadIdx.x * kItemsPerThread;
    const DigitCounts mine = count_thread_items(keys_in, first, n, shift);
    DigitCounts total;
    const DigitCounts before = block_exclusive_scan(mine, total);  // its barriers also publish tile_start
    // The keys are read again rather than kept from the count: keeping them in registers made
    // ptxas spill on sm_90, and the second read hits the cache.
    DigitCounts seen{};
#pragma unroll
    for (int k = 0; k < kItemsPerThread; ++k) {
      if (first + k < n) {
        const K key = keys_in[first + k];
        const unsigned d = digit_of(key, shift);
        const std::int64_t dest = tile_start[d] + count_of(before, d) + count_of(seen, d);
        add_one(seen, d);
        keys_out[dest] = key;
        order_out[dest] = order_in != nullptr ? order_in[first + k] : first + k;
      }
    }
    __syncthreads();  // tile_start is rewritten for the next tile
  }
}

// starts[v] = first position of key v in the sorted keys, for v in [0, rows]; group v is then
// [starts[v], starts[v + 1]).
template <typename K>
__global__ void group_starts_kernel(const K* __restrict__ sorted_keys, std::int64_t n, std::int64_t rows,
                                    std::int64_t* __restrict__ starts) {
  const std::int64_t step = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t v = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; v <= rows; v += step) {
    std::int64_t lo = 0, hi = n;
    while (lo < hi) {
      const std::int64_t mid = lo + (hi - lo) / 2;
      if (static_cast<std::int64_t>(sorted_keys[mid]) < v) lo = mid + 1;
      else hi = mid;
    }
    starts[v] = lo;
  }
}

// ---------------------------------------------------------------------------------------------
// Grouped row sums: out[o, v, i] = (accumulate ? out[o, v, i] : 0) + sum over the group of row v
// (positions j in increasing order) of src[o, j, i]; row skip_row keeps its start value. One
// thread per output element, consecutive threads along i (coalesced when inner is large). A thread
// walks its group kAhead positions a round: their order entries, then their rows, each set of loads
// issued together (unrolled in the emulator too, so that its profile sees them in flight), then the
// adds in position order. One load at a time left the kernel latency-bound (an embedding's groups
// hold a few rows each: two dependent loads a row).

struct RowLayout {
  std::int64_t outer = 1, rows = 1, inner = 1;
  std::int64_t out_stride[3] = {};  // [outer, row, inner] element strides
  std::int64_t src_stride[3] = {};
};

template <typename T>
__global__ void sum_grouped_rows_kernel(T* out, const T* __restrict__ src, const std::int64_t* __restrict__ order,
                                        const std::int64_t* __restrict__ starts, RowLayout layout,
                                        std::int64_t skip_row, bool accumulate) {
  const std::int64_t n = layout.outer * layout.rows * layout.inner;
  const std::int64_t step = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t e = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < n; e += step) {
    const std::int64_t i = e % layout.inner, r = e / layout.inner;
    const std::int64_t v = r % layout.rows, o = r / layout.rows;
    T* dst = out + o * layout.out_stride[0] + v * layout.out_stride[1] + i * layout.out_stride[2];
    // 16-bit rows add in float and round once.
    compute_t<T> acc = accumulate ? load_value(*dst) : compute_t<T>(0);
    if (v != skip_row) {
      constexpr int kAhead = 8;
      const T* column = src + o * layout.src_stride[0] + i * layout.src_stride[2];
      const std::int64_t end = starts[v + 1];
      for (std::int64_t q = starts[v]; q < end; q += kAhead) {
        std::int64_t at[kAhead];
        EMU_UNROLL
        for (int k = 0; k < kAhead; ++k) at[k] = q + k < end ? order[q + k] : 0;
        compute_t<T> x[kAhead];
        EMU_UNROLL
        for (int k = 0; k < kAhead; ++k) x[k] = q + k < end ? load_value(column[at[k] * layout.src_stride[1]]) : 0;
#pragma unroll
        for (int k = 0; k < kAhead; ++k)
          if (q + k < end) acc += x[k];
      }
    }
    *dst = store_value<T>(acc);
  }
}

// ---------------------------------------------------------------------------------------------
// Host helpers.

// Strides of the dims [begin, end) of t merged into one, or false when they cannot be walked with
// a single stride. Size-1 dims are ignored; an all-size-1 range gets stride 0.
bool merged_stride(const Tensor& t, int begin, int end, std::int64_t& stride) {
  stride = 0;
  bool seen_dim = false;
  std::int64_t expected = 0;  // the stride the next outer dim needs to continue the run
  for (int d = end - 1; d >= begin; --d) {
    const std::int64_t size = t.shape()[d], st = t.strides()[d];
    if (size == 1) continue;
    if (!seen_dim) stride = st;
    else if (st != expected) return false;
    seen_dim = true;
    expected = st * size;
  }
  return true;
}

std::int64_t product(const Shape& shape, int begin, int end) {
  std::int64_t p = 1;
  for (int d = begin; d < end; ++d) p *= shape[d];
  return p;
}

// t seen as [outer, size(dim), inner] with one stride each, or false when it cannot be.
bool as_three_dims(const Tensor& t, int dim, std::int64_t (&st)[3]) {
  const int nd = static_cast<int>(t.dim());
  st[1] = t.strides()[dim];
  return merged_stride(t, 0, dim, st[0]) && merged_stride(t, dim + 1, nd, st[2]);
}

// Positions 0..n-1 of a contiguous 1-d index grouped by value: order lists the positions sorted
// by index value, stably; group v is order[starts[v] .. starts[v + 1]).
struct IndexGroups {
  Tensor order, starts;
};

template <typename K>
IndexGroups group_by_index(const char* op, const Tensor& index, std::int64_t rows, const IndexCheck& check) {
  const std::int64_t n = index.numel();
  const Device dev = index.device();
  int bits = 0;
  while (bits < 63 && ((rows - 1) >> bits) != 0) ++bits;
  const int passes = std::max(1, (bits + kRadixBits - 1) / kRadixBits);
  const std::int64_t tiles = (n + kTileItems - 1) / kTileItems;
  const unsigned grid = static_cast<unsigned>(std::min<std::int64_t>(tiles, kMaxGridBlocks));

  Tensor keys[2] = {empty({n}, {index.dtype(), dev}), empty({n}, {index.dtype(), dev})};
  Tensor order[2] = {empty({n}, {DType::Int64, dev}), empty({n}, {DType::Int64, dev})};
  const Tensor runs = empty({kDigits * tiles}, {DType::Int64, dev});
  const K* keys_in = index.data<K>();
  const std::int64_t* order_in = nullptr;
  int out = 0;
  for (int pass = 0; pass < passes; ++pass, out ^= 1) {
    const int shift = pass * kRadixBits;
    launch_checked(op, count_tile_digits_kernel<K>, grid, kSortThreads, 0, keys_in, n, shift, tiles,
                   runs.data<std::int64_t>(), pass == 0, check);
    launch_checked(op, exclusive_scan_kernel, 1, kSortThreads, 0, runs.data<std::int64_t>(), kDigits * tiles);
    launch_checked(op, scatter_tile_by_digit_kernel<K>, grid, kSortThreads, 0, keys_in, order_in, n, shift, tiles,
                   static_cast<const std::int64_t*>(runs.data<std::int64_t>()), keys[out].data<K>(),
                   order[out].data<std::int64_t>());
    keys_in = keys[out].data<K>();
    order_in = order[out].data<std::int64_t>();
  }
  index_check_launched();
  IndexGroups g{order[out ^ 1], empty({rows + 1}, {DType::Int64, dev})};
  launch_checked(op, group_starts_kernel<K>, grid_for(rows + 1), kBlockSize, 0, keys_in, n, rows,
                 g.starts.data<std::int64_t>());
  return g;
}

}  // namespace

// Declared (and documented) in kernels/cuda/sum_rows_by_index.cuh.
void sum_rows_by_index(const char* op, const Tensor& index_in, const Tensor& src_in, const Tensor& out,
                       std::int64_t dim, std::int64_t skip_row, bool accumulate, const IndexCheck& check) {
  const int d = static_cast<int>(dim), nd = static_cast<int>(out.dim());
  if (out.numel() == 0) return;
  if (index_in.numel() == 0 || src_in.numel() == 0) {
    if (!accumulate) kernels::fill(out, 0.0);
    return;
  }
  RowLayout layout;
  layout.outer = product(out.shape(), 0, d);
  layout.rows = out.shape()[d];
  layout.inner = product(out.shape(), d + 1, nd);
  if (!as_three_dims(out, d, layout.out_stride))
    fail(op, "internal: output {} with strides {} is not [outer, rows, inner]", shape_str(out.shape()),
         shape_str(out.strides()));
  Tensor src = src_in;
  if (!as_three_dims(src, d, layout.src_stride)) {
    src = kernels::contiguous(src_in);
    as_three_dims(src, d, layout.src_stride);
  }
  const Tensor index = kernels::contiguous(index_in);
  DEFINE_DISPATCH_INDEX(index.dtype(), op, [&] {
    const IndexGroups groups = group_by_index<scalar_t>(op, index, layout.rows, check);
    DEFINE_DISPATCH_ALL(out.dtype(), op, [&] {
      launch_checked(op, sum_grouped_rows_kernel<scalar_t>, grid_for(out.numel()), kBlockSize, 0,
                     out.data<scalar_t>(), src.data<scalar_t>(), groups.order.data<std::int64_t>(),
                     groups.starts.data<std::int64_t>(), layout, skip_row, accumulate);
    });
  });
}

void gather(const Tensor& x, const Tensor& index, const Tensor& out, std::int64_t dim) {
  // x seen with index's shape and stride 0 along dim: the kernel adds index * x.stride(dim).
  Strides x_strides = x.strides();
  const std::int64_t x_dim_stride = x_strides[dim];
  x_strides[dim] = 0;
  const TensorIterator it("gather", {out, index, x.as_strided(index.shape(), x_strides, x.offset())});
  const auto calc = make_offset_calc<3>("gather", it);
  const IndexCheck check = index_check("gather", IndexErrorKind::Dim, x.shape()[dim], static_cast<std::int32_t>(dim));
  DEFINE_DISPATCH_ALL(x.dtype(), "gather", [&] {
    using T = scalar_t;
    DEFINE_DISPATCH_INDEX(index.dtype(), "gather", [&] {
      using I = scalar_t;
      dispatch_index_width(it, [&]<bool kIndex32>() {
        launch_checked("gather", gather_kernel<kIndex32, T, I>, grid_for(it.numel()), kBlockSize, 0, out.data<T>(),
                       index.data<I>(), x.data<T>(), x_dim_stride, it.numel(), calc, check);
      });
    });
  });
  index_check_launched();
}

void index_select(const Tensor& x, const Tensor& index, const Tensor& out, std::int64_t dim) {
  // The gather kernel with the 1-d index broadcast over out's shape (stride only along dim).
  Strides x_strides = x.strides();
  const std::int64_t x_dim_stride = x_strides[dim];
  x_strides[dim] = 0;
  Strides index_strides(out.shape().size(), 0);
  index_strides[dim] = index.strides()[0];
  const TensorIterator it("index_select", {out, index.as_strided(out.shape(), index_strides, index.offset()),
                                           x.as_strided(out.shape(), x_strides, x.offset())});
  const auto calc = make_offset_calc<3>("index_select", it);
  const IndexCheck check =
      index_check("index_select", IndexErrorKind::Dim, x.shape()[dim], static_cast<std::int32_t>(dim));
  // Whole rows (dim 0 of contiguous x and out) in 16-byte pieces where they fit (gather_rows.cuh).
  const std::int64_t rows = out.shape().empty() ? 0 : out.shape()[0];
  const bool by_rows = dim == 0 && rows > 0 && x.is_contiguous() && out.is_contiguous();
  DEFINE_DISPATCH_ALL(x.dtype(), "index_select", [&] {
    using T = scalar_t;
    DEFINE_DISPATCH_INDEX(index.dtype(), "index_select", [&] {
      using I = scalar_t;
      if (by_rows && gather_rows_fits<T>(x.data<T>(), out.data<T>(), out.numel() / rows)) {
        gather_rows("index_select", out.data<T>(), x.data<T>(), index.data<I>(), index.strides()[0], rows,
                    out.numel() / rows, check);
        return;
      }
      dispatch_index_width(it, [&]<bool kIndex32>() {
        launch_checked("index_select", gather_kernel<kIndex32, T, I>, grid_for(it.numel()), kBlockSize, 0,
                       out.data<T>(), index.data<I>(), x.data<T>(), x_dim_stride, it.numel(), calc, check);
      });
    });
  });
  index_check_launched();
}

void scatter_add(const Tensor& index, const Tensor& src, const Tensor& out, std::int64_t dim) {
  const char* op = "scatter_add";
  const std::int64_t length = index.shape()[dim], columns = index.numel() / length;
  const IndexCheck check = index_check(op, IndexErrorKind::Dim, out.shape()[dim], static_cast<std::int32_t>(dim));
  if (columns == 1) {
    // One column (e.g. 1-d tensors): a single thread would add it serially; group by row instead.
    sum_rows_by_index(op, index.as_strided({length}, {index.strides()[dim]}, index.offset()),
                      src.as_strided({length}, {src.strides()[dim]}, src.offset()),
                      out.as_strided({out.shape()[dim]}, {out.strides()[dim]}, out.offset()), 0, -1, true, check);
    return;
  }
  // The first element of every column: all three tensors seen with index's shape, 1 along dim.
  Shape column_shape = index.shape();
  column_shape[dim] = 1;
  const TensorIterator it(op, {out.as_strided(column_shape, out.strides(), out.offset()),
                               index.as_strided(column_shape, index.strides(), index.offset()),
                               src.as_strided(column_shape, src.strides(), src.offset())});
  const auto calc = make_offset_calc<3>(op, it);
  DEFINE_DISPATCH_ALL(out.dtype(), op, [&] {
    using T = scalar_t;
    DEFINE_DISPATCH_INDEX(index.dtype(), op, [&] {
      launch_checked(op, scatter_add_columns_kernel<T, scalar_t>, grid_for(columns), kBlockSize, 0, out.data<T>(),
                     index.data<scalar_t>(), src.data<T>(), columns, length, out.strides()[dim],
                     index.strides()[dim], src.strides()[dim], calc, check);
    });
  });
  index_check_launched();
}

void index_add(const Tensor& index, const Tensor& src, const Tensor& out, std::int64_t dim) {
  const char* op = "index_add";
  sum_rows_by_index(op, index, src, out, dim, -1, true,
                    index_check(op, IndexErrorKind::Dim, out.shape()[dim], static_cast<std::int32_t>(dim)));
}

}  // namespace define::kernels::DEFINE_CUDA_NS
