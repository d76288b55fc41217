// CUDA execution emulator: the asynchronous global-to-shared copies of sm_80 that
// kernels/cuda/async_copy.cuh wraps (PTX ISA, "Data Movement and Conversion Instructions: cp.async"):
//
//   cp.async.cg.shared.global [dst], [src], cp_size, src_size   cp_async()
//   cp.async.commit_group                                       cp_async_commit()
//   cp.async.wait_group N                                       cp_async_wait(N)
//
//  * A copy reads its source when it is issued (the profile records the global read there, as the
//    cp.async instruction's) and its bytes land in shared memory when the issuing thread waits for
//    its group, not before: a thread that reads the destination earlier sees what was there (NaN
//    in debug mode, which fills it when the copy is issued), as a GPU may show it. Other threads
//    see the bytes after the issuing thread's wait and a barrier, the only order a GPU promises.
//  * Groups: commit_group closes the thread's copies issued since the last commit into a group;
//    wait_group N lands every committed group but the N most recent ones. Copies not committed are
//    not waited for (cp.async.wait_all is commit_group then wait_group 0).
//  * Checks (the launch fails naming the call site): cp_size 4, 8 or 16 and src_size at most
//    cp_size (bytes past src_size are zeros); dst inside one shared array and aligned to cp_size;
//    src aligned to cp_size and not shared memory.
//  * Before sm_80 there is no such instruction: the kernels' wrapper then copies at once, and so does
//    the emulator when it emulates an older architecture (commit and wait do nothing there).
//  * Copies a thread never waits for are dropped when its block ends (reading them would be a bug).
#pragma once

#include <cstdint>
#include <cstring>
#include <string>

#include "cuda_emu/emu_device.hpp"
#include "cuda_emu/emu_runner.hpp"

namespace cuda_emu::detail {

// Lands the current thread's committed copies of groups up to `last` (in issue order).
__attribute__((no_sanitize_thread)) inline void land_copies(Runner& r, std::uint32_t last) {
  Slot& s = r.current_slot();
  std::size_t kept = 0;
  for (std::size_t i = 0; i < s.copies.size(); ++i) {
    AsyncCopy& c = s.copies[i];
    if (c.group != 0 && c.group <= last) {
      // The shared-memory side of the instruction: its own pc, so that it pairs across lanes apart
      // from the global reads.
      r.access_hook(c.dst, c.bytes, kWrite | kAsync, static_cast<const char*>(c.pc) + 1);
      std::memcpy(c.dst, c.data, c.bytes);
    } else {
      s.copies[kept++] = c;
    }
  }
  s.copies.resize(kept);
}

}  // namespace cuda_emu::detail

namespace cuda_emu {

// cp.async.cg.shared.global [dst], [src], cp_size, src_size. Not inlined: its return address is the
// kernel's call site, which the profile uses as the instruction.
__attribute__((noinline, no_sanitize_thread)) inline void cp_async(void* dst, const void* src, unsigned cp_size,
                                                                   unsigned src_size, const char* file, int line) {
  using namespace detail;
  const void* pc = __builtin_return_address(0);
  Runner& r = current_runner("cp.async");
  const char* op = "cp.async.cg.shared.global";
  std::string message;
  if (cp_size != 4 && cp_size != 8 && cp_size != 16) {
    message = cat(op, " (", call_site(file, line), "): copies 4, 8 or 16 bytes, not ", cp_size);
  } else if (src_size > cp_size) {
    message = cat(op, " (", call_site(file, line), "): src_size ", src_size, " is more than cp_size ", cp_size);
  } else if (reinterpret_cast<std::uintptr_t>(dst) % cp_size != 0 ||
             reinterpret_cast<std::uintptr_t>(src) % cp_size != 0) {
    message = cat(op, " (", call_site(file, line), "): ", r.current_thread(), " gives a ",
                  reinterpret_cast<std::uintptr_t>(dst) % cp_size != 0 ? "destination" : "source",
                  " that is not aligned to its ", cp_size, " bytes");
  } else if (std::string problem = r.shared_span_problem(dst, cp_size); !problem.empty()) {
    message = cat(op, " (", call_site(file, line), "): ", r.current_thread(),
                  " gives a destination that is not inside one shared array: ", problem);
  } else if (src_size > 0 && r.shared_span_problem(src, src_size).empty()) {
    message = cat(op, " (", call_site(file, line), "): ", r.current_thread(),
                  " gives a source in shared memory (it copies global memory)");
  }
  if (!message.empty()) r.fail(std::move(message));

  AsyncCopy c;
  c.dst = dst;
  c.pc = pc;
  c.bytes = cp_size;
  // Before sm_80 the wrapper's plain load and store, which the profile sees as such; from sm_80 an
  // asynchronous read, in flight until the thread's wait (the profile's loads in flight).
  const bool async = r.arch() >= 80;
  if (src_size > 0) {
    r.access_hook(src, src_size, async ? kAsync : kRead, pc);
    std::memcpy(c.data, src, src_size);
  }
  if (!async) {
    r.access_hook(dst, cp_size, 1, static_cast<const char*>(pc) + 1);
    std::memcpy(dst, c.data, cp_size);
    return;
  }
  if (r.debug()) std::memset(dst, 0xFF, cp_size);  // in flight: not yet the source's bytes
  r.current_slot().copies.push_back(c);
}

// cp.async.commit_group.
__attribute__((no_sanitize_thread)) inline void cp_async_commit() {
  detail::Runner& r = detail::current_runner("cp.async.commit_group");
  if (r.arch() < 80) return;
  detail::Slot& s = r.current_slot();
  const std::uint32_t group = ++s.copy_groups;  // with no copies, an empty group: wait_group counts it
  for (detail::AsyncCopy& c : s.copies)
    if (c.group == 0) c.group = group;
}

// cp.async.wait_group n: every committed group but the n most recent has landed.
__attribute__((no_sanitize_thread)) inline void cp_async_wait(unsigned n) {
  detail::Runner& r = detail::current_runner("cp.async.wait_group");
  if (r.arch() < 80) return;
  const std::uint32_t groups = r.current_slot().copy_groups;
  if (groups > n) detail::land_copies(r, groups - n);
}

}  // namespace cuda_emu
