// What every kernel file of the CUDA backend shares: launch geometry, launch with error checks,
// and OffsetCalc, the device-side half of the TensorIterator (a coalesced shape plus per-operand
// strides, passed to kernels by value).
//
// A kernel file includes its standard headers, then the project headers it needs, then this
// header (which includes cuda_compat.cuh last of all: in the emulator build the CUDA keyword
// macros must not see headers that come after them). Its host wrappers are defined in
// namespace define::kernels::DEFINE_CUDA_NS, which is `cuda` under nvcc and `cuda_emu` in the
// emulator build (declared by kernels/cuda/ops.h); kernels go in an anonymous namespace inside it.
#pragma once

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <string>
#include <type_traits>
#include <utility>

#include "core/error.h"
#include "core/tensor.h"
#include "kernels/tensor_iterator.h"
// The families' contracts: a host wrapper whose signature drifts from its declaration then leaves
// the declared function undefined, and the link fails, instead of going unnoticed.
#include "kernels/cuda/ops.h"
// cuda_compat.cuh before check.h: check.h asks for the runtime API without the keyword macros,
// and whichever includes the emulator first decides.
#include "kernels/cuda/cuda_compat.cuh"
#include "kernels/cuda/check.h"

namespace define::kernels::DEFINE_CUDA_NS {

// Threads per block for the simple elementwise-style kernels.
constexpr int kBlockSize = 256;
// Grid-stride loops use at most this many blocks: enough to fill any current GPU several times
// over, and it keeps the emulator's per-block cost bounded on large tensors.
constexpr std::int64_t kMaxGridBlocks = 4096;

// a / b rounded up, for a >= 0 and b > 0.
inline std::int64_t ceil_div(std::int64_t a, std::int64_t b) { return (a + b - 1) / b; }

// Blocks for a grid-stride loop over n items with `block` threads each (at least 1).
inline unsigned grid_for(std::int64_t n, int block = kBlockSize) {
  const std::int64_t blocks = ceil_div(n, block);
  return static_cast<unsigned>(std::clamp<std::int64_t>(blocks, 1, kMaxGridBlocks));
}

// Multiprocessors of the current device, for grids sized to fill it (the emulated device: its
// OS threads, or the profiled target GPU's count in profiling mode). Asked each time: a cheap
// attribute query, and the current device may change between calls.
inline int multiprocessor_count() {
  int device = 0, count = 0;
  if (cudaGetDevice(&device) != cudaSuccess ||
      cudaDeviceGetAttribute(&count, cudaDevAttrMultiProcessorCount, device) != cudaSuccess || count < 1) {
    (void)cudaGetLastError();
    return 1;
  }
  return count;
}

// kN consecutive elements aligned to their total size, so that one load or store moves them all
// (ld.global.v4.f32 and the like) where the address is that aligned; 16 bytes is the widest access a
// thread has, and a wider Vec moves as several.
template <typename T, int kN>
struct alignas(kN * sizeof(T)) Vec {
  static_assert(kN > 0 && (kN * sizeof(T) & (kN * sizeof(T) - 1)) == 0, "a power-of-two size in bytes");
  static constexpr int kSize = kN;
  T v[kN];
};
// As many elements as fit 16 bytes.
template <typename T>
using Vec16 = Vec<T, static_cast<int>(16 / sizeof(T))>;

// A T in memory aligned to 8 bytes (T of 8) or 16 (larger T; smaller ones keep theirs), for shared
// arrays of small structs: nvcc copies a struct of two floats (alignment 4) as two 4-byte accesses,
// so a warp copying consecutive elements strides 8 bytes and puts its 32 lanes on 16 banks (2-way
// conflicts); aligned to 8 it is one 8-byte access a lane, conflict-free. Registers keep plain T.
template <typename T>
struct alignas(sizeof(T) < 8 ? alignof(T) : (sizeof(T) == 8 ? 8 : 16)) Aligned {
  T v;
};

// Launches a kernel and turns any failure into define::Error "<op>: ...": a launch error
// reported by the runtime (nvcc build), or an exception a kernel raised in the emulator (which
// names the failing block). Synchronous errors only; asynchronous faults surface at the next
// synchronising call through DEFINE_CUDA_CHECK.
template <typename... P, typename... A>
void launch_checked(const char* op, void (*kernel)(P...), dim3 grid, dim3 block, std::size_t smem,
                    A&&... args) {
#if defined(__CUDACC__)
  launch(kernel, grid, block, smem, cudaStream_t{nullptr}, std::forward<A>(args)...);
  const cudaError_t err = cudaGetLastError();
  if (err != cudaSuccess) fail(op, "CUDA kernel launch failed: {}", cudaGetErrorString(err));
#else
  try {
    launch(kernel, grid, block, smem, cudaStream_t{nullptr}, std::forward<A>(args)...);
  } catch (const ::cuda_emu::kernel_error& e) {
    fail(op, "{}", e.what());
  }
#endif
}

// Device-side element offsets for up to N operands of a TensorIterator: the iteration shape
// (coalesced, so most calls have 1-2 dims) and each operand's strides, in elements.
constexpr int kMaxDims = 8;

template <int N>
struct OffsetCalc {
  int ndim = 1;
  std::int64_t sizes[kMaxDims] = {};
  std::int64_t strides[N][kMaxDims] = {};

  // Offsets of element `linear` (row-major over the iteration shape) in each operand, computed in
  // the linear index type L and the offset type O: 64-bit, or 32-bit where index32_fits() said so.
  template <typename L, typename O>
  __host__ __device__ __forceinline__ void get(L linear, O (&off)[N]) const {
#pragma unroll
    for (int k = 0; k < N; ++k) off[k] = 0;
    for (int d = ndim - 1; d >= 0; --d) {
      const L size = static_cast<L>(sizes[d]);
      const L i = d == 0 ? linear : linear % size;
      linear = d == 0 ? 0 : linear / size;
#pragma unroll
      for (int k = 0; k < N; ++k) off[k] += static_cast<O>(i) * static_cast<O>(strides[k][d]);
    }
  }
};

// Index width of the per-element kernels. GPUs have no 64-bit integer divide: each 64-bit / or %
// of OffsetCalc::get is a software routine of dozens of instructions, a 32-bit one a few
// multiplies, and a strided elementwise kernel does one pair per dim per element. So the host
// picks, per launch, 32-bit index math (an unsigned linear index, signed offsets) when the element
// count and every offset an operand can reach fit in int32, and 64-bit otherwise.
template <bool kIndex32>
struct IndexWidth {
  using linear_t = std::conditional_t<kIndex32, std::uint32_t, std::int64_t>;
  using offset_t = std::conditional_t<kIndex32, std::int32_t, std::int64_t>;
};
// A grid-stride index below an int32 count plus one grid's threads must not wrap a uint32.
static_assert(kMaxGridBlocks * kBlockSize <= (std::int64_t{1} << 31), "grid-stride step must fit in 31 bits");

// Tests force the 64-bit path on small tensors (define::kernels::EmuIndex64Guard).
inline std::atomic<bool>& index64_forced() {
  static std::atomic<bool> forced{false};
  return forced;
}

// Whether 32-bit index math covers an iteration of `numel` elements whose operands reach offsets
// up to `max_offset` (in elements, by absolute value).
inline bool index32_fits(std::int64_t numel, std::int64_t max_offset) {
  constexpr std::int64_t kLimit = INT32_MAX;
  return !index64_forced().load(std::memory_order_relaxed) && numel <= kLimit && max_offset <= kLimit;
}

// The same for a TensorIterator: the farthest element of each operand is the sum over the dims of
// (size - 1) * |stride| (a reach too large for int64 does not fit either).
inline bool index32_fits(const TensorIterator& it) {
  std::int64_t max_offset = 0;
  for (int k = 0; k < it.num_operands(); ++k) {
    std::int64_t reach = 0;
    for (int d = 0; d < it.ndim(); ++d) {
      const std::int64_t steps = it.shape()[d] - 1, stride = std::abs(it.stride(k, d));
      if (steps > 0 && stride > (INT64_MAX - reach) / steps) return false;
      reach += steps * stride;
    }
    max_offset = std::max(max_offset, reach);
  }
  return index32_fits(it.numel(), max_offset);
}

// Calls fn.template operator()<kIndex32>() with the index width index32_fits(it) picked.
template <typename Fn>
void dispatch_index_width(const TensorIterator& it, Fn&& fn) {
  if (index32_fits(it)) fn.template operator()<true>();
  else fn.template operator()<false>();
}

// Calls body(offsets) for every element of the iteration, offsets[k] being operand k's element
// offset; grid-stride, so any grid covers any size. Flat iterations skip the offset arithmetic.
template <bool kIndex32, int N, typename Body>
__device__ __forceinline__ void for_each_element(std::int64_t n, bool flat, const OffsetCalc<N>& calc,
                                                 const Body& body) {
  using L = typename IndexWidth<kIndex32>::linear_t;
  using O = typename IndexWidth<kIndex32>::offset_t;
  const L count = static_cast<L>(n);
  const L step = static_cast<L>(gridDim.x) * blockDim.x;
  const L first = static_cast<L>(blockIdx.x) * blockDim.x + threadIdx.x;
  O off[N];
  if (flat) {
    for (L i = first; i < count; i += step) {
#pragma unroll
      for (int k = 0; k < N; ++k) off[k] = static_cast<O>(i);
      body(off);
    }
  } else {
    for (L i = first; i < count; i += step) {
      calc.get(i, off);
      body(off);
    }
  }
}

// Builds the OffsetCalc of a TensorIterator with exactly N operands. Throws when the coalesced
// iteration still has more than kMaxDims dims (only absurdly strided views do).
template <int N>
OffsetCalc<N> make_offset_calc(const char* op, const TensorIterator& it) {
  if (it.num_operands() != N) fail(op, "internal: iterator has {} operands, expected {}", it.num_operands(), N);
  if (it.ndim() > kMaxDims)
    fail(op, "CUDA kernels support at most {} non-mergeable dims, got {} (make the tensor contiguous first)",
         kMaxDims, it.ndim());
  OffsetCalc<N> c;
  c.ndim = it.ndim();
  for (int d = 0; d < c.ndim; ++d) {
    c.sizes[d] = it.shape()[d];
    for (int k = 0; k < N; ++k) c.strides[k][d] = it.stride(k, d);
  }
  return c;
}

// True when every operand of the iterator is one flat run with stride 1: kernels then index
// with the linear position directly.
inline bool all_flat(const TensorIterator& it) { return it.is_flat(); }

}  // namespace define::kernels::DEFINE_CUDA_NS
