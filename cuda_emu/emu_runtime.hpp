// CUDA execution emulator, part 6 of 6: the CUDA runtime subset. Device memory is host memory,
// 256-byte aligned and allocated by the malloc family, so ASan checks kernels' global accesses.
// Copies, memsets and launches are synchronous; work a library queues on a stream of its own is
// deferred until the stream is made to progress (emu_stream.hpp). Events record host time, which
// makes cudaEventElapsedTime meaningful.
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
#include "cuda_emu/emu_perf_model.hpp"
#include "cuda_emu/emu_runner.hpp"
#include "cuda_emu/emu_stream.hpp"
#include "cuda_emu/emu_types.hpp"


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
// Stricter than CUDA, which (with unified addressing) accepts them: a copy or memset of memory of
// a device other than the current one runs on the current device's stream, unordered with the
// kernels of the memory's own device. Such a call fails with cudaErrorInvalidValue and says why.
inline bool other_device(const void* p) {
  const int owner = owner_of(p);
  return owner >= 0 && owner != current_device();
}
inline bool refuse_other_device(const void* p, const char* call) {
  std::fprintf(stderr, "cuda_emu: %s of device %d's memory while device %d is current (make it current first)\n",
               call, owner_of(p), current_device());
  return true;
}
// A copy is refused when no device pointer of it belongs to the current device (a copy between
// two devices is fine from either one).
inline bool copy_on_other_device(void* dst, const void* src, const char* call) {
  const bool d = owner_of(dst) >= 0, s = owner_of(src) >= 0;
  if ((d && !other_device(dst)) || (s && !other_device(src)) || (!d && !s)) return false;
  return refuse_other_device(d ? dst : src, call);
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

inline cudaError_t cudaMemcpyAsync(void* dst, const void* src, std::size_t bytes, cudaMemcpyKind kind,
                                   cudaStream_t stream = nullptr) {
  if (int(kind) < 0 || int(kind) > 4) return cuda_emu::detail::status(cudaErrorInvalidMemcpyDirection);
  if (bytes == 0) return cudaSuccess;
  if (!dst || !src) return cuda_emu::detail::status(cudaErrorInvalidValue);
  if (cuda_emu::detail::copy_on_other_device(dst, src, "cudaMemcpy"))
    return cuda_emu::detail::status(cudaErrorInvalidValue);
  cuda_emu::detail::before_synchronous_op(stream);
  std::memmove(dst, src, bytes);
  return cudaSuccess;
}
inline cudaError_t cudaMemcpy(void* dst, const void* src, std::size_t bytes, cudaMemcpyKind kind) {
  return cudaMemcpyAsync(dst, src, bytes, kind, nullptr);
}
// Between two devices' memory (or within one): needs no current device.
inline cudaError_t cudaMemcpyPeer(void* dst, int dst_device, const void* src, int src_device, std::size_t bytes) {
  if (bytes == 0) return cudaSuccess;
  if (!dst || !src) return cuda_emu::detail::status(cudaErrorInvalidValue);
  const int n = cuda_emu::detail::device_count();
  if (dst_device < 0 || dst_device >= n || src_device < 0 || src_device >= n)
    return cuda_emu::detail::status(cudaErrorInvalidDevice);
  cuda_emu::detail::before_synchronous_op(nullptr);
  std::memmove(dst, src, bytes);
  return cudaSuccess;
}
inline cudaError_t cudaMemsetAsync(void* ptr, int value, std::size_t bytes, cudaStream_t stream = nullptr) {
  if (bytes == 0) return cudaSuccess;
  if (!ptr) return cuda_emu::detail::status(cudaErrorInvalidValue);
  if (cuda_emu::detail::other_device(ptr) && cuda_emu::detail::refuse_other_device(ptr, "cudaMemset"))
    return cuda_emu::detail::status(cudaErrorInvalidValue);
  cuda_emu::detail::before_synchronous_op(stream);
  std::memset(ptr, value, bytes);
  return cudaSuccess;
}
inline cudaError_t cudaMemset(void* ptr, int value, std::size_t bytes) {
  return cudaMemsetAsync(ptr, value, bytes, nullptr);
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
inline cudaError_t cudaDeviceSynchronize() {
  std::vector<CUstream_st*> streams;
  {
    auto& registry = cuda_emu::detail::StreamRegistry::instance();
    std::lock_guard<std::mutex> lock(registry.mu);
    streams.assign(registry.live.begin(), registry.live.end());
  }
  for (CUstream_st* s : streams) cuda_emu::detail::drain(s);
  return cudaSuccess;
}
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
  // The OS threads that run blocks; in profiling mode the profiled target GPU's multiprocessors, so
  // that grids sized from this count are those the target would get (emu_perf_model.hpp).
  const cuda_emu::GpuSpec* target = cuda_emu::profiling() ? cuda_emu::gpu_spec(cuda_emu::config().arch) : nullptr;
  prop->multiProcessorCount = target ? target->sms : int(cuda_emu::config().threads);
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

// --- streams and events (emu_stream.hpp) ---

namespace cuda_emu::detail {
// cudaStreamWaitEvent on a stream that is not the legacy one: the stream's later work waits until
// the event's stream has completed what the event marks.
struct StreamWaitWork final : StreamWork {
  CUstream_st* other;
  std::uint64_t other_id, target;
  StreamWaitWork(CUstream_st* o, std::uint64_t t) : other(o), other_id(o->id), target(t) {}
  bool advance() override {
    if (!StreamRegistry::instance().is_live(other, other_id)) return true;  // destroyed streams were drained
    if (other->completed < target) step(other);
    return other->completed >= target;
  }
};
inline bool event_pending(cudaEvent_t event) {
  return event->stream && StreamRegistry::instance().is_live(event->stream, event->stream_id) &&
         event->stream->completed < event->target;
}
}  // namespace cuda_emu::detail

inline cudaError_t cudaStreamCreateWithFlags(cudaStream_t* stream, unsigned flags) {
  if (!stream) return cuda_emu::detail::status(cudaErrorInvalidValue);
  *stream = new CUstream_st{};
  (*stream)->flags = flags;
  (*stream)->id = cuda_emu::detail::StreamRegistry::next_id();
  auto& registry = cuda_emu::detail::StreamRegistry::instance();
  std::lock_guard<std::mutex> lock(registry.mu);
  registry.live.insert(*stream);
  if (cuda_emu::detail::is_blocking(*stream)) ++registry.blocking;
  return cudaSuccess;
}
inline cudaError_t cudaStreamCreate(cudaStream_t* stream) { return cudaStreamCreateWithFlags(stream, 0); }
// Completes the stream's work first (CUDA lets it finish after the call returns).
inline cudaError_t cudaStreamDestroy(cudaStream_t stream) {
  if (!stream) return cuda_emu::detail::status(cudaErrorInvalidResourceHandle);
  cuda_emu::detail::drain(stream);
  {
    auto& registry = cuda_emu::detail::StreamRegistry::instance();
    std::lock_guard<std::mutex> lock(registry.mu);
    registry.live.erase(stream);
    if (cuda_emu::detail::is_blocking(stream)) --registry.blocking;
  }
  delete stream;
  return cudaSuccess;
}
inline cudaError_t cudaStreamSynchronize(cudaStream_t stream) {
  if (stream == nullptr) {
    cuda_emu::detail::drain_blocking_streams();
    return cudaSuccess;
  }
  cuda_emu::detail::drain(stream);
  return cudaSuccess;
}
inline cudaError_t cudaStreamQuery(cudaStream_t stream) {
  if (stream == nullptr) return cudaSuccess;
  if (!cuda_emu::detail::query_declines()) cuda_emu::detail::step(stream);
  return stream->queue.empty() ? cudaSuccess : cudaErrorNotReady;
}
inline cudaError_t cudaStreamWaitEvent(cudaStream_t stream, cudaEvent_t event, unsigned = 0) {
  if (!event) return cuda_emu::detail::status(cudaErrorInvalidResourceHandle);
  if (stream == event->stream) return cudaSuccess;  // stream order already
  if (stream == nullptr) {
    // The legacy stream is synchronous: its next operation may start only once the event's work is done.
    if (cuda_emu::detail::event_pending(event)) cuda_emu::detail::drain(event->stream, event->target);
    return cudaSuccess;
  }
  stream->legacy_seen = std::max(stream->legacy_seen, event->legacy_seq);
  if (cuda_emu::detail::event_pending(event)) {
    stream->queue.push_back(std::make_unique<cuda_emu::detail::StreamWaitWork>(event->stream, event->target));
    ++stream->enqueued;
  }
  return cudaSuccess;
}

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
inline cudaError_t cudaEventRecord(cudaEvent_t event, cudaStream_t stream = nullptr) {
  if (!event) return cuda_emu::detail::status(cudaErrorInvalidResourceHandle);
  event->when = std::chrono::steady_clock::now();
  event->recorded = true;
  event->stream = stream;
  if (stream == nullptr) {
    cuda_emu::detail::drain_blocking_streams();
    event->legacy_seq = cuda_emu::detail::legacy_ops().load(std::memory_order_relaxed);
  } else {
    event->stream_id = stream->id;
    event->target = stream->enqueued;
    event->legacy_seq = stream->legacy_seen;
  }
  return cudaSuccess;
}
inline cudaError_t cudaEventSynchronize(cudaEvent_t event) {
  if (!event) return cuda_emu::detail::status(cudaErrorInvalidResourceHandle);
  if (cuda_emu::detail::event_pending(event)) cuda_emu::detail::drain(event->stream, event->target);
  return cudaSuccess;
}
inline cudaError_t cudaEventQuery(cudaEvent_t event) {
  if (!event) return cuda_emu::detail::status(cudaErrorInvalidResourceHandle);
  if (!cuda_emu::detail::event_pending(event)) return cudaSuccess;
  if (!cuda_emu::detail::query_declines()) cuda_emu::detail::step(event->stream);
  return cuda_emu::detail::event_pending(event) ? cudaErrorNotReady : cudaSuccess;
}
inline cudaError_t cudaEventElapsedTime(float* ms, cudaEvent_t start, cudaEvent_t end) {
  if (!ms || !start || !end) return cuda_emu::detail::status(cudaErrorInvalidValue);
  if (!start->recorded || !end->recorded) return cuda_emu::detail::status(cudaErrorInvalidResourceHandle);
  *ms = std::chrono::duration<float, std::milli>(end->when - start->when).count();
  return cudaSuccess;
}
