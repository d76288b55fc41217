#include "core/device.h"

#include <array>
#include <cstring>

#include "core/cpu_allocator.h"
#include "core/error.h"

namespace define {
namespace {

struct CpuInterface final : DeviceInterface {
  void* allocate(std::size_t n, int) override { return CpuCachingAllocator::instance().allocate(n); }
  void deallocate(void* p, std::size_t n, int) noexcept override { CpuCachingAllocator::instance().deallocate(p, n); }
  void copy_to_host(void* d, const void* s, std::size_t n, int) override { if (n) std::memcpy(d, s, n); }
  void copy_from_host(void* d, const void* s, std::size_t n, int) override { if (n) std::memcpy(d, s, n); }
  void copy_device(void* d, int, const void* s, int, std::size_t n) override { if (n) std::memmove(d, s, n); }
  void memset_zero(void* d, std::size_t n, int) override { if (n) std::memset(d, 0, n); }
  void synchronize(int) override {}
};

std::array<DeviceInterface*, kNumDeviceTypes>& table() {
  static CpuInterface cpu;
  static std::array<DeviceInterface*, kNumDeviceTypes> t{&cpu, nullptr, nullptr};
  return t;
}

}  // namespace

DeviceInterface& device_interface(DeviceType t) {
  DeviceInterface* i = table()[static_cast<int>(t)];
  if (!i && t == DeviceType::CUDA)
    fail("device", "no CUDA device: this build has no CUDA backend (configure with DEFINE_CUDA=ON) "
                   "or no GPU was found; the emulated device 'emu' runs the CUDA kernels on the CPU");
  if (!i) fail("device", "the emulated CUDA device is not registered (call define::kernels::register_devices())");
  return *i;
}

void register_device_interface(DeviceType t, DeviceInterface* iface) { table()[static_cast<int>(t)] = iface; }

Device Device::parse(const std::string& s) {
  const auto colon = s.find(':');
  const std::string kind = s.substr(0, colon);
  int index = 0;
  if (colon != std::string::npos) {
    const std::string num = s.substr(colon + 1);
    if (num.empty() || num.size() > 4 || num.find_first_not_of("0123456789") != std::string::npos)
      fail("device", "bad device index in '{}' (expected e.g. cuda:0)", s);
    index = std::stoi(num);
  }
  if (kind == "cpu" && index == 0) return cpu();
  if (kind == "cuda") return cuda(index);
  if (kind == "emu") return emu(index);
  fail("device", "unknown device '{}' (expected cpu, cuda[:N] or emu)", s);
}

bool has_device(DeviceType t) { return table()[static_cast<int>(t)] != nullptr; }

}  // namespace define
