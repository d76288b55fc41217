// CUDA devices: discovery, selection, and the DeviceInterface that lets core allocate and copy
// tensor storage on a GPU (memory comes from one caching allocator per device).
//
// This header includes no CUDA header, so host code can call it in any build; device.cpp
// itself is compiled only into the CUDA libraries (real CUDA, or the CPU emulator).
#pragma once

#include <string>

#include "kernels/cuda/caching_allocator.h"

namespace define::cuda {

// Number of usable CUDA devices; 0 when there is no driver or no GPU (never throws).
int device_count();

// Makes `index` the calling thread's current device. Throws define::Error
// "cuda: device 3 out of range (1 devices)" for a bad index.
void set_device(int index);
int current_device();

// Name from the device properties ("NVIDIA H100 80GB HBM3"); throws for a bad index.
std::string device_name(int index);

// Waits for all work queued on the current device.
void synchronize();

// The caching allocator serving device `index` (statistics, empty_cache). Throws for a bad
// index, in particular whenever device_count() is 0.
CachingDeviceAllocator& allocator(int index = 0);

// Registers the CUDA DeviceInterface with core when a device exists, so tensors can be created
// with Device::cuda(i). Returns false (and registers nothing) when device_count() is 0.
// Calling it again is harmless.
bool register_backend();

}  // namespace define::cuda
