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
#include "kernels/cuda/load_ahead.cuh"
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
// Stable LSD radix sort of index positions by index value, 8-bit digits (a vocabulary of 10,000 rows
// sorts in two passes, one of 267,735 in three). Each pass splits the keys into tiles of
// kTileItems and takes two launches, three when there are many tiles:
//   count_tile_digits:     each tile's histogram of digits (shared-memory integer atomics, whose
//                          sum does not depend on their order), stored digit-major: counts[d][tile];
//   exclusive_scan_kernel: (many tiles only) their exclusive prefix sums in place = where each
//                          (digit, tile) run of the output starts;
//   scatter_tile_by_digit: with few tiles, each block first sums the counts itself (thread d: its
//                          digit's counts of the earlier tiles; a block scan over the digits' totals),
//                          which costs a launch less than the scan kernel. Then it sorts its tile by
//                          digit, stably, in shared memory (two splits by 4 bits, each a block-wide
//                          scan of per-thread counts) and writes it out in sorted order: item s of
//                          digit d goes to its run's start + s - the tile's first item of digit d, so
//                          consecutive threads write consecutive places of a run.
// Integer counts only: the permutation is the same under any schedule.

constexpr int kSortThreads = 256;  // the block scans below assume exactly this block size
constexpr int kSortWarps = kSortThreads / 32;
constexpr int kItemsPerThread = 8;
constexpr int kTileItems = kSortThreads * kItemsPerThread;
constexpr int kRadixBits = 8;
constexpr int kDigits = 1 << kRadixBits;
constexpr int kSplitBits = 4;  // a tile is sorted by a digit in two splits of this many bits
// With at most this many tiles the scatter kernel sums the counts itself: each block reads all
// kDigits x tiles of them (64 tiles, 128 KB a block from L2), which beats a launch up to about here.
constexpr std::int64_t kFoldedScanTiles = 64;
static_assert(kSortThreads == kDigits, "one thread per digit in the histogram and the run starts");
static_assert(kRadixBits == 2 * kSplitBits, "a digit is sorted in two splits");

// Sixteen 16-bit counters, one per value of a 4-bit split, packed in four words, so a block scan
// over all of them at once is four 64-bit scans. A tile holds at most kTileItems (2048) items, so
// no field, and no sum of fields, overflows into its neighbour.
struct DigitCounts {
  unsigned long long w[4];
};
static_assert((1 << kSplitBits) == 16 && kTileItems < (1 << 16), "DigitCounts packs 16 values in 16-bit fields");

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

// Selects the word by comparisons rather than w[value >> 2]: a run-time index into a register
// array would put the array in local memory.
__device__ __forceinline__ unsigned count_of(const DigitCounts& c, unsigned value) {
  const unsigned q = value >> 2;
  const unsigned long long word = q == 0 ? c.w[0] : q == 1 ? c.w[1] : q == 2 ? c.w[2] : c.w[3];
  return static_cast<unsigned>(word >> (16 * (value & 3))) & 0xffffu;
}

__device__ __forceinline__ void add_one(DigitCounts& c, unsigned value) {
  const unsigned long long one = 1ull << (16 * (value & 3));
  const unsigned q = value >> 2;
#pragma unroll
  for (unsigned j = 0; j < 4; ++j) c.w[j] += q == j ? one : 0ull;
}

// Field v of the result = the sum of fields 0..v-1 of c. Within a word, multiplying by
// 1 + 2^16 + 2^32 + 2^48 shifted up one field adds every lower field into each; the words below
// add their whole sum (the top field of the word times that multiplier) to every field.
__device__ __forceinline__ DigitCounts exclusive_over_values(const DigitCounts& c) {
  constexpr unsigned long long kEveryField = 0x0001000100010001ull;
  DigitCounts r;
  unsigned long long below = 0;
#pragma unroll
  for (int j = 0; j < 4; ++j) {
    r.w[j] = (c.w[j] << 16) * kEveryField + below * kEveryField;
    below += (c.w[j] * kEveryField) >> 48;
  }
  return r;
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
__device__ __forceinline__ V block_exclusive_scan(V value, V& total) {
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

// verify: the first pass, which also checks every key against check's bound. Keys outside it are
// sorted by their low digits like any other: the permutation stays in bounds, only the grouping
// is wrong, and the error is reported.
template <typename K>
__global__ void __launch_bounds__(kSortThreads)
    count_tile_digits_kernel(const K* __restrict__ keys, std::int64_t n, int shift, std::int64_t tiles,
                             std::int64_t* __restrict__ counts, bool verify, IndexCheck check) {
  EMU_CHECK_LAUNCH_BOUNDS(kSortThreads);
  EMU_STATIC_SHARED(histogram, unsigned[kDigits]);
  // Block-uniform loop: every thread of the block runs the same tiles (barriers).
  for (std::int64_t tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
    histogram[threadIdx.x] = 0;
    __syncthreads();
    const std::int64_t first = tile * kTileItems + threadIdx.x;
    K key[kItemsPerThread];
    EMU_UNROLL
    for (int k = 0; k < kItemsPerThread; ++k)
      key[k] = first + k * kSortThreads < n ? keys[first + k * kSortThreads] : K{};
#pragma unroll
    for (int k = 0; k < kItemsPerThread; ++k)
      if (first + k * kSortThreads < n) atomicAdd(&histogram[digit_of(key[k], shift)], 1u);
    if (verify) {  // a loop of its own, not unrolled: one copy of the check's reporting code
#pragma unroll 1
      for (int k = 0; k < kItemsPerThread && first + k * kSortThreads < n; ++k)
        check.in_range(static_cast<std::int64_t>(keys[first + k * kSortThreads]));
    }
    __syncthreads();
    counts[threadIdx.x * tiles + tile] = histogram[threadIdx.x];
    __syncthreads();  // the histogram is cleared for the next tile
  }
}

// In-place exclusive prefix sum of data[0, m) by one block, kTileItems values a round: each thread
// loads its kItemsPerThread consecutive values of the round together, the block scans the
// threads' sums, and the round's total carries into the next.
__global__ void __launch_bounds__(kSortThreads) exclusive_scan_kernel(std::int64_t* data, std::int64_t m) {
  EMU_CHECK_LAUNCH_BOUNDS(kSortThreads);
  std::int64_t carry = 0;
  for (std::int64_t round = 0; round < m; round += kTileItems) {
    const std::int64_t first = round + threadIdx.x * kItemsPerThread;
    std::int64_t v[kItemsPerThread];
    EMU_UNROLL
    for (int k = 0; k < kItemsPerThread; ++k) v[k] = first + k < m ? data[first + k] : 0;
    std::int64_t sum = 0;
#pragma unroll
    for (int k = 0; k < kItemsPerThread; ++k) sum += v[k];
    std::int64_t total;
    std::int64_t running = carry + block_exclusive_scan(sum, total);
#pragma unroll
    for (int k = 0; k < kItemsPerThread; ++k) {
      if (first + k < m) data[first + k] = running;
      running += v[k];
    }
    carry += total;
  }
}

// Where thread d's digit's run of this tile starts in the output, from the digit-major counts
// (kFoldedScanTiles tiles at most): the items of all smaller digits plus those of its own digit
// in the earlier tiles. Every thread of the block must call it (barriers).
__device__ __forceinline__ std::int64_t run_start_from_counts(const std::int64_t* __restrict__ counts,
                                                              std::int64_t tiles, std::int64_t tile) {
  const std::int64_t* mine = counts + threadIdx.x * tiles;
  std::int64_t earlier = 0, all = 0;
  for (std::int64_t t = 0; t < tiles; t += kItemsPerThread) {
    std::int64_t c[kItemsPerThread];
    EMU_UNROLL
    for (int k = 0; k < kItemsPerThread; ++k) c[k] = t + k < tiles ? mine[t + k] : 0;
#pragma unroll
    for (int k = 0; k < kItemsPerThread; ++k) {
      all += c[k];
      if (t + k < tile) earlier += c[k];
    }
  }
  std::int64_t total;
  return block_exclusive_scan(all, total) + earlier;
}

// One stable split of a tile's `items` items by bits [bit, bit + kSplitBits) of their digit: thread
// t takes places [8t, 8t + 8) of `from` (tile item numbers; the identity order when null), and each
// item goes to place (items of smaller value) + (items of its value before it) of `to`.
__device__ __forceinline__ void split_tile(const unsigned char* digits, const std::uint16_t* from, std::uint16_t* to,
                                           int items, int bit) {
  constexpr unsigned kMask = (1u << kSplitBits) - 1;
  const int place = static_cast<int>(threadIdx.x) * kItemsPerThread;
  std::uint16_t item[kItemsPerThread];
  unsigned value[kItemsPerThread] = {};  // the items' bits [bit, bit + kSplitBits)
  if (from != nullptr) {
    // One 16-byte read of the thread's eight places (past `items` they hold stale numbers, unused).
    const uint4 eight = *reinterpret_cast<const uint4*>(from + place);
    const unsigned words[4] = {eight.x, eight.y, eight.z, eight.w};
#pragma unroll
    for (int k = 0; k < kItemsPerThread; ++k) {
      item[k] = static_cast<std::uint16_t>(words[k / 2] >> (16 * (k % 2)));
      if (place + k < items) value[k] = (digits[item[k]] >> bit) & kMask;
    }
  } else {
    // The identity order: the thread's eight digits in one 8-byte read.
    const uint2 eight = *reinterpret_cast<const uint2*>(digits + place);
#pragma unroll
    for (int k = 0; k < kItemsPerThread; ++k) {
      item[k] = static_cast<std::uint16_t>(place + k);
      value[k] = (((k < 4 ? eight.x : eight.y) >> (8 * (k % 4))) >> bit) & kMask;
    }
  }
  DigitCounts mine{};
#pragma unroll
  for (int k = 0; k < kItemsPerThread; ++k)
    if (place + k < items) add_one(mine, value[k]);
  DigitCounts total;
  DigitCounts before = block_exclusive_scan(mine, total);
  before = before + exclusive_over_values(total);
  DigitCounts seen{};
#pragma unroll
  for (int k = 0; k < kItemsPerThread; ++k) {
    if (place + k < items) {
      to[count_of(before, value[k]) + count_of(seen, value[k])] = item[k];
      add_one(seen, value[k]);
    }
  }
  __syncthreads();  // `to` is read next
}

// run_starts == nullptr: the block sums `counts` itself (kFoldedScanTiles tiles at most); else
// run_starts holds the scanned counts. order_in == nullptr: the input order is the identity (first
// pass).
template <typename K>
__global__ void __launch_bounds__(kSortThreads)
    scatter_tile_by_digit_kernel(const K* __restrict__ keys_in, const std::int64_t* __restrict__ order_in,
                                 std::int64_t n, int shift, std::int64_t tiles, const std::int64_t* __restrict__ counts,
                                 const std::int64_t* __restrict__ run_starts, K* __restrict__ keys_out,
                                 std::int64_t* __restrict__ order_out) {
  EMU_CHECK_LAUNCH_BOUNDS(kSortThreads);
  EMU_STATIC_SHARED_ALIGN16(digits, unsigned char[kTileItems]);  // digit of tile item l
  EMU_STATIC_SHARED_ALIGN16(by_low, std::uint16_t[kTileItems]);  // tile items sorted by the digit's low half
  EMU_STATIC_SHARED_ALIGN16(sorted, std::uint16_t[kTileItems]);  // ... then stably by its high half
  EMU_STATIC_SHARED(run_start, std::int64_t[kDigits]);           // where the tile's run of each digit goes
  EMU_STATIC_SHARED(first_of, int[kDigits]);                     // the tile's first sorted place of each digit
  for (std::int64_t tile = blockIdx.x; tile < tiles; tile += gridDim.x) {
    const std::int64_t first = tile * kTileItems;
    const int items = static_cast<int>(n - first < kTileItems ? n - first : kTileItems);
    run_start[threadIdx.x] =
        run_starts != nullptr ? run_starts[threadIdx.x * tiles + tile] : run_start_from_counts(counts, tiles, tile);
    K key[kItemsPerThread];
    EMU_UNROLL
    for (int k = 0; k < kItemsPerThread; ++k) {
      const int l = k * kSortThreads + static_cast<int>(threadIdx.x);
      key[k] = l < items ? keys_in[first + l] : K{};
    }
#pragma unroll
    for (int k = 0; k < kItemsPerThread; ++k) {
      const int l = k * kSortThreads + static_cast<int>(threadIdx.x);
      if (l < items) digits[l] = static_cast<unsigned char>(digit_of(key[k], shift));
    }
    __syncthreads();
    split_tile(digits, nullptr, by_low, items, 0);
    split_tile(digits, by_low, sorted, items, kSplitBits);
    for (int s = static_cast<int>(threadIdx.x); s < items; s += kSortThreads) {
      const unsigned d = digits[sorted[s]];
      if (s == 0 || digits[sorted[s - 1]] != d) first_of[d] = s;
    }
    __syncthreads();
    // Eight places a thread, four at a time: their key and order loads issued together, then the
    // writes (all eight at once made ptxas spill on sm_80).
    constexpr int kRound = 4;
#pragma unroll
    for (int k0 = 0; k0 < kItemsPerThread; k0 += kRound) {
      int l[kRound];
      std::int64_t order[kRound];
      EMU_UNROLL
      for (int k = 0; k < kRound; ++k) {
        const int s = static_cast<int>(threadIdx.x) + (k0 + k) * kSortThreads;
        l[k] = s < items ? sorted[s] : 0;
        key[k] = s < items ? keys_in[first + l[k]] : K{};
        order[k] = s < items && order_in != nullptr ? order_in[first + l[k]] : first + l[k];
      }
#pragma unroll
      for (int k = 0; k < kRound; ++k) {
        const int s = static_cast<int>(threadIdx.x) + (k0 + k) * kSortThreads;
        if (s < items) {
          const unsigned d = digits[l[k]];
          const std::int64_t dest = run_start[d] + (s - first_of[d]);
          keys_out[dest] = key[k];
          order_out[dest] = order[k];
        }
      }
    }
    __syncthreads();  // the shared arrays are rewritten for the next tile
  }
}

// starts[v] = first position of key v in the n sorted keys, for v in [0, rows]; group v is then
// [starts[v], starts[v + 1]). Each position marks the values its key's group starts: those in
// (key[j - 1], key[j]] start at j, those up to key[0] at 0 and those past key[n - 1] at n, so a
// thread loads two neighbouring keys once, where a binary search per value was log2(n) dependent
// loads (latency-bound: 16 rounds for 65,536 positions). The two end runs are spread over the whole
// grid, since they hold most of the values when the keys are few; an inner run longer than
// kOwnRun values (keys far apart) is written by its whole warp, 32 values a store. A key outside
// [0, rows), which the sort's check reports, counts as rows: the runs still cover every value, so
// the starts stay in [0, n] and the grouped sum reads only the order's own positions.
template <typename K>
__global__ void group_starts_kernel(const K* __restrict__ sorted_keys, std::int64_t n, std::int64_t rows,
                                    std::int64_t* __restrict__ starts) {
  constexpr std::int64_t kOwnRun = 8;
  const auto key_at = [&](std::int64_t j) {
    const auto k = static_cast<std::int64_t>(sorted_keys[j]);
    return k >= 0 && k < rows ? k : rows;
  };
  const std::int64_t first = key_at(0), last = key_at(n - 1);
  const std::int64_t threads = n > rows + 1 ? n : rows + 1;  // a thread for each position and value
  const std::int64_t step = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  const int lane = static_cast<int>(threadIdx.x % 32);
  // Every warp runs the same rounds (blockDim is a multiple of 32): the warp's shuffles below need
  // all its lanes.
  for (std::int64_t base = static_cast<std::int64_t>(blockIdx.x) * blockDim.x; base < threads; base += step) {
    const std::int64_t t = base + threadIdx.x;
    if (t <= first) starts[t] = 0;
    if (t < rows - last) starts[last + 1 + t] = n;
    std::int64_t begin = 0, end = 0;  // the values starting at position t
    if (t >= 1 && t < n) {
      begin = key_at(t - 1) + 1;
      end = key_at(t) + 1;
    }
    const bool own = end - begin <= kOwnRun;
    if (own)
      for (std::int64_t v = begin; v < end; ++v) starts[v] = t;
    for (unsigned long_runs = __ballot_sync(kFullMask, !own); long_runs != 0; long_runs &= long_runs - 1) {
      const int owner = __ffs(static_cast<int>(long_runs)) - 1;
      const std::int64_t run_begin = __shfl_sync(kFullMask, begin, owner), run_end = __shfl_sync(kFullMask, end, owner),
                         position = __shfl_sync(kFullMask, t, owner);
      for (std::int64_t v = run_begin + lane; v < run_end; v += 32) starts[v] = position;
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Grouped row sums: out[o, v, i] = (accumulate ? out[o, v, i] : 0) + sum over the group of row v
// (positions j in increasing order) of src[o, j, i]; row skip_row keeps its start value. One
// thread per output element, consecutive threads along i (coalesced when inner is large). A thread
// walks its group eight positions a round (add_loaded_in_order): their order entries, then their
// rows, then the adds in position order. One load at a time left the kernel latency-bound (an
// embedding's groups hold a few rows each: two dependent loads a row).

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
      const T* column = src + o * layout.src_stride[0] + i * layout.src_stride[2];
      add_loaded_in_order<8>(
          starts[v], starts[v + 1], 1,
          [&](std::int64_t q) { return load_value(column[order[q] * layout.src_stride[1]]); },
          [&](compute_t<T> x) { acc += x; });
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
    const bool folded = tiles <= kFoldedScanTiles;  // the scatter kernel sums the counts itself
    if (!folded)
      launch_checked(op, exclusive_scan_kernel, 1, kSortThreads, 0, runs.data<std::int64_t>(), kDigits * tiles);
    const std::int64_t* counts = runs.data<std::int64_t>();
    launch_checked(op, scatter_tile_by_digit_kernel<K>, grid, kSortThreads, 0, keys_in, order_in, n, shift, tiles,
                   counts, folded ? nullptr : counts, keys[out].data<K>(), order[out].data<std::int64_t>());
    keys_in = keys[out].data<K>();
    order_in = order[out].data<std::int64_t>();
  }
  index_check_launched();
  IndexGroups g{order[out ^ 1], empty({rows + 1}, {DType::Int64, dev})};
  launch_checked(op, group_starts_kernel<K>, grid_for(std::max(n, rows + 1)), kBlockSize, 0, keys_in, n, rows,
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
