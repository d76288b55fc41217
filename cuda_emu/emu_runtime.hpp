// CUDA execution emulator, part 6 of 6: the CUDA runtime subset. Device memory is host memory,
// 256-byte aligned and allocated by the malloc family, so ASan checks kernels' global accesses.
// Copies, memsets and launches are synchronous, so streams and events do no asynchronous work
// (events record host time, which makes cudaEventElapsedTime meaningful).
// Devices with plausible sm_90-like properties; how many, and their memory: emu_memory.hpp.
#pragma once

#include <unistd.h>

#include <chrono>
#include <cstddef>
#include <cstdlib>
#include <cstring>
#include <mutex>
#include <unordered_map>

#include "cuda_emu/emu_launch.hpp"
#include "cuda_emu/emu_memory.hpp"
#include "cuda_emu/emu_runner.hpp"
#include "cuda_emu/emu_types.hpp"

struct CUstream_st {
  unsigned flags = 0;
};
struct CUevent_st {
  std::chrono::steady_clock::time_point when{};
  bool recorded = false;
};

enum cudaFuncAttribute {
  cudaFuncAttributeMaxDynamicSharedMemorySize = 8,
  cudaFuncAttributePreferredSharedMemoryCarveout = 9,
};
enum cudaDeviceAttr {
  cudaDevAttrMaxThreadsPerBlock = 1,
  cudaDevAttrMaxSharedMemoryPerBlock = 8,
  cudaDevAttrWarpSize = 10,
  cudaDevAttrMultiProcessorCount = 16,
  cudaDevAttrComputeCapabilityMajor = 75,
  cudaDevAttrComputeCapabilityMinor = 76,
  cudaDevAttrMaxSharedMemoryPerBlockOptin = 97,
};

inline constexpr unsigned cudaStreamDefault = 0x0;
inline constexpr unsigned cudaStreamNonBlocking = 0x1;
inline constexpr unsigned cudaEventDefault = 0x0;
inline constexpr unsigned cudaEventBlockingSync = 0x1;
inline constexpr unsigned cudaEventDisableTiming = 0x2;

// The commonly used fields of the runtime's cudaDeviceProp.
struct cudaDeviceProp {
  char name[256];
  std::size_t totalGlobalMem;
  std::size_t sharedMemPerBlock;
  int regsPerBlock;
  int warpSize;
  int maxThreadsPerBlock;
  int maxThreadsDim[3];
  int maxGridSize[3];
  int clockRate;
  std::size_t totalConstMem;
  int major;
  int minor;
  int multiProcessorCount;
  int maxThreadsPerMultiProcessor;
  int l2CacheSize;
  int memoryBusWidth;
  std::size_t sharedMemPerBlockOptin;
  std::size_t sharedMemPerMultiprocessor;
  int regsPerMultiprocessor;
  int concurrentKernels;
};

namespace cuda_emu::detail {
inline cudaError_t status(cudaError_t e) {
  set_last_error(e);
  return e;
}
}  // namespace cuda_emu::detail

inline const char* cudaGetErrorName(cudaError_t e) {
  switch (e) {
    case cudaSuccess: return "cudaSuccess";
    case cudaErrorInvalidValue: return "cudaErrorInvalidValue";
    case cudaErrorMemoryAllocation: return "cudaErrorMemoryAllocation";
    case cudaErrorInitializationError: return "cudaErrorInitializationError";
    case cudaErrorInvalidConfiguration: return "cudaErrorInvalidConfiguration";
    case cudaErrorInvalidMemcpyDirection: return "cudaErrorInvalidMemcpyDirection";
    case cudaErrorNoDevice: return "cudaErrorNoDevice";
    case cudaErrorInvalidDevice: return "cudaErrorInvalidDevice";
    case cudaErrorInvalidResourceHandle: return "cudaErrorInvalidResourceHandle";
    case cudaErrorNotReady: return "cudaErrorNotReady";
    case cudaErrorIllegalAddress: return "cudaErrorIllegalAddress";
    case cudaErrorLaunchOutOfResources: return "cudaErrorLaunchOutOfResources";
    case cudaErrorLaunchFailure: return "cudaErrorLaunchFailure";
    case cudaErrorNotSupported: return "cudaErrorNotSupported";
    case cudaErrorUnknown: return "cudaErrorUnknown";
  }
  return "cudaErrorUnknown";
}

inline const char* cudaGetErrorString(cudaError_t e) {
  switch (e) {
    case cudaSuccess: return "no error";
    case cudaErrorInvalidValue: return "invalid argument";
    case cudaErrorMemoryAllocation: return "out of memory";
    case cudaErrorInitializationError: return "initialization error";
    case cudaErrorInvalidConfiguration: return "invalid configuration argument";
    case cudaErrorInvalidMemcpyDirection: return "invalid copy direction for memcpy";
    case cudaErrorNoDevice: return "no CUDA-capable device is detected";
    case cudaErrorInvalidDevice: return "invalid device ordinal";
    case cudaErrorInvalidResourceHandle: return "invalid resource handle";
    case cudaErrorNotReady: return "device not ready";
    case cudaErrorIllegalAddress: return "an illegal memory access was encountered";
    case cudaErrorLaunchOutOfResources: return "too many resources requested for launch";
    case cudaErrorLaunchFailure: return "unspecified launch failure";
    case cudaErrorNotSupported: return "operation not supported";
    case cudaErrorUnknown: return "unknown error";
  }
  return "unrecognized error code";
}

inline cudaError_t cudaGetLastError() {
  cudaError_t e = cuda_emu::detail::last_error;
  cuda_emu::detail::last_error = cudaSuccess;
  return e;
}
inline cudaError_t cudaPeekAtLastError() { return cuda_emu::detail::last_error; }

// --- memory ---

inline cudaError_t cudaMalloc(void** ptr, std::size_t bytes) {
  if (!ptr) return cuda_emu::detail::status(cudaErrorInvalidValue);
  *ptr = nullptr;
  if (bytes == 0) return cudaSuccess;
  cuda_emu::detail::MemoryLedger& l = cuda_emu::detail::ledger();
  const int device = cuda_emu::detail::current_device();
  std::lock_guard<std::mutex> lock(l.mu);
  std::size_t& in_use = l.in_use[std::size_t(device)];
  if (l.capacity && bytes > l.capacity - in_use) return cuda_emu::detail::status(cudaErrorMemoryAllocation);
  // 256-byte aligned like cudaMalloc, but not padded: AddressSanitizer then sees every overflow.
  if (posix_memalign(ptr, 256, bytes) != 0) {
    *ptr = nullptr;
    return cuda_emu::detail::status(cudaErrorMemoryAllocation);
  }
  l.blocks.emplace(reinterpret_cast<std::uintptr_t>(*ptr), cuda_emu::detail::MemoryLedger::Block{bytes, device});
  in_use += bytes;
  return cudaSuccess;
}
template <typename T>
inline cudaError_t cudaMalloc(T** ptr, std::size_t bytes) {
  return cudaMalloc(reinterpret_cast<void**>(ptr), bytes);
}
inline cudaError_t cudaFree(void* ptr) {
  if (!ptr) return cudaSuccess;
  cuda_emu::detail::MemoryLedger& l = cuda_emu::detail::ledger();
  {
    std::lock_guard<std::mutex> lock(l.mu);
    const auto it = l.blocks.find(reinterpret_cast<std::uintptr_t>(ptr));
    if (it == l.blocks.end()) return cuda_emu::detail::status(cudaErrorInvalidValue);  // not from cudaMalloc
    l.in_use[std::size_t(it->second.device)] -= it->second.size;
    l.blocks.erase(it);
  }
  std::free(ptr);
  return cudaSuccess;
}
// Pinned host memory is host memory: it does not count against the device.
inline cudaError_t cudaMallocHost(void** ptr, std::size_t bytes) {
  if (!ptr) return cuda_emu::detail::status(cudaErrorInvalidValue);
  *ptr = nullptr;
  if (bytes && posix_memalign(ptr, 256, bytes) != 0) {
    *ptr = nullptr;
    return cuda_emu::detail::status(cudaErrorMemoryAllocation);
  }
  return cudaSuccess;
}
template <typename T>
inline cudaError_t cudaMallocHost(T** ptr, std::size_t bytes) {
  return cudaMallocHost(reinterpret_cast<void**>(ptr), bytes);
}
inline cudaError_t cudaFreeHost(void* ptr) {
  std::free(ptr);
  return cudaSuccess;
}

inline cudaError_t cudaMemcpy(void* dst, const void* src, std::size_t bytes, cudaMemcpyKind kind) {
  if (int(kind) < 0 || int(kind) > 4) return cuda_emu::detail::status(cudaErrorInvalidMemcpyDirection);
  if (bytes == 0) return cudaSuccess;
  if (!dst || !src) return cuda_emu::detail::status(cudaErrorInvalidValue);
  std::memmove(dst, src, bytes);
  return cudaSuccess;
}
inline cudaError_t cudaMemcpyAsync(void* dst, const void* src, std::size_t bytes, cudaMemcpyKind kind,
                                   cudaStream_t = nullptr) {
  return cudaMemcpy(dst, src, bytes, kind);
}
inline cudaError_t cudaMemset(void* ptr, int value, std::size_t bytes) {
  if (bytes == 0) return cudaSuccess;
  if (!ptr) return cuda_emu::detail::status(cudaErrorInvalidValue);
  std::memset(ptr, value, bytes);
  return cudaSuccess;
}
inline cudaError_t cudaMemsetAsync(void* ptr, int value, std::size_t bytes, cudaStream_t = nullptr) {
  return cudaMemset(ptr, value, bytes);
}
inline cudaError_t cudaMemGetInfo(std::size_t* free_bytes, std::size_t* total_bytes) {
  if (!free_bytes || !total_bytes) return cuda_emu::detail::status(cudaErrorInvalidValue);
  *total_bytes = cuda_emu::detail::physical_memory();
  *free_bytes = cuda_emu::detail::ledger().capacity
                    ? *total_bytes - cuda_emu::memory_in_use()
                    : std::size_t(sysconf(_SC_AVPHYS_PAGES)) * std::size_t(sysconf(_SC_PAGESIZE));
  return cudaSuccess;
}

// --- device ---

inline cudaError_t cudaGetDeviceCount(int* count) {
  if (!count) return cuda_emu::detail::status(cudaErrorInvalidValue);
  *count = cuda_emu::detail::device_count();
  return cudaSuccess;
}
inline cudaError_t cudaSetDevice(int device) {
  if (device < 0 || device >= cuda_emu::detail::device_count())
    return cuda_emu::detail::status(cudaErrorInvalidDevice);
  cuda_emu::detail::current_device() = device;
  return cudaSuccess;
}
inline cudaError_t cudaGetDevice(int* device) {
  if (!device) return cuda_emu::detail::status(cudaErrorInvalidValue);
  *device = cuda_emu::detail::current_device();
  return cudaSuccess;
}
inline cudaError_t cudaDeviceSynchronize() { return cudaSuccess; }
inline cudaError_t cudaDeviceReset() { return cudaSuccess; }

inline cudaError_t cudaGetDeviceProperties(cudaDeviceProp* prop, int device) {
  if (!prop) return cuda_emu::detail::status(cudaErrorInvalidValue);
  if (device < 0 || device >= cuda_emu::detail::device_count())
    return cuda_emu::detail::status(cudaErrorInvalidDevice);
  *prop = cudaDeviceProp{};
  std::strncpy(prop->name, "cuda_emu CPU emulator", sizeof prop->name - 1);
  prop->totalGlobalMem = cuda_emu::detail::physical_memory();
  prop->sharedMemPerBlock = 48 * 1024;
  prop->regsPerBlock = 65536;
  prop->warpSize = 32;
  prop->maxThreadsPerBlock = 1024;
  prop->maxThreadsDim[0] = 1024;
  prop->maxThreadsDim[1] = 1024;
  prop->maxThreadsDim[2] = 64;
  prop->maxGridSize[0] = 2147483647;
  prop->maxGridSize[1] = 65535;
  prop->maxGridSize[2] = 65535;
  prop->clockRate = 1000000;
  prop->totalConstMem = 64 * 1024;
  cuda_emu::ArchLimits arch;
  cuda_emu::arch_limits(cuda_emu::config().arch, arch);
  prop->major = arch.major;
  prop->minor = arch.minor;
  prop->multiProcessorCount = int(cuda_emu::config().threads);
  prop->maxThreadsPerMultiProcessor = 2048;
  prop->l2CacheSize = 50 * 1024 * 1024;
  prop->memoryBusWidth = 5120;
  prop->sharedMemPerBlockOptin = arch.smem_optin;
  prop->sharedMemPerMultiprocessor = 228 * 1024;
  prop->regsPerMultiprocessor = 65536;
  prop->concurrentKernels = 1;
  return cudaSuccess;
}

inline cudaError_t cudaDeviceGetAttribute(int* value, cudaDeviceAttr attr, int device) {
  cudaDeviceProp p;
  if (!value) return cuda_emu::detail::status(cudaErrorInvalidValue);
  if (cudaError_t e = cudaGetDeviceProperties(&p, device); e != cudaSuccess) return e;
  switch (attr) {
    case cudaDevAttrMaxThreadsPerBlock: *value = p.maxThreadsPerBlock; break;
    case cudaDevAttrMaxSharedMemoryPerBlock: *value = int(p.sharedMemPerBlock); break;
    case cudaDevAttrWarpSize: *value = p.warpSize; break;
    case cudaDevAttrMultiProcessorCount: *value = p.multiProcessorCount; break;
    case cudaDevAttrComputeCapabilityMajor: *value = p.major; break;
    case cudaDevAttrComputeCapabilityMinor: *value = p.minor; break;
    case cudaDevAttrMaxSharedMemoryPerBlockOptin: *value = int(p.sharedMemPerBlockOptin); break;
    default: return cuda_emu::detail::status(cudaErrorInvalidValue);
  }
  return cudaSuccess;
}

// The dynamic shared memory opt-in is recorded per kernel and bounded by the configured
// architecture (CUDA_EMU_ARCH), as on the GPU: launches above 48 KiB need it. The carveout
// preference is accepted and has no effect.
template <typename F>
inline cudaError_t cudaFuncSetAttribute(F* kernel, cudaFuncAttribute attr, int value) {
  if (attr != cudaFuncAttributeMaxDynamicSharedMemorySize) return cudaSuccess;
  cuda_emu::ArchLimits arch;
  cuda_emu::arch_limits(cuda_emu::config().arch, arch);
  if (!kernel || value < 0 || std::size_t(value) > arch.smem_optin)
    return cuda_emu::detail::status(cudaErrorInvalidValue);
  cuda_emu::detail::SmemOptins::instance().set(reinterpret_cast<const void*>(kernel), std::size_t(value));
  return cudaSuccess;
}

// --- streams and events (no asynchronous work) ---

inline cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned flags) {
  if (!stream) return cuda_emu::detail::status(cudaErrorInvalidValue);
  *stream = new CUstream_st{flags};
  return cudaSuccess;
}
inline cudaError_t cudaStreamCreate(cudaStream_t* stream) { return cudaStreamCreateWithFlags(stream, 0); }
inline cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  delete stream;
  return cudaSuccess;
}
inline cudaError_t cudaStreamSynchronize(cudaStream_t) { return cudaSuccess; }
inline cudaError_t cudaStreamQuery(cudaStream_t) { return cudaSuccess; }
inline cudaError_t cudaStreamWaitEvent(cudaStream_t, cudaEvent_t, unsigned = 0) { return cudaSuccess; }

inline cudaError_t cudaEventCreateWithFlags(cudaEvent_t* event, unsigned) {
  if (!event) return cuda_emu::detail::status(cudaErrorInvalidValue);
  *event = new CUevent_st{};
  return cudaSuccess;
}
inline cudaError_t cudaEventCreate(cudaEvent_t* event) { return cudaEventCreateWithFlags(event, 0); }
inline cudaError_t cudaEventDestroy(cudaEvent_t event) {
  delete event;
  return cudaSuccess;
}
inline cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t = nullptr) {
  if (!event) return cuda_emu::detail::status(cudaErrorInvalidResourceHandle);
  event->when = std::chrono::steady_clock::now();
  event->recorded = true;
  return cudaSuccess;
}
inline cudaError_t cudaEventSynchronize(cudaEvent_t event) {
  return event ? cudaSuccess : cuda_emu::detail::status(cudaErrorInvalidResourceHandle);
}
inline cudaError_t cudaEventQuery(cudaEvent_t event) {
  return event ? cudaSuccess : cuda_emu::detail::status(cudaErrorInvalidResourceHandle);
}
inline cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end) {
  if (!ms || !start || !end) return cuda_emu::detail::status(cudaErrorInvalidValue);
  if (!start->recorded || !end->recorded) return cuda_emu::detail::status(cudaErrorInvalidResourceHandle);
  *ms = std::chrono::duration<float, std::milli>(end->when - start->when).count();
  return cudaSuccess;
}
