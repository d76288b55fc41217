// Device registration. Core knows devices only through the DeviceInterface registered for each
// type; this registers the CUDA backends:
//   * emu   the emulated CUDA device (the CUDA kernels run on the CPU by cuda_emu/), always;
//   * cuda  real GPUs, when this build has the nvcc-compiled backend and a GPU is present.
// Programs (the CLI, the test binaries) call it once at start-up; it is idempotent.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace define::kernels {

struct DeviceAvailability {
  bool emu = false;
  int emu_devices = 0;   // emu:0 .. emu:<n-1> (CUDA_EMU_DEVICES, default 2)
  int cuda_devices = 0;  // 0 without a GPU or without the CUDA build
};

DeviceAvailability register_devices();

// Whether this build contains the nvcc-compiled CUDA backend (DEFINE_CUDA=ON).
bool built_with_cuda();

}  // namespace define::kernels

namespace define::kernels {

// The emulated device's order of threads between barriers and of blocks: "forward", "reverse",
// "random:<seed>" or "race:<seed>" (random, plus thread switches at memory accesses;
// CUDA_EMU_SCHEDULE sets the initial one). A kernel with a missing __syncthreads, a race between
// blocks or a non-atomic update raced by several threads gives a different result under one of
// them. Throws define::Error for anything else. Not thread-safe: change it only while no kernel runs.
void set_emu_schedule(const std::string& schedule);
std::string emu_schedule();

// Sets a schedule for the guard's lifetime (tests).
class EmuScheduleGuard {
 public:
  explicit EmuScheduleGuard(const std::string& schedule) : previous_(emu_schedule()) { set_emu_schedule(schedule); }
  ~EmuScheduleGuard() { set_emu_schedule(previous_); }
  EmuScheduleGuard(const EmuScheduleGuard&) = delete;
  EmuScheduleGuard& operator=(const EmuScheduleGuard&) = delete;

 private:
  std::string previous_;
};

// The memory capacity of each emulated device in bytes (CUDA_EMU_MEMORY, e.g. "64M", sets the
// initial one; 0: the host's physical memory) and the bytes its cudaMalloc has handed out on
// device `device` (emu:<device>): what lets the out-of-memory path run in tests.
void set_emu_memory_capacity(std::size_t bytes);
std::size_t emu_memory_in_use(int device = 0);

// Kernel launches the emulated devices have run in this process: lets a test count the kernels
// an op takes (a 16-bit op with its own kernel launches no casts around it).
std::uint64_t emu_kernel_launches();
// Whether the emulated kernels carry the memory-access instrumentation the emulator's profiling
// mode records (cuda_emu/emu_profile.hpp): true in every build but the sanitizer and fuzz ones.
bool emu_kernels_profiled();

// Sets a capacity for the guard's lifetime (tests).
class EmuMemoryCapacityGuard {
 public:
  explicit EmuMemoryCapacityGuard(std::size_t bytes) { set_emu_memory_capacity(bytes); }
  ~EmuMemoryCapacityGuard() { set_emu_memory_capacity(0); }
  EmuMemoryCapacityGuard(const EmuMemoryCapacityGuard&) = delete;
  EmuMemoryCapacityGuard& operator=(const EmuMemoryCapacityGuard&) = delete;
};

// The emulated device's per-element kernels (elementwise, copy, gather) index in 32 bits when a
// launch's tensors allow it and in 64 bits otherwise (kernels/cuda/common.cuh); forcing 64 bits
// runs that path on tensors small enough for a test. Change it only while no kernel runs.
void set_emu_index64(bool force);
bool emu_index64();

// Forces 64-bit index math for the guard's lifetime (tests).
class EmuIndex64Guard {
 public:
  EmuIndex64Guard() : previous_(emu_index64()) { set_emu_index64(true); }
  ~EmuIndex64Guard() { set_emu_index64(previous_); }
  EmuIndex64Guard(const EmuIndex64Guard&) = delete;
  EmuIndex64Guard& operator=(const EmuIndex64Guard&) = delete;

 private:
  bool previous_;
};

}  // namespace define::kernels
