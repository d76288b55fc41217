// CUDA reduce family: sum/mean over any set of dims, max/argmax along one dim and its backward,
// and column_sum (the bias gradient of linear). Entry points and checks: kernels/reduce.cpp and
// kernels/matmul.cpp; reference: kernels/ref/reduce.cpp and kernels/ref/matmul.cpp; tests: the
// op-harness cases in mode emu (tests/ops/reduce_test.cpp and others) plus
// tests/cuda/reduce_kernels_test.cpp.
//
// Shape of the work. The host splits x's dims (size-1 dims dropped) into kept dims, which index
// the outputs in their original order, and reduced dims, ordered by decreasing stride; each list
// is coalesced where the dims step through memory as one. Output o then reads x at
//   kept_offset(o) + reduced_offset(r),  r = 0 .. length-1,
// and one of two kernels does the reading, whichever keeps neighbouring threads on neighbouring
// memory:
//   rows     the reduced dims hold x's smallest stride (a sum over the last dim, an argmax over
//            logits): `lanes` threads (1..256, a power of two) share one output and walk r
//            together; warp shuffles (segments of `lanes` lanes when lanes < 32) then shared
//            memory across warps combine them.
//   columns  a kept dim holds the smallest stride (a sum over the first dim, a bias gradient):
//            each thread owns one output, `256 / lanes` threads per output walk interleaved
//            rows, and a shared-memory tree combines them.
// When the outputs alone give few blocks, the reduced range is also cut into `splits` chunks
// (blockIdx.y); each block writes a partial result, and the block that finishes last among those
// with its blockIdx.x combines their partials in chunk order (finish_split, below): one launch.
//
// Memory-level parallelism: each thread of a sum walks its elements four at a time into four
// independent accumulators (combined in a fixed order at the end), so four loads per thread are in
// flight where a single accumulator would wait for each load before issuing the next. Where x allows
// it (float32 or 16-bit, aligned, the dim read contiguously of stride 1: pieces_fit), sums read
// pieces: a rows lane takes whole pieces of 4 float32 or 2 16-bit elements of its row (a component
// accumulator each), a columns thread owns the two outputs of a piece of 2, and four pieces are in
// flight a thread (64 or 32 bytes of float32, where four scalar loads are 16: the performance model
// put the scalar column sum at 71% of an H200's copy rate, bound by latency; 16 bytes of 16-bit
// values, where four loads were 8 and the model put a float16 column sum at 37%). The block count
// aims at eight blocks per multiprocessor of the device (at least kTargetBlocks).
//
// Determinism: every choice (layout, lanes, splits) depends on the shapes, the strides and the
// device's multiprocessor count alone (the count only on GPUs with more than 64), and
// every combination happens in a fixed order (per-thread loops in index order, shuffle trees,
// warps in order, chunks in order); no floating-point atomics (an integer ticket only says which
// block combines the chunks, not their order). Results are bitwise identical from run to run and
// whatever the schedule. Sums accumulate in SumAcc (kernels/cuda/float_sum.cuh): float32 in float
// with compensation rather than in double, which GeForce cards run at 1/32 rate. With plain float
// accumulators (same structure) the 1e5-1e6-element sums of tests/cuda/reduce_kernels_test.cpp were
// off by up to 1.7e-5 (half the harness's allowance), and the adversarial sum there by far more;
// compensated, they are as close as the double accumulators were. Each output is scaled (mean) and
// rounded once, from the compensated pair, in double. 16-bit inputs (Half / BFloat16) are read in
// their format and reduced in float (SumAcc<float>, a float maximum), the result rounded once to
// the output's dtype: x's, or float32 for sum_of_squares (a statistic, e.g. for a gradient norm).
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <type_traits>
#include <vector>

#include "core/dtype.h"
#include "core/factory.h"
#include "kernels/cuda/common.cuh"
#include "kernels/cuda/float16.cuh"
#include "kernels/cuda/float_sum.cuh"
#include "kernels/cuda/last_block.cuh"
#include "kernels/cuda/load_ahead.cuh"

namespace define::kernels::DEFINE_CUDA_NS {
namespace {

// Every reduction block has this many threads (8 warps).
constexpr int kReduceThreads = 256;
// Sums where the layout allows: rows read pieces of 4 floats or 2 16-bit values (pieces of 4 16-bit
// values spilled registers on sm_61), columns pieces of 2 floats or 16-bit values (a thread owns 2
// outputs; with 4, the four accumulators of each and the tree's rounds spilled registers on sm_80 /
// sm_90).
constexpr int kRowPieceElements = 4;
constexpr int kHalfRowPieceElements = 2;
constexpr int kColumnPieceElements = 2;
constexpr int kWarpSize = 32;
constexpr unsigned kFullMask = 0xffffffffu;
// Below this many blocks (or eight per multiprocessor, when that is more) the reduced range is
// split across blocks as well ...
constexpr std::int64_t kTargetBlocks = 512;
// ... but never so finely that a thread adds fewer than this many elements.
constexpr std::int64_t kMinElementsPerThread = 32;
// Loads in flight a thread while the last block of a split combines the partials (L2 hits: the other
// blocks have just written them).
constexpr int kFinishAhead = 8;

// ----------------------------------------------------------------------------------------------
// Reduction operators: the accumulator, how an element enters it, how two combine, how one moves
// between lanes, and how the final value is written.

// The sum of the elements, or with kSquares of their squares (each square rounded to the compute
// type once), written as O.
template <typename T, bool kSquares = false, typename O = T>
struct SumOp {
  using value_t = T;
  using acc_t = SumAcc<compute_t<T>>;
  // A function, not a static constant: nvcc warns of a constant that an instantiation's kernels never read.
  static constexpr bool walk_unrolled() { return true; }
  O* out;
  double scale;

  __device__ __forceinline__ acc_t identity() const { return acc_t::zero(); }
  __device__ __forceinline__ static void add(acc_t& a, T element) {
    const compute_t<T> v = load_value(element);
    a.add(kSquares ? v * v : v);
  }
  __device__ __forceinline__ void accumulate(acc_t& a, const T* p, std::int64_t /*r*/) const { add(a, *p); }
  __device__ __forceinline__ static acc_t combine(acc_t a, acc_t b) { return a.merged(b); }
  __device__ __forceinline__ static acc_t shfl_down(acc_t a, int offset, int width) {
    return a.shfl_down(offset, width);
  }
  __device__ __forceinline__ void write(std::int64_t offset, acc_t a) const {
    out[offset] = convert_value<O>(a.wide() * scale);
  }
};

// A candidate maximum and its index along the reduced dim; index < 0 means "no element yet".
template <typename T>
struct ArgMax {
  T value;
  std::int64_t index;
};

// The reference scans each line in order and moves on to a larger value or to the first NaN. The
// same winner for any combination order: a NaN beats a number, a larger value beats a smaller
// one, and among equals (NaNs included) the lower index wins.
template <typename T>
struct MaxOp {
  using value_t = T;
  using acc_t = ArgMax<compute_t<T>>;  // a 16-bit value widens exactly and is stored back as it was
  static constexpr bool walk_unrolled() { return false; }
  T* values;  // null for argmax
  std::int64_t* indices;

  __device__ __forceinline__ acc_t identity() const { return {compute_t<T>(0), -1}; }
  __device__ __forceinline__ void accumulate(acc_t& a, const T* p, std::int64_t r) const {
    a = combine(a, {load_value(*p), r});
  }
  __device__ __forceinline__ static acc_t combine(acc_t a, acc_t b) {
    if (b.index < 0) return a;
    if (a.index < 0) return b;
    const bool a_nan = a.value != a.value, b_nan = b.value != b.value;
    if (a_nan != b_nan) return a_nan ? a : b;
    if (!a_nan && a.value != b.value) return a.value > b.value ? a : b;
    return a.index <= b.index ? a : b;
  }
  __device__ __forceinline__ static acc_t shfl_down(acc_t a, int offset, int width) {
    return {__shfl_down_sync(kFullMask, a.value, offset, width), __shfl_down_sync(kFullMask, a.index, offset, width)};
  }
  __device__ __forceinline__ void write(std::int64_t offset, acc_t a) const {
    if (values != nullptr) values[offset] = store_value<T>(a.value);
    indices[offset] = a.index;
  }
};

// ----------------------------------------------------------------------------------------------
// Kernels.

// What the kernels need to know about one reduction (passed by value).
struct ReduceGeometry {
  std::int64_t outputs;   // output elements
  std::int64_t length;    // input elements reduced into each output
  std::int64_t chunk;     // reduced elements per split (blockIdx.y)
  int splits;             // > 1: blocks write partials, the last block of each blockIdx.x combines them
  int lanes;              // rows: threads per output; columns: outputs (pieces of outputs) per block
  OffsetCalc<2> kept;     // output index -> {offset in x, offset in the output}
  OffsetCalc<1> reduced;  // reduced index -> offset in x
  std::int64_t out_step;  // columns in pieces: between the outputs of a piece (the last kept dim's)
};

__device__ __forceinline__ std::int64_t reduced_offset(const OffsetCalc<1>& calc, std::int64_t r) {
  if (calc.ndim == 1) return r * calc.strides[0][0];  // the usual case: skip the divisions
  std::int64_t off[1];
  calc.get(r, off);
  return off[0];
}

// The offsets of r, r + step, r + 2 step, ... over two reduced dims that do not merge (a sum over the
// batch and time dims of [B, H, T, d]): one division where the walk starts, then each step adds its
// share of both dims and carries the inner index over (a GPU's 64-bit division is a software routine,
// and four of them in flight spilled registers on sm_61 and sm_75). The inner index in 32 bits (the
// caller checks that the inner dim fits), to spare registers.
struct TwoDimWalk {
  std::int64_t offset, step_offset, carry_offset;
  int inner_size, inner_index, step_inner;
  __device__ __forceinline__ TwoDimWalk(const OffsetCalc<1>& calc, std::int64_t r, std::int64_t step) {
    const std::int64_t inner = calc.sizes[1], outer = r / inner, step_outer = step / inner;
    inner_size = static_cast<int>(inner);
    inner_index = static_cast<int>(r - outer * inner);
    step_inner = static_cast<int>(step - step_outer * inner);
    offset = outer * calc.strides[0][0] + inner_index * calc.strides[0][1];
    step_offset = step_outer * calc.strides[0][0] + step_inner * calc.strides[0][1];
    carry_offset = calc.strides[0][0] - inner * calc.strides[0][1];
  }
  // The current offset, then on to the next step.
  __device__ __forceinline__ std::int64_t next() {
    const std::int64_t at = offset;
    offset += step_offset;
    inner_index += step_inner;  // both below inner_size: no overflow
    if (inner_index >= inner_size) {
      inner_index -= inner_size;
      offset += carry_offset;
    }
    return at;
  }
};

// op's accumulation of base[reduced offset of r] for r = begin, begin + step, ... below end: four
// loads in flight per thread (four accumulators over consecutive quads of the walk, combined in a
// fixed order), then the remainder one at a time. Not for max / argmax (walk_unrolled() false): four
// (value, index) pairs spill registers at sm_61.
template <typename Op>
__device__ __forceinline__ typename Op::acc_t accumulate_walk(const Op& op, const typename Op::value_t* base,
                                                              const OffsetCalc<1>& reduced, std::int64_t begin,
                                                              std::int64_t end, std::int64_t step) {
  using Acc = typename Op::acc_t;
  Acc a0 = op.identity(), a1 = op.identity(), a2 = op.identity(), a3 = op.identity();
  std::int64_t r = begin;
  if (Op::walk_unrolled() && reduced.ndim == 1) {  // the usual case: offsets without divisions
    const std::int64_t s = reduced.strides[0][0];
    for (; r + 3 * step < end; r += 4 * step) {
      op.accumulate(a0, base + r * s, r);
      op.accumulate(a1, base + (r + step) * s, r + step);
      op.accumulate(a2, base + (r + 2 * step) * s, r + 2 * step);
      op.accumulate(a3, base + (r + 3 * step) * s, r + 3 * step);
    }
  } else if (Op::walk_unrolled() && reduced.ndim == 2 && reduced.sizes[1] <= INT32_MAX / 2 && r + 3 * step < end) {
    TwoDimWalk walk(reduced, r, step);  // the same four in flight over two dims
    for (; r + 3 * step < end; r += 4 * step) {
      const std::int64_t o0 = walk.next(), o1 = walk.next(), o2 = walk.next(), o3 = walk.next();
      op.accumulate(a0, base + o0, r);
      op.accumulate(a1, base + o1, r + step);
      op.accumulate(a2, base + o2, r + 2 * step);
      op.accumulate(a3, base + o3, r + 3 * step);
    }
  }
  for (; r < end; r += step) op.accumulate(a0, base + reduced_offset(reduced, r), r);
  return Op::combine(Op::combine(a0, a1), Op::combine(a2, a3));
}

// The piece path of sums (the host checked that every piece is aligned): a[c] += component c of
// piece_at(i) for i = p, p + step, ... below end, four pieces (64 bytes of float32) loaded a thread before
// any is added, where the element walk above has four 4-byte loads in flight. piece_at is called once
// for each i, in order, so it may step a walk of its own (TwoDimWalk) rather than compute from i.
template <typename Op, int kVec, typename PieceAt>
__device__ __forceinline__ void add_pieces(typename Op::acc_t (&a)[kVec], std::int64_t p, std::int64_t end,
                                           std::int64_t step, PieceAt&& piece_at) {
  using Piece = Vec<typename Op::value_t, kVec>;
  add_loaded_in_order<4>(p, end, step, piece_at, [&](const Piece& v) {
#pragma unroll
    for (int c = 0; c < kVec; ++c) Op::add(a[c], v.v[c]);
  });
}

// Elements [begin, end) of a contiguous row (begin a multiple of kVec), lane `lane` of `lanes`: the
// whole pieces by add_pieces, one accumulator per component combined in order, then the elements
// after the last whole piece one a lane.
template <typename Op, int kVec>
__device__ __forceinline__ typename Op::acc_t accumulate_row_pieces(const Op& op, const typename Op::value_t* row,
                                                                    std::int64_t begin, std::int64_t end, int lane,
                                                                    int lanes) {
  using Acc = typename Op::acc_t;
  Acc a[kVec];
#pragma unroll
  for (int c = 0; c < kVec; ++c) a[c] = op.identity();
  const std::int64_t whole = end / kVec;
  const auto* pieces = reinterpret_cast<const Vec<typename Op::value_t, kVec>*>(row);
  add_pieces<Op, kVec>(a, begin / kVec + lane, whole, lanes, [&](std::int64_t i) { return pieces[i]; });
  Acc acc = a[0];
#pragma unroll
  for (int c = 1; c < kVec; ++c) acc = Op::combine(acc, a[c]);
  for (std::int64_t r = whole * kVec + lane; r < end; r += lanes) op.accumulate(acc, row + r, r);
  return acc;
}

// The columns layout's pieces: rows r = begin, begin + step, ... below end of the kVec outputs at base,
// over one reduced dim or two that do not merge (a bias sum over the batch and time dims of [B, H, T, d]).
template <typename Op, int kVec>
__device__ __forceinline__ void add_column_pieces(typename Op::acc_t (&a)[kVec], const typename Op::value_t* base,
                                                  const OffsetCalc<1>& reduced, std::int64_t begin, std::int64_t end,
                                                  std::int64_t step) {
  using Piece = Vec<typename Op::value_t, kVec>;
  if (reduced.ndim == 1) {
    const auto* pieces = reinterpret_cast<const Piece*>(base);
    const std::int64_t stride = reduced.strides[0][0] / kVec;
    add_pieces<Op, kVec>(a, begin, end, step, [&](std::int64_t r) { return pieces[r * stride]; });
  } else {
    TwoDimWalk walk(reduced, begin, step);
    add_pieces<Op, kVec>(a, begin, end, step,
                         [&](std::int64_t) { return *reinterpret_cast<const Piece*>(base + walk.next()); });
  }
}

// Output o's result: final (one split) or this block's partial.
template <typename Op>
__device__ __forceinline__ void store_result(const Op& op, const ReduceGeometry& g, typename Op::acc_t* partial,
                                             std::int64_t o, std::int64_t out_offset, typename Op::acc_t acc) {
  if (g.splits == 1)
    op.write(out_offset, acc);
  else
    partial[static_cast<std::int64_t>(blockIdx.y) * g.outputs + o] = acc;
}

// Tree over segments of `width` lanes (a power of two <= 32); lane 0 of each segment gets the
// result. Every lane of the warp must call it (full-mask shuffles).
template <typename Op>
__device__ __forceinline__ typename Op::acc_t warp_reduce(typename Op::acc_t acc, int width) {
  for (int offset = width / 2; offset > 0; offset /= 2) acc = Op::combine(acc, Op::shfl_down(acc, offset, width));
  return acc;
}

// The parts of a block's `lanes` outputs (thread part * lanes + col holds part `part` of output col)
// combined by a tree in shared memory, in a fixed order; part 0 gets the result. Each thread writes
// only its own slot, and a slot is read by another thread only between two barriers, so the next tree
// can overwrite slots without a trailing barrier. Every thread of the block calls it.
template <typename Op>
__device__ __forceinline__ typename Op::acc_t combine_parts(Aligned<typename Op::acc_t>* slots, typename Op::acc_t acc,
                                                            int part, int parts, int lanes) {
  slots[threadIdx.x].v = acc;
  __syncthreads();
  for (int half = parts / 2; half > 0; half /= 2) {
    if (part < half) slots[threadIdx.x].v = Op::combine(slots[threadIdx.x].v, slots[threadIdx.x + half * lanes].v);
    __syncthreads();
  }
  return slots[threadIdx.x].v;
}

// A split reduction's finish, in the launch that wrote the partials (kernels/cuda/last_block.cuh).
// The splits blocks that share a blockIdx.x share its outputs [first, first + count); the last of
// them to finish combines the group's partials, chunk after chunk in order, and writes the results.
// It reads them from L2, where the other blocks just wrote them, kFinishAhead loads in flight a
// thread. Every thread of the block calls it.
template <typename Op>
__device__ __forceinline__ void finish_split(const Op& op, const ReduceGeometry& g, const typename Op::acc_t* partial,
                                             unsigned* tickets, std::int64_t first, std::int64_t count,
                                             Aligned<typename Op::acc_t>* slots) {
  using Acc = typename Op::acc_t;
  if (!last_of_group(tickets, blockIdx.x, static_cast<unsigned>(g.splits))) return;
  // `lanes` neighbouring outputs a round (a power of two that holds them, up to a block), the other
  // threads of the block over their partials: a thread combines every parts-th chunk of its output,
  // then the parts combine by the shared-memory tree.
  int lanes = 1;
  while (lanes < count && lanes < kReduceThreads) lanes *= 2;
  const int col = static_cast<int>(threadIdx.x) & (lanes - 1);
  const int part = static_cast<int>(threadIdx.x) / lanes;
  const int parts = kReduceThreads / lanes;
  for (std::int64_t done = 0; done < count; done += lanes) {  // block-uniform: barriers inside
    const bool mine = done + col < count;
    const std::int64_t o = first + done + col;
    Acc acc = op.identity();
    if (mine)
      add_loaded_in_order<kFinishAhead>(
          part, g.splits, parts, [&](std::int64_t s) { return load_from_l2(partial + s * g.outputs + o); },
          [&](const Acc& v) { acc = Op::combine(acc, v); });
    acc = combine_parts<Op>(slots, acc, part, parts, lanes);
    if (part == 0 && mine) {
      std::int64_t off[2];
      g.kept.get(o, off);
      op.write(off[1], acc);
    }
  }
}

// Rows layout: g.lanes threads per output walk its reduced index together; kVec > 1: in pieces of kVec
// elements of a contiguous row (sums).
template <typename Op, int kVec>
__global__ void __launch_bounds__(kReduceThreads)
    reduce_rows_kernel(Op op, const typename Op::value_t* __restrict__ x, ReduceGeometry g, typename Op::acc_t* partial,
                       unsigned* tickets) {
  EMU_CHECK_LAUNCH_BOUNDS(kReduceThreads);
  using Acc = typename Op::acc_t;
  EMU_STATIC_SHARED(warp_results, Acc[kReduceThreads / kWarpSize]);
  EMU_STATIC_SHARED(finish_slots, Aligned<Acc>[kReduceThreads]);
  const int lanes = g.lanes;
  const int lane = static_cast<int>(threadIdx.x) & (lanes - 1);
  const int slot = static_cast<int>(threadIdx.x) / lanes;
  const int outputs_per_block = kReduceThreads / lanes;
  const int warps_per_output = lanes / kWarpSize;  // 0 when several outputs share a warp
  const std::int64_t r_begin = static_cast<std::int64_t>(blockIdx.y) * g.chunk;
  const std::int64_t r_end = r_begin + g.chunk < g.length ? r_begin + g.chunk : g.length;
  // The loop bound is the same for the whole block, so the barriers below are block-uniform.
  for (std::int64_t first = static_cast<std::int64_t>(blockIdx.x) * outputs_per_block; first < g.outputs;
       first += static_cast<std::int64_t>(gridDim.x) * outputs_per_block) {
    const std::int64_t o = first + slot;
    std::int64_t off[2] = {0, 0};
    Acc acc = op.identity();
    if (o < g.outputs) {
      g.kept.get(o, off);
      if constexpr (kVec == 1)
        acc = accumulate_walk(op, x + off[0], g.reduced, r_begin + lane, r_end, lanes);
      else
        acc = accumulate_row_pieces<Op, kVec>(op, x + off[0], r_begin, r_end, lane, lanes);
    }
    acc = warp_reduce<Op>(acc, lanes < kWarpSize ? lanes : kWarpSize);
    if (warps_per_output > 1) {
      const int warp = static_cast<int>(threadIdx.x) / kWarpSize;
      if (threadIdx.x % kWarpSize == 0) warp_results[warp] = acc;
      __syncthreads();
      if (lane == 0)
        for (int w = 1; w < warps_per_output; ++w) acc = Op::combine(acc, warp_results[warp + w]);
      __syncthreads();  // warp_results is rewritten for the next outputs
    }
    if (lane == 0 && o < g.outputs) store_result(op, g, partial, o, off[1], acc);
  }
  if (g.splits > 1) {  // one pass of the loop above: a split grid holds every output group
    const std::int64_t first = static_cast<std::int64_t>(blockIdx.x) * outputs_per_block;
    const std::int64_t left = g.outputs - first;
    finish_split<Op>(op, g, partial, tickets, first, left < outputs_per_block ? left : outputs_per_block, finish_slots);
  }
}

// Columns layout: thread (part, col) adds rows part, part + parts, ... of output col; the parts
// of one output then combine by a tree in shared memory. kVec > 1 (sums): col owns kVec neighbouring
// outputs, contiguous in x, and reads them as one piece a row.
template <typename Op, int kVec>
__global__ void __launch_bounds__(kReduceThreads)
    reduce_columns_kernel(Op op, const typename Op::value_t* __restrict__ x, ReduceGeometry g,
                          typename Op::acc_t* partial, unsigned* tickets) {
  EMU_CHECK_LAUNCH_BOUNDS(kReduceThreads);
  using Acc = typename Op::acc_t;
  EMU_STATIC_SHARED(part_results, Aligned<Acc>[kReduceThreads]);
  const int lanes = g.lanes;
  const int col = static_cast<int>(threadIdx.x) & (lanes - 1);
  const int part = static_cast<int>(threadIdx.x) / lanes;
  const int parts = kReduceThreads / lanes;
  const std::int64_t r_begin = static_cast<std::int64_t>(blockIdx.y) * g.chunk;
  const std::int64_t r_end = r_begin + g.chunk < g.length ? r_begin + g.chunk : g.length;
  for (std::int64_t first = static_cast<std::int64_t>(blockIdx.x) * lanes * kVec; first < g.outputs;
       first += static_cast<std::int64_t>(gridDim.x) * lanes * kVec) {
    const std::int64_t o = first + col * kVec;
    std::int64_t off[2] = {0, 0};
    Acc acc[kVec];
#pragma unroll
    for (int c = 0; c < kVec; ++c) acc[c] = op.identity();
    if (o < g.outputs) {
      g.kept.get(o, off);
      if constexpr (kVec == 1)
        acc[0] = accumulate_walk(op, x + off[0], g.reduced, r_begin + part, r_end, parts);
      else
        add_column_pieces<Op, kVec>(acc, x + off[0], g.reduced, r_begin + part, r_end, parts);
    }
    // One tree per component. The components move down a slot each round: the loop (barriers inside)
    // need not be unrolled for acc to stay in registers (indexed by c, it went to local memory: ptxas
    // spills).
    for (int c = 0; c < kVec; ++c) {
      const Acc total = combine_parts<Op>(part_results, acc[0], part, parts, lanes);
#pragma unroll
      for (int i = 0; i + 1 < kVec; ++i) acc[i] = acc[i + 1];
      if (part == 0 && o < g.outputs) store_result(op, g, partial, o + c, off[1] + c * g.out_step, total);
    }
  }
  if (g.splits > 1) {  // one pass of the loop above: a split grid holds every output group
    const std::int64_t first = static_cast<std::int64_t>(blockIdx.x) * lanes * kVec;
    const std::int64_t left = g.outputs - first;
    finish_split<Op>(op, g, partial, tickets, first, left < lanes * kVec ? left : lanes * kVec, part_results);
  }
}

// grad_input[line_start + indices[i] * step] += grad[i]: each gradient element owns one line of
// grad_input, so no two threads write the same element.
template <typename T>
__global__ void max_backward_kernel(T* grad_input, const T* __restrict__ grad, const std::int64_t* __restrict__ indices,
                                    std::int64_t n, std::int64_t length, std::int64_t step, OffsetCalc<3> calc) {
  const std::int64_t stride = static_cast<std::int64_t>(gridDim.x) * blockDim.x;
  for (std::int64_t i = static_cast<std::int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += stride) {
    std::int64_t off[3];
    calc.get(i, off);
    const std::int64_t r = indices[off[2]];
    if (r >= 0 && r < length) {  // a bad index would write out of bounds
      T& g = grad_input[off[0] + r * step];
      g = store_value<T>(load_value(g) + load_value(grad[off[1]]));
    }
  }
}

// ----------------------------------------------------------------------------------------------
// Host side: plan the reduction, then launch it.

enum class Layout { Rows, Columns };

struct ReducePlan {
  Layout layout;
  ReduceGeometry geometry;
  dim3 grid;
  bool pieces = false;  // the piece path: kernels instantiated with kVec = k*RowPieceElements / kColumnPieceElements
};

// One dim of the iteration: its size and its strides in x and in the output.
struct DimRun {
  std::int64_t size;
  std::int64_t x_stride;
  std::int64_t out_stride;
};

int next_pow2(std::int64_t n) {
  int p = 1;
  while (p < n && p < (1 << 30)) p *= 2;
  return p;
}

// Merges an outer dim into the inner one that follows it when both step through x (and the
// output) as a single dim.
std::vector<DimRun> coalesce(const std::vector<DimRun>& dims) {
  std::vector<DimRun> merged;
  for (const DimRun& d : dims) {
    if (!merged.empty()) {
      DimRun& outer = merged.back();
      if (outer.x_stride == d.x_stride * d.size && outer.out_stride == d.out_stride * d.size) {
        outer = {outer.size * d.size, d.x_stride, d.out_stride};
        continue;
      }
    }
    merged.push_back(d);
  }
  return merged;
}

std::int64_t product(const std::vector<DimRun>& dims) {
  std::int64_t n = 1;
  for (const DimRun& d : dims) n *= d.size;
  return n;
}

std::int64_t smallest_stride(const std::vector<DimRun>& dims) {
  std::int64_t s = INT64_MAX;
  for (const DimRun& d : dims) s = std::min(s, std::abs(d.x_stride));
  return s;
}

// Row-major offsets over `dims` (at least one dim: a single size-1 dim when there are none).
template <int N>
OffsetCalc<N> offset_calc(const char* op, const std::vector<DimRun>& dims) {
  if (static_cast<int>(dims.size()) > kMaxDims)
    fail(op, "CUDA kernels support at most {} non-mergeable dims, got {} (make the tensor contiguous first)", kMaxDims,
         dims.size());
  OffsetCalc<N> c;
  c.ndim = dims.empty() ? 1 : static_cast<int>(dims.size());
  c.sizes[0] = 1;
  for (std::size_t d = 0; d < dims.size(); ++d) {
    c.sizes[d] = dims[d].size;
    c.strides[0][d] = dims[d].x_stride;
    if constexpr (N > 1) c.strides[1][d] = dims[d].out_stride;
  }
  return c;
}

// Whether a sum can read x in pieces of `vec` elements: x on a 16-byte boundary, the dim that
// is read contiguously (the reduced one for rows, the last kept one for columns) of stride 1 and every
// other stride a multiple of vec, so that every piece a thread loads is aligned; for columns the last
// kept dim whole pieces (a piece's outputs are one run of outputs), and two reduced dims at most (the
// second walked by TwoDimWalk; rows: one, the row).
bool pieces_fit(const Tensor& x, Layout layout, const std::vector<DimRun>& kept, const std::vector<DimRun>& reduced,
                std::int64_t vec) {
  if (reinterpret_cast<std::uintptr_t>(x.raw_data()) % 16 != 0) return false;
  auto strides_whole = [vec](const std::vector<DimRun>& dims, std::size_t skip) {
    for (std::size_t d = 0; d < dims.size(); ++d)
      if (d != skip && dims[d].x_stride % vec != 0) return false;
    return true;
  };
  if (layout == Layout::Rows)
    return reduced.size() == 1 && reduced[0].x_stride == 1 && strides_whole(kept, kept.size());
  const bool walkable = reduced.size() <= 1 || (reduced.size() == 2 && reduced[1].size <= INT32_MAX / 2);
  return walkable && !kept.empty() && kept.back().x_stride == 1 && kept.back().size % vec == 0 &&
         strides_whole(kept, kept.size() - 1) && strides_whole(reduced, reduced.size());
}

// Plans out[kept] = reduce over the dims marked in `reduce` of x. `out` has x's rank with size 1
// on the reduced dims (its strides place the results). `pieces`: the op can take the piece path.
ReducePlan plan_reduction(const char* op, const Tensor& x, const Tensor& out, const std::vector<bool>& reduce,
                          bool pieces = false) {
  std::vector<DimRun> kept, reduced;
  for (int d = 0; d < x.dim(); ++d) {
    if (x.shape()[d] == 1) continue;
    (reduce[d] ? reduced : kept).push_back({x.shape()[d], x.strides()[d], reduce[d] ? 0 : out.strides()[d]});
  }
  // Reduced dims in order of decreasing stride: the innermost walk is the one nearest in memory.
  std::stable_sort(reduced.begin(), reduced.end(),
                   [](const DimRun& a, const DimRun& b) { return std::abs(a.x_stride) > std::abs(b.x_stride); });
  kept = coalesce(kept);
  reduced = coalesce(reduced);

  ReducePlan plan;
  ReduceGeometry& g = plan.geometry;
  g.outputs = product(kept);
  g.length = product(reduced);
  g.kept = offset_calc<2>(op, kept);
  g.reduced = offset_calc<1>(op, reduced);
  g.out_step = kept.empty() ? 0 : kept.back().out_stride;
  plan.layout = !reduced.empty() && (kept.empty() || smallest_stride(reduced) < smallest_stride(kept))
                    ? Layout::Rows
                    : Layout::Columns;

  const bool half = is_float16(x.dtype());
  const std::int64_t vec = plan.layout == Layout::Columns ? kColumnPieceElements
                           : half                         ? kHalfRowPieceElements
                                                          : kRowPieceElements;
  // float32 and 16-bit values: float64's 16-byte pieces of 2 spilled registers (sm_80 / sm_90).
  const bool piece_type = x.dtype() == DType::Float32 || half;
  plan.pieces = pieces && piece_type && g.outputs > 0 && pieces_fit(x, plan.layout, kept, reduced, vec);
  // Rows: a lane's elements come in pieces of `per_read`; columns: a thread owns that many outputs.
  const std::int64_t per_read = plan.pieces ? vec : 1;
  const std::int64_t length = std::max<std::int64_t>(g.length, 1);
  std::int64_t threads_per_output, outputs_per_block;
  if (plan.layout == Layout::Rows) {
    // One read per lane for short rows; about 8 or more per lane for longer ones.
    const std::int64_t reads = ceil_div(length, per_read);
    g.lanes =
        reads <= kWarpSize ? next_pow2(reads) : std::clamp(next_pow2(ceil_div(reads, 8)), kWarpSize, kReduceThreads);
    threads_per_output = g.lanes;
    outputs_per_block = kReduceThreads / g.lanes;
  } else {
    // A warp's worth of neighbouring outputs (or pieces of them; fewer if there are fewer), the rest
    // of the block shares their rows; a short reduction leaves more threads for outputs.
    const std::int64_t owners = g.outputs / per_read;
    const int parts = std::min(next_pow2(length), kReduceThreads / std::min(kWarpSize, next_pow2(owners)));
    g.lanes = kReduceThreads / parts;
    threads_per_output = parts;
    outputs_per_block = g.lanes * per_read;
  }
  const std::int64_t blocks = ceil_div(g.outputs, outputs_per_block);
  const std::int64_t target = std::max<std::int64_t>(kTargetBlocks, 8 * std::int64_t(multiprocessor_count()));
  std::int64_t splits = 1;
  // A split grid holds every output group at once (finish_split's tickets are per blockIdx.x).
  if (blocks < target && blocks <= kMaxGridBlocks)
    splits = std::max<std::int64_t>(
        1, std::min(ceil_div(target, blocks), ceil_div(g.length, threads_per_output * kMinElementsPerThread)));
  g.chunk = ceil_div(g.length, splits);
  if (plan.pieces && plan.layout == Layout::Rows) g.chunk = ceil_div(g.chunk, vec) * vec;  // chunks of whole pieces
  g.splits = g.chunk == 0 ? 1 : static_cast<int>(ceil_div(g.length, g.chunk));             // no empty chunks
  if (g.chunk == 0) g.chunk = 1;
  plan.grid = dim3(static_cast<unsigned>(std::min(blocks, kMaxGridBlocks)), static_cast<unsigned>(g.splits));
  return plan;
}

template <typename Op>
void run_reduction(const char* name, const Op& op, const Tensor& x, const ReducePlan& plan) {
  using Acc = typename Op::acc_t;
  const ReduceGeometry& g = plan.geometry;
  Tensor workspace;  // partials of split reductions, [splits][outputs]
  Acc* partial = nullptr;
  unsigned* tickets = nullptr;
  if (g.splits > 1) {
    const auto bytes = static_cast<std::int64_t>(sizeof(Acc)) * g.splits * g.outputs;
    workspace = empty({ceil_div(bytes, 8)}, {DType::Float64, x.device()});
    partial = static_cast<Acc*>(workspace.raw_data());
    tickets = group_tickets();
  }
  const auto* px = x.data<typename Op::value_t>();
  auto launch_layout = [&]<int kRowPiece, int kColumnPiece>() {
    if (plan.layout == Layout::Rows)
      launch_checked(name, reduce_rows_kernel<Op, kRowPiece>, plan.grid, kReduceThreads, 0, op, px, g, partial,
                     tickets);
    else
      launch_checked(name, reduce_columns_kernel<Op, kColumnPiece>, plan.grid, kReduceThreads, 0, op, px, g, partial,
                     tickets);
  };
  if constexpr (Op::walk_unrolled() && std::is_same_v<typename Op::value_t, float>) {
    if (plan.pieces) {
      launch_layout.template operator()<kRowPieceElements, kColumnPieceElements>();
    } else {
      launch_layout.template operator()<1, 1>();
    }
  } else if constexpr (Op::walk_unrolled() && is_float16_v<typename Op::value_t>) {
    if (plan.pieces) {
      launch_layout.template operator()<kHalfRowPieceElements, kColumnPieceElements>();
    } else {
      launch_layout.template operator()<1, 1>();
    }
  } else {
    launch_layout.template operator()<1, 1>();
  }
}

void sum_into(const char* name, const Tensor& x, const Tensor& out, const std::vector<bool>& reduce, double scale) {
  const ReducePlan plan = plan_reduction(name, x, out, reduce, true);
  DEFINE_DISPATCH_FLOATING(x.dtype(), name, [&] {
    run_reduction(name, SumOp<scalar_t>{out.data<scalar_t>(), scale}, x, plan);
  });
}

}  // namespace

void sum(const Tensor& x, const Tensor& out, double scale) {
  std::vector<bool> reduce(static_cast<std::size_t>(x.dim()));
  for (int d = 0; d < x.dim(); ++d) reduce[d] = out.shape()[d] == 1;
  sum_into("sum", x, out, reduce, scale);
}

void sum_of_squares(const Tensor& x, const Tensor& out) {
  const char* name = "sum_of_squares";
  const ReducePlan plan =
      plan_reduction(name, x, out, std::vector<bool>(static_cast<std::size_t>(x.dim()), true), true);
  DEFINE_DISPATCH_FLOATING(x.dtype(), name, [&] {
    if constexpr (is_float16_v<scalar_t>) {  // a statistic: float32
      run_reduction(name, SumOp<scalar_t, true, float>{out.data<float>(), 1.0}, x, plan);
    } else {
      run_reduction(name, SumOp<scalar_t, true>{out.data<scalar_t>(), 1.0}, x, plan);
    }
  });
}

void max(const Tensor& x, const Tensor& values, const Tensor& indices, int dim) {
  if (values.defined() && values.strides() != indices.strides())
    fail("max", "internal: values and indices must have the same layout");
  std::vector<bool> reduce(static_cast<std::size_t>(x.dim()), false);
  if (x.dim() > 0) reduce[dim] = true;
  const ReducePlan plan = plan_reduction("max", x, indices, reduce);
  DEFINE_DISPATCH_FLOATING(x.dtype(), "max", [&] {
    const MaxOp<scalar_t> op{values.defined() ? values.data<scalar_t>() : nullptr, indices.data<std::int64_t>()};
    run_reduction("max", op, x, plan);
  });
}

void max_backward(const Tensor& grad, const Tensor& indices, const Tensor& grad_input, int dim) {
  const char* op = "max backward";
  const bool scalar = grad_input.dim() == 0;
  const std::int64_t length = scalar ? 1 : grad_input.shape()[dim];
  const std::int64_t step = scalar ? 0 : grad_input.strides()[dim];
  // grad_input seen with grad's (keepdim) shape: the first element of each line along dim.
  const Tensor line_starts = grad_input.as_strided(grad.shape(), grad_input.strides(), grad_input.offset());
  const TensorIterator it(op, {line_starts, grad, indices});
  const auto calc = make_offset_calc<3>(op, it);
  DEFINE_DISPATCH_FLOATING(grad.dtype(), op, [&] {
    launch_checked(op, max_backward_kernel<scalar_t>, grid_for(it.numel()), kBlockSize, 0, grad_input.data<scalar_t>(),
                   grad.data<scalar_t>(), indices.data<std::int64_t>(), it.numel(), length, step, calc);
  });
}

void column_sum(const Tensor& x, const Tensor& out) {
  // out [cols] seen as the keepdim result [1, cols] of a sum over dim 0.
  const Tensor out_row = out.as_strided({1, x.shape()[1]}, {0, out.strides()[0]}, out.offset());
  sum_into("column_sum", x, out_row, {true, false}, 1.0);
}

}  // namespace define::kernels::DEFINE_CUDA_NS
