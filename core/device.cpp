#include "core/device.h"

#include <array>
#include <cstring>

#include "core/cpu_allocator.h"
#include "core/error.h"

namespace define {
namespace {

struct CpuInterface final : DeviceInterface {
  void* allocate(std::size_t n, int) override { return CpuCachingAllocator::instance().allocate(n); }
  void deallocate(void* p, std::size_t n, int) override { CpuCachingAllocator::instance().deallocate(p, n); }
  void copy_to_host(void* d, const void* s, std::size_t n) override { if (n) std::memcpy(d, s, n); }
  void copy_from_host(void* d, const void* s, std::size_t n) override { if (n) std::memcpy(d, s, n); }
  void copy_device(void* d, const void* s, std::size_t n) override { if (n) std::memmove(d, s, n); }
  void memset_zero(void* d, std::size_t n) override { if (n) std::memset(d, 0, n); }
  void synchronize() override {}
};

std::array<DeviceInterface*, 2>& table() {
  static CpuInterface cpu;
  static std::array<DeviceInterface*, 2> t{&cpu, nullptr};
  return t;
}

}  // namespace

DeviceInterface& device_interface(DeviceType t) {
  DeviceInterface* i = table()[static_cast<int>(t)];
  if (!i)
    fail("device", "no CUDA backend is available in this build (configure with DEFINE_CUDA=ON "
                   "on a machine with a GPU, or use the emulator build)");
  return *i;
}

void register_device_interface(DeviceType t, DeviceInterface* iface) { table()[static_cast<int>(t)] = iface; }

bool has_device(DeviceType t) { return table()[static_cast<int>(t)] != nullptr; }

}  // namespace define
