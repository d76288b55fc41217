// CUDA execution emulator, part 2 of 6: fibers. Every CUDA thread runs on a fiber (boost.context's
// fcontext: ~5 ns per switch, correct CFI for unwinders and gdb). Stacks are mmap'ed with a PROT_NONE
// guard page below them and reused across blocks and launches. Under AddressSanitizer every switch
// is announced with __sanitizer_start/finish_switch_fiber, and a stack gets unpoisoned whenever a new
// context is made on it (a recycled stack still carries the shadow poison of its dead frames).
#pragma once

#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <new>

#include <boost/context/detail/fcontext.hpp>

#include "cuda_emu/emu_types.hpp"

#if defined(__SANITIZE_ADDRESS__)
#define CUDA_EMU_ASAN 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer)
#define CUDA_EMU_ASAN 1
#endif
#endif
#if defined(CUDA_EMU_ASAN)
#include <sanitizer/asan_interface.h>
#include <sanitizer/common_interface_defs.h>
#endif

namespace cuda_emu::detail {

namespace bctx = boost::context::detail;

struct Slot;

struct Fiber {
  bctx::fcontext_t ctx = nullptr;  // where to jump to resume it
  void* map = nullptr;             // the mapping: guard page + stack
  std::size_t map_bytes = 0;
  char* stack_lo = nullptr;  // usable stack [stack_lo, stack_lo + stack_bytes); for ASan
  std::size_t stack_bytes = 0;
  void* fake_stack = nullptr;  // ASan's fake-stack handle while suspended
  Slot* slot = nullptr;        // the CUDA thread it runs
  int index = 0;

  Fiber() = default;
  Fiber(const Fiber&) = delete;
  Fiber& operator=(const Fiber&) = delete;
  ~Fiber() {
    if (map) munmap(map, map_bytes);
  }
};

inline std::size_t page_bytes() {
  static const std::size_t p = std::size_t(sysconf(_SC_PAGESIZE));
  return p;
}

// Maps `bytes` of stack (rounded up to pages) above a guard page. Overflowing the stack (a kernel
// with big local arrays) then faults cleanly instead of corrupting a neighbour.
inline void map_stack(Fiber& f, std::size_t bytes) {
  const std::size_t page = page_bytes();
  bytes = (bytes + page - 1) / page * page;
  void* m = mmap(nullptr, bytes + page, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_STACK,
                 -1, 0);
  if (m == MAP_FAILED) throw std::bad_alloc();
  mprotect(m, page, PROT_NONE);
  f.map = m;
  f.map_bytes = bytes + page;
  f.stack_lo = static_cast<char*>(m) + page;
  f.stack_bytes = bytes;
}

// Makes a fresh context on the fiber's stack that starts in `entry`. Stack tops are staggered by
// 320 bytes per fiber ("colouring") so that the hot frames of neighbouring fibers do not all map to
// the same cache sets.
CUDA_EMU_UNINSTRUMENTED inline void make_context(Fiber& f, void (*entry)(bctx::transfer_t)) {
#if defined(CUDA_EMU_ASAN)
  __asan_unpoison_memory_region(f.stack_lo, f.stack_bytes);
#endif
  std::size_t colour = std::size_t(f.index % 16) * 320;
  char* top = f.stack_lo + f.stack_bytes - colour;
  f.fake_stack = nullptr;
  f.ctx = bctx::make_fcontext(top, std::size_t(top - f.stack_lo), entry);
}

// Tell ASan that this OS thread is about to run on `to`'s stack. `save` receives the current
// fiber's fake stack, or is null when the current fiber will never be resumed.
CUDA_EMU_UNINSTRUMENTED inline void before_switch([[maybe_unused]] void** save, [[maybe_unused]] const Fiber& to) {
#if defined(CUDA_EMU_ASAN)
  __sanitizer_start_switch_fiber(save, to.stack_lo, to.stack_bytes);
#endif
}

// Counterpart of before_switch, run first thing on the stack that was switched to. Reports the
// stack we came from (used to learn the OS thread's own stack bounds).
CUDA_EMU_UNINSTRUMENTED inline void after_switch([[maybe_unused]] Fiber& self, [[maybe_unused]] const void** from_lo,
                                                 [[maybe_unused]] std::size_t* from_bytes) {
#if defined(CUDA_EMU_ASAN)
  __sanitizer_finish_switch_fiber(self.fake_stack, from_lo, from_bytes);
  self.fake_stack = nullptr;
#endif
}

}  // namespace cuda_emu::detail
