// Devices. A tensor lives on the CPU or on a CUDA device. The CUDA device is served either by
// the real CUDA runtime or, in emulator builds, by the CPU-side CUDA emulator; core only sees a
// DeviceInterface (allocate, copy, fill) registered for the device type.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace define {

enum class DeviceType : std::uint8_t { CPU, CUDA };

struct Device {
  DeviceType type = DeviceType::CPU;
  int index = 0;

  static Device cpu() { return {DeviceType::CPU, 0}; }
  static Device cuda(int i = 0) { return {DeviceType::CUDA, i}; }
  bool is_cpu() const { return type == DeviceType::CPU; }
  bool is_cuda() const { return type == DeviceType::CUDA; }
  bool operator==(const Device&) const = default;
  std::string str() const { return is_cpu() ? "cpu" : "cuda:" + std::to_string(index); }
};

// Memory services a device backend provides to core. Pointers are device pointers of that
// backend. Copies between two devices go through the host by the caller when needed.
struct DeviceInterface {
  virtual ~DeviceInterface() = default;
  virtual void* allocate(std::size_t nbytes, int device_index) = 0;
  virtual void deallocate(void* ptr, std::size_t nbytes, int device_index) = 0;
  virtual void copy_to_host(void* host_dst, const void* dev_src, std::size_t nbytes) = 0;
  virtual void copy_from_host(void* dev_dst, const void* host_src, std::size_t nbytes) = 0;
  virtual void copy_device(void* dev_dst, const void* dev_src, std::size_t nbytes) = 0;
  virtual void memset_zero(void* dev_dst, std::size_t nbytes) = 0;
  virtual void synchronize() = 0;
};

// The CPU interface is built in; a CUDA backend (real or emulated) registers itself.
DeviceInterface& device_interface(DeviceType t);
void register_device_interface(DeviceType t, DeviceInterface* iface);
bool has_device(DeviceType t);

}  // namespace define
