// Devices. A tensor lives on the CPU, on a CUDA device (a GPU), or on the emulated CUDA device:
// the same CUDA kernels compiled by g++ and run on the CPU by the CUDA execution emulator
// (cuda_emu/), with host memory standing in for device memory. The emulated device is how every
// CUDA kernel is tested on machines without a GPU, and is always available once registered
// (kernels/devices.h); `cuda` exists only with a GPU and a CUDA build. Core only sees a
// DeviceInterface (allocate, copy, fill) registered for the device type.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace define {

enum class DeviceType : std::uint8_t { CPU, CUDA, Emu };
inline constexpr int kNumDeviceTypes = 3;

struct Device {
  DeviceType type = DeviceType::CPU;
  int index = 0;

  static Device cpu() { return {DeviceType::CPU, 0}; }
  static Device cuda(int i = 0) { return {DeviceType::CUDA, i}; }
  static Device emu(int i = 0) { return {DeviceType::Emu, i}; }
  bool is_cpu() const { return type == DeviceType::CPU; }
  bool is_cuda() const { return type == DeviceType::CUDA; }
  bool is_emu() const { return type == DeviceType::Emu; }
  bool operator==(const Device&) const = default;
  std::string str() const {
    if (is_cpu()) return "cpu";
    return (is_cuda() ? "cuda:" : "emu:") + std::to_string(index);
  }
  // Parses "cpu", "cuda", "cuda:1", "emu", "emu:0"; throws define::Error naming the string.
  static Device parse(const std::string& s);
};

// Memory services a device backend provides to core. Pointers are device pointers of that
// backend; `device_index` names the device whose memory they point into, which the backend makes
// current for the call (a copy or memset issued while another device is current would run on
// that device's stream, unordered with the kernels of the memory's own device). Copies between
// two backends go through the host by the caller when needed.
struct DeviceInterface {
  virtual ~DeviceInterface() = default;
  virtual void* allocate(std::size_t nbytes, int device_index) = 0;
  // Called from Storage's destructor, often while an exception unwinds the stack: it must not
  // throw (that would end the process with std::terminate and hide the first error).
  virtual void deallocate(void* ptr, std::size_t nbytes, int device_index) noexcept = 0;
  virtual void copy_to_host(void* host_dst, const void* dev_src, std::size_t nbytes, int device_index) = 0;
  virtual void copy_from_host(void* dev_dst, const void* host_src, std::size_t nbytes, int device_index) = 0;
  // Between two devices of this backend (or within one): memmove semantics.
  virtual void copy_device(void* dev_dst, int dst_index, const void* dev_src, int src_index, std::size_t nbytes) = 0;
  virtual void memset_zero(void* dev_dst, std::size_t nbytes, int device_index) = 0;
  virtual void synchronize(int device_index) = 0;
};

// The CPU interface is built in; the CUDA backends (real and emulated) register themselves
// (kernels/devices.h).
DeviceInterface& device_interface(DeviceType t);
void register_device_interface(DeviceType t, DeviceInterface* iface);
bool has_device(DeviceType t);

}  // namespace define
