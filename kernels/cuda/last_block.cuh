// Blocks of one launch that finish a shared result without a second launch. The blocks of a group
// each write their part, then take a ticket; the block that takes the group's last ticket combines
// the parts in a fixed order (the same whichever block it is, so results stay bit-identical from run
// to run) and writes the result. A kernel of its own did that before, and its launch was most of
// its time (the performance model's fixed 2.5-4 us a launch, against 20 us for the whole sum over the
// batch and time dims on an H200). Used by the split reductions (reduce.cu) and split decoding
// (flash_decode.cu).
//
// Included by kernel files after common.cuh.
#pragma once

#include <cstddef>
#include <cstring>
#include <type_traits>

namespace define::kernels::DEFINE_CUDA_NS {

// The current device's tickets: kMaxGridBlocks counters in device memory (kernels/cuda/last_block.cu),
// zeroed once and kept for the process. They are zero between launches: a group of `members` blocks
// takes exactly `members` tickets and atomicInc wraps to zero at the last. Launches run one at a time
// in stream order (define launches kernels on the legacy stream), so no two share them. A group index
// must be below kMaxGridBlocks.
unsigned* group_tickets();

// Whether this block took the last ticket of group `group`, of `members` blocks. Every thread of the
// block calls it after writing its part. The fence makes this thread's writes visible to the device,
// and the barrier after it holds thread 0's ticket until every thread of the block has written (its
// argument is evaluated before the barrier, so the ticket cannot be taken there); the second fence
// keeps the last block's reads after the ticket.
__device__ __forceinline__ bool last_of_group(unsigned* tickets, unsigned group, unsigned members) {
  const unsigned wrap = members - 1;
  __threadfence();
  __syncthreads();
  const bool last = __syncthreads_or(threadIdx.x == 0 && atomicInc(&tickets[group], wrap) == wrap);
  if (last) __threadfence();
  return last;
}

// A T that other blocks of this launch wrote, read from L2 (ld.global.cg, in the widest words its size
// and alignment allow): this multiprocessor's L1 may hold an older copy of its line, loaded for another
// group's parts that share it before this group's last part was written.
template <typename T>
__device__ __forceinline__ T load_from_l2(const T* p) {
  static_assert(sizeof(T) % 4 == 0 && alignof(T) >= 4, "whole 4-byte words");
  using Word = std::conditional_t<sizeof(T) % 16 == 0 && alignof(T) >= 16, uint4,
                                  std::conditional_t<sizeof(T) % 8 == 0 && alignof(T) >= 8, uint2, unsigned>>;
  Word words[sizeof(T) / sizeof(Word)];
  const auto* from = reinterpret_cast<const Word*>(p);
#pragma unroll
  for (std::size_t i = 0; i < sizeof(T) / sizeof(Word); ++i) words[i] = __ldcg(from + i);
  T v;
  std::memcpy(&v, words, sizeof v);
  return v;
}

}  // namespace define::kernels::DEFINE_CUDA_NS
