// CUDA execution emulator: the race schedule's switch points (included last by cuda_emu.hpp).
//
// A CUDA thread of the emulator runs uninterrupted until its next barrier, so a read-modify-write
// race between threads (two threads doing `s[0] += x` without an atomic) always gives the right
// answer here while a GPU loses updates. The race schedule (CUDA_EMU_SCHEDULE=race[:seed]) lets a
// thread give way to another at its global and shared memory accesses.
//
// How the emulator sees those accesses: the kernel files of the emulator build are compiled with
// GCC's (or clang's) ThreadSanitizer instrumentation (-fsanitize=thread, cuda_emu/emulated_kernels.cmake)
// but not linked with its run-time library. The compiler then calls __tsan_read4(addr),
// __tsan_write8(addr), __tsan_atomic32_fetch_add(addr, v, order) ... around every memory access and
// atomic, and the functions below are that run-time library: each asks the block's Runner whether to
// switch threads here (Runner::race_hook: a seeded coin flip, and only for shared memory and device
// memory, never a thread's stack or the emulator's own data), then the atomics do their operation.
// Outside the race schedule a hook costs a call and two loads.
//
// The definitions are weak, so every instrumented kernel file may carry them and the linker keeps
// one; they are not instrumented themselves (no_sanitize_thread). Builds without the
// instrumentation (the sanitizer presets: ASan cannot be combined with TSan) do not define them;
// there the race schedule switches threads only at barriers (its blocks still permuted), and says so
// once.
#pragma once

#include <cstdint>
#include <cstdio>

#include "cuda_emu/emu_runner.hpp"

#if defined(CUDA_EMU_RACE_HOOKS)

#define CUDA_EMU_HOOK extern "C" __attribute__((weak, no_sanitize_thread, visibility("default")))

namespace cuda_emu::detail {
// pc: the instruction that made the access, for the profile (the hook's return address; the hooks
// below are never inlined into the kernels, the compiler calls them).
__attribute__((no_sanitize_thread, always_inline)) inline void access_hook(const volatile void* address, unsigned bytes,
                                                                           unsigned kind, const void* pc) {
  Runner* r = tls_runner;
  if (r) r->access_hook(const_cast<const void*>(address), bytes, kind, pc);
}
}  // namespace cuda_emu::detail

#define CUDA_EMU_ACCESS(a, bytes, kind) cuda_emu::detail::access_hook(a, bytes, kind, __builtin_return_address(0))

CUDA_EMU_HOOK void __tsan_init() {}
CUDA_EMU_HOOK void __tsan_func_entry(void*) {}
CUDA_EMU_HOOK void __tsan_func_exit() {}
CUDA_EMU_HOOK void __tsan_vptr_update(void**, void*) {}
CUDA_EMU_HOOK void __tsan_vptr_read(void**) {}
CUDA_EMU_HOOK void __tsan_read_range(void* a, unsigned long n) { CUDA_EMU_ACCESS(a, unsigned(n), 0); }
CUDA_EMU_HOOK void __tsan_write_range(void* a, unsigned long n) { CUDA_EMU_ACCESS(a, unsigned(n), 1); }

#define CUDA_EMU_ACCESS_HOOKS(bytes)                                                               \
  CUDA_EMU_HOOK void __tsan_read##bytes(void* a) { CUDA_EMU_ACCESS(a, bytes, 0); }                 \
  CUDA_EMU_HOOK void __tsan_write##bytes(void* a) { CUDA_EMU_ACCESS(a, bytes, 1); }                \
  CUDA_EMU_HOOK void __tsan_unaligned_read##bytes(const void* a) { CUDA_EMU_ACCESS(a, bytes, 0); } \
  CUDA_EMU_HOOK void __tsan_unaligned_write##bytes(void* a) { CUDA_EMU_ACCESS(a, bytes, 1); }      \
  CUDA_EMU_HOOK void __tsan_volatile_read##bytes(void* a) { CUDA_EMU_ACCESS(a, bytes, 0); }        \
  CUDA_EMU_HOOK void __tsan_volatile_write##bytes(void* a) { CUDA_EMU_ACCESS(a, bytes, 1); }
CUDA_EMU_ACCESS_HOOKS(1)
CUDA_EMU_ACCESS_HOOKS(2)
CUDA_EMU_ACCESS_HOOKS(4)
CUDA_EMU_ACCESS_HOOKS(8)
CUDA_EMU_ACCESS_HOOKS(16)
#undef CUDA_EMU_ACCESS_HOOKS

// The atomics the instrumentation replaces: switch point first, then the operation (sequentially
// consistent whatever order was asked for: stronger is always correct).
#define CUDA_EMU_ATOMIC_HOOKS(bits, T)                                                                         \
  CUDA_EMU_HOOK T __tsan_atomic##bits##_load(const volatile T* a, int) {                                       \
    CUDA_EMU_ACCESS(a, bits / 8, 0);                                                                           \
    return __atomic_load_n(a, __ATOMIC_SEQ_CST);                                                               \
  }                                                                                                            \
  CUDA_EMU_HOOK void __tsan_atomic##bits##_store(volatile T* a, T v, int) {                                    \
    CUDA_EMU_ACCESS(a, bits / 8, 1);                                                                           \
    __atomic_store_n(a, v, __ATOMIC_SEQ_CST);                                                                  \
  }                                                                                                            \
  CUDA_EMU_HOOK T __tsan_atomic##bits##_exchange(volatile T* a, T v, int) {                                    \
    CUDA_EMU_ACCESS(a, bits / 8, 2);                                                                           \
    return __atomic_exchange_n(a, v, __ATOMIC_SEQ_CST);                                                        \
  }                                                                                                            \
  CUDA_EMU_HOOK T __tsan_atomic##bits##_fetch_add(volatile T* a, T v, int) {                                   \
    CUDA_EMU_ACCESS(a, bits / 8, 2);                                                                           \
    return __atomic_fetch_add(a, v, __ATOMIC_SEQ_CST);                                                         \
  }                                                                                                            \
  CUDA_EMU_HOOK T __tsan_atomic##bits##_fetch_sub(volatile T* a, T v, int) {                                   \
    CUDA_EMU_ACCESS(a, bits / 8, 2);                                                                           \
    return __atomic_fetch_sub(a, v, __ATOMIC_SEQ_CST);                                                         \
  }                                                                                                            \
  CUDA_EMU_HOOK T __tsan_atomic##bits##_fetch_and(volatile T* a, T v, int) {                                   \
    CUDA_EMU_ACCESS(a, bits / 8, 2);                                                                           \
    return __atomic_fetch_and(a, v, __ATOMIC_SEQ_CST);                                                         \
  }                                                                                                            \
  CUDA_EMU_HOOK T __tsan_atomic##bits##_fetch_or(volatile T* a, T v, int) {                                    \
    CUDA_EMU_ACCESS(a, bits / 8, 2);                                                                           \
    return __atomic_fetch_or(a, v, __ATOMIC_SEQ_CST);                                                          \
  }                                                                                                            \
  CUDA_EMU_HOOK T __tsan_atomic##bits##_fetch_xor(volatile T* a, T v, int) {                                   \
    CUDA_EMU_ACCESS(a, bits / 8, 2);                                                                           \
    return __atomic_fetch_xor(a, v, __ATOMIC_SEQ_CST);                                                         \
  }                                                                                                            \
  CUDA_EMU_HOOK T __tsan_atomic##bits##_fetch_nand(volatile T* a, T v, int) {                                  \
    CUDA_EMU_ACCESS(a, bits / 8, 2);                                                                           \
    return __atomic_fetch_nand(a, v, __ATOMIC_SEQ_CST);                                                        \
  }                                                                                                            \
  CUDA_EMU_HOOK int __tsan_atomic##bits##_compare_exchange_strong(volatile T* a, T* expected, T v, int, int) { \
    CUDA_EMU_ACCESS(a, bits / 8, 2);                                                                           \
    return __atomic_compare_exchange_n(a, expected, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);             \
  }                                                                                                            \
  CUDA_EMU_HOOK int __tsan_atomic##bits##_compare_exchange_weak(volatile T* a, T* expected, T v, int, int) {   \
    CUDA_EMU_ACCESS(a, bits / 8, 2);                                                                           \
    return __atomic_compare_exchange_n(a, expected, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);             \
  }                                                                                                            \
  CUDA_EMU_HOOK T __tsan_atomic##bits##_compare_exchange_val(volatile T* a, T expected, T v, int, int) {       \
    CUDA_EMU_ACCESS(a, bits / 8, 2);                                                                           \
    __atomic_compare_exchange_n(a, &expected, v, false, __ATOMIC_SEQ_CST, __ATOMIC_SEQ_CST);                   \
    return expected;                                                                                           \
  }
CUDA_EMU_ATOMIC_HOOKS(8, std::int8_t)
CUDA_EMU_ATOMIC_HOOKS(16, std::int16_t)
CUDA_EMU_ATOMIC_HOOKS(32, std::int32_t)
CUDA_EMU_ATOMIC_HOOKS(64, std::int64_t)
#undef CUDA_EMU_ATOMIC_HOOKS

CUDA_EMU_HOOK void __tsan_atomic_thread_fence(int) { __atomic_thread_fence(__ATOMIC_SEQ_CST); }
CUDA_EMU_HOOK void __tsan_atomic_signal_fence(int) { __atomic_signal_fence(__ATOMIC_SEQ_CST); }

#undef CUDA_EMU_ACCESS
#undef CUDA_EMU_HOOK

#endif  // CUDA_EMU_RACE_HOOKS
