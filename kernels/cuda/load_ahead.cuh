// Sums whose speed rests on loads in flight: a thread walks its terms kAhead at a time, issuing a
// round's loads together and adding them afterwards, in order. One load at a time leaves a kernel
// bound by memory latency on a GPU with many multiprocessors (cuda_emu/emu_perf_model.hpp: an H200
// needs several loads in flight a thread to reach its copy rate); adding in the terms' order keeps
// the result independent of kAhead and bit-identical to a plain loop, so kernels that must match
// the CPU path bit for bit can use it.
//
// Included by kernel files only, after common.cuh.
#pragma once

#include <cstdint>
#include <type_traits>

namespace define::kernels::DEFINE_CUDA_NS {

// add(load(i)) for i = begin, begin + step, ... below end, in that order: kAhead loads a round,
// issued together (unrolled in the emulator too, so that its profile counts them in flight), then
// their adds. The last round is masked rather than walked one term at a time, so a short walk (a
// group of three rows) still has all its loads in flight. load(i) must not depend on earlier adds.
template <int kAhead, typename Load, typename Add>
__device__ __forceinline__ void add_loaded_in_order(std::int64_t begin, std::int64_t end, std::int64_t step,
                                                    Load&& load, Add&& add) {
  for (std::int64_t i = begin; i < end; i += kAhead * step) {
    std::remove_cvref_t<decltype(load(i))> v[kAhead]{};
    EMU_UNROLL
    for (int k = 0; k < kAhead; ++k)
      if (i + k * step < end) v[k] = load(i + k * step);
#pragma unroll
    for (int k = 0; k < kAhead; ++k)
      if (i + k * step < end) add(v[k]);
  }
}

}  // namespace define::kernels::DEFINE_CUDA_NS
