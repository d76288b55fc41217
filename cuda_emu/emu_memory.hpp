// CUDA execution emulator: its devices and their memory. The emulator has several devices
// (CUDA_EMU_DEVICES, default 2) so multi-GPU code runs in tests; the current device is per host
// thread, as in the CUDA runtime. Device memory is host memory, but every cudaMalloc block is
// recorded with the device that owns it, which lets launch() refuse a kernel argument pointing
// into another device's memory (on a GPU that kernel would fault) and gives each device a
// capacity (CUDA_EMU_MEMORY, e.g. "64M"; default the host's physical memory), so out-of-memory
// paths run in tests.
#pragma once

#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <map>
#include <mutex>
#include <vector>

namespace cuda_emu::detail {

inline constexpr int kMaxDevices = 16;

inline int device_count() {
  static const int n = [] {
    const char* v = std::getenv("CUDA_EMU_DEVICES");
    const int k = v ? std::atoi(v) : 2;
    return k < 1 ? 1 : (k > kMaxDevices ? kMaxDevices : k);
  }();
  return n;
}

inline int& current_device() {
  thread_local int device = 0;
  return device;
}

inline std::size_t host_physical_memory() {
  return std::size_t(sysconf(_SC_PHYS_PAGES)) * std::size_t(sysconf(_SC_PAGESIZE));
}

// "64M", "1G", "4096": bytes with an optional K / M / G (binary) suffix; 0 when malformed.
inline std::size_t parse_bytes(const char* text) {
  char* end = nullptr;
  const unsigned long long n = std::strtoull(text, &end, 10);
  if (end == text) return 0;
  switch (*end) {
    case '\0': return n;
    case 'K': case 'k': return end[1] ? 0 : n << 10;
    case 'M': case 'm': return end[1] ? 0 : n << 20;
    case 'G': case 'g': return end[1] ? 0 : n << 30;
    default: return 0;
  }
}

// Every live cudaMalloc block: its size and owning device, by start address.
struct MemoryLedger {
  struct Block {
    std::size_t size;
    int device;
  };
  std::mutex mu;
  std::map<std::uintptr_t, Block> blocks;
  std::vector<std::size_t> in_use = std::vector<std::size_t>(kMaxDevices, 0);
  std::size_t capacity = 0;  // per device; 0: the host's physical memory
};

inline MemoryLedger& ledger() {
  static MemoryLedger* l = [] {
    auto* m = new MemoryLedger();  // leaked: blocks may be freed after main returns
    if (const char* v = std::getenv("CUDA_EMU_MEMORY")) m->capacity = parse_bytes(v);
    return m;
  }();
  return *l;
}

inline std::size_t physical_memory() {
  const std::size_t cap = ledger().capacity;
  return cap ? cap : host_physical_memory();
}

// The device allocation holding address p as [lo, hi); false when p is in none (host memory).
inline bool device_block_of(const void* p, std::uintptr_t& lo, std::uintptr_t& hi) {
  const auto a = reinterpret_cast<std::uintptr_t>(p);
  MemoryLedger& l = ledger();
  std::lock_guard<std::mutex> lock(l.mu);
  auto it = l.blocks.upper_bound(a);
  if (it == l.blocks.begin()) return false;
  --it;
  if (a >= it->first + it->second.size) return false;
  lo = it->first;
  hi = it->first + it->second.size;
  return true;
}

// The device whose block holds address p, or -1 when p is in no device block (host memory).
inline int owner_of(const void* p) {
  const auto a = reinterpret_cast<std::uintptr_t>(p);
  MemoryLedger& l = ledger();
  std::lock_guard<std::mutex> lock(l.mu);
  auto it = l.blocks.upper_bound(a);
  if (it == l.blocks.begin()) return -1;
  --it;
  return a < it->first + it->second.size ? it->second.device : -1;
}

}  // namespace cuda_emu::detail

namespace cuda_emu {
// The capacity of each emulated device (0: the host's physical memory); cudaMalloc beyond it fails
// with cudaErrorMemoryAllocation.
inline void set_memory_capacity(std::size_t bytes) {
  std::lock_guard<std::mutex> lock(detail::ledger().mu);
  detail::ledger().capacity = bytes;
}
inline std::size_t memory_capacity() { return detail::physical_memory(); }
// Bytes cudaMalloc has handed out on `device` (-1: the calling thread's current device).
inline std::size_t memory_in_use(int device = -1) {
  if (device < 0) device = detail::current_device();
  std::lock_guard<std::mutex> lock(detail::ledger().mu);
  return detail::ledger().in_use[std::size_t(device)];
}
}  // namespace cuda_emu
