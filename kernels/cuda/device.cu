// Device management and the DeviceInterface for CUDA tensors. Compiled twice (see device.h): by
// nvcc into define::cuda, serving Device::cuda(i) from real GPUs, and by g++ against the CUDA
// emulator's runtime shim into define::cuda_emu, serving Device::emu() from host memory. The code
// is the same; only the runtime under it differs, which is what lets the caching allocator and
// the copy paths be exercised on machines without a GPU.
#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <mutex>
#include <vector>

#include "core/device.h"
#include "core/error.h"
#include "kernels/cuda/check.h"
#include "kernels/cuda/current_device_guard.h"
#include "kernels/cuda/device.h"
#include "kernels/devices.h"

namespace define::DEFINE_CUDA_NS {
namespace {

using ::define::cuda::CachingDeviceAllocator;
using ::define::cuda::RawDeviceMemory;

#if defined(__CUDACC__)
constexpr DeviceType kDeviceType = DeviceType::CUDA;
constexpr const char* kBackendName = "cuda";  // the op name in this backend's error messages
#else
constexpr DeviceType kDeviceType = DeviceType::Emu;
constexpr const char* kBackendName = "emu";
#endif

// DEFINE_CUDA_CACHE=0 gives every tensor its own cudaMalloc (PyTorch's
// PYTORCH_NO_CUDA_MEMORY_CACHING): slower, but on the emulated device AddressSanitizer then sees
// each tensor's exact bounds, so a kernel reading past its input is caught.
bool caching_enabled() {
  static const bool on = [] {
    const char* v = std::getenv("DEFINE_CUDA_CACHE");
    return !(v && std::strcmp(v, "0") == 0);
  }();
  return on;
}

int query_device_count() {
  int n = 0;
  // Without a driver or a GPU this returns an error (cudaErrorNoDevice,
  // cudaErrorInsufficientDriver, ...): that simply means "no CUDA devices".
  if (cudaGetDeviceCount(&n) != cudaSuccess) {
    (void)cudaGetLastError();  // do not leave the failure behind for a later error check
    return 0;
  }
  return n;
}

void check_index(int index) {
  const int n = device_count();
  DEFINE_CHECK(index >= 0 && index < n, kBackendName, "device {} out of range ({} devices)", index, n);
}

// Segments are allocated on (and freed from) the device they belong to, whatever device the
// calling thread has selected.
using DeviceGuard = CurrentDeviceGuard;

// Segments for one device come straight from cudaMalloc.
class CudaRawMemory final : public RawDeviceMemory {
 public:
  explicit CudaRawMemory(int index) : index_(index) {}

  void* raw_malloc(std::size_t nbytes) override {
    DeviceGuard guard(index_);
    void* p = nullptr;
    const cudaError_t err = cudaMalloc(&p, nbytes);
    if (err == cudaErrorMemoryAllocation) {
      (void)cudaGetLastError();  // out of memory is an answer, not a pending error
      return nullptr;
    }
    DEFINE_CUDA_CHECK(err);
    return p;
  }

  void raw_free(void* ptr) override {
    DeviceGuard guard(index_);
    DEFINE_CUDA_CHECK(cudaFree(ptr));
  }

  // Events of this device; timing off, the allocator only asks whether they have completed.
  ::define::cuda::EventId event_create() override {
    DeviceGuard guard(index_);
    cudaEvent_t event = nullptr;
    DEFINE_CUDA_CHECK(cudaEventCreateWithFlags(&event, cudaEventDisableTiming));
    return event;
  }
  void event_record(::define::cuda::EventId event, ::define::cuda::StreamId stream) override {
    DeviceGuard guard(index_);
    DEFINE_CUDA_CHECK(cudaEventRecord(static_cast<cudaEvent_t>(event), static_cast<cudaStream_t>(stream)));
  }
  bool event_query(::define::cuda::EventId event) override {
    const cudaError_t err = cudaEventQuery(static_cast<cudaEvent_t>(event));
    if (err == cudaErrorNotReady) {
      (void)cudaGetLastError();  // "not yet" is an answer, not a pending error
      return false;
    }
    DEFINE_CUDA_CHECK(err);
    return true;
  }
  void event_destroy(::define::cuda::EventId event) noexcept override {
    (void)cudaEventDestroy(static_cast<cudaEvent_t>(event));  // nothing to do about a failure here
  }

 private:
  int index_;
};

// One raw source and one caching allocator per device, created on first use and never
// destroyed: tensors held by static objects may release their storage after main returns.
struct DeviceState {
  std::unique_ptr<CudaRawMemory> raw;
  std::unique_ptr<CachingDeviceAllocator> allocator;
};

std::vector<DeviceState>& device_states() {
  static auto* states = [] {
    auto* v = new std::vector<DeviceState>(static_cast<std::size_t>(device_count()));
    for (std::size_t i = 0; i < v->size(); ++i) {
      (*v)[i].raw = std::make_unique<CudaRawMemory>(static_cast<int>(i));
      (*v)[i].allocator =
          std::make_unique<CachingDeviceAllocator>(*(*v)[i].raw, Device{kDeviceType, static_cast<int>(i)}.str());
    }
    return v;
  }();
  return *states;
}

std::atomic<std::uint64_t> d2h_copies{0};

struct CudaInterface final : DeviceInterface {
  // Storage carries no stream: all of it is allocated for, and used on, the default stream.
  void* allocate(std::size_t nbytes, int index) override {
    if (caching_enabled()) return allocator(index).allocate(nbytes, nullptr);
    void* p = (check_index(index), device_states()[static_cast<std::size_t>(index)]).raw->raw_malloc(nbytes ? nbytes : 1);
    if (!p) fail(Device{kDeviceType, index}.str(), "out of memory allocating {} bytes", nbytes);
    return p;
  }
  void deallocate(void* ptr, std::size_t, int index) noexcept override {
    try {
      if (caching_enabled()) allocator(index).deallocate(ptr);
      else device_states()[static_cast<std::size_t>(index)].raw->raw_free(ptr);
    } catch (const std::exception& e) {
      // After a kernel fault every CUDA call returns the fault again, and tensors are freed while
      // the first error propagates: report the lost block and go on, so that error is the one
      // the user sees. The block is leaked.
      std::fprintf(stderr, "define: freeing %p on %s failed (the block is leaked): %s\n", ptr,
                   Device{kDeviceType, index}.str().c_str(), e.what());
    }
  }

  void copy_to_host(void* host_dst, const void* dev_src, std::size_t n, int index) override {
    if (!n) return;
    d2h_copies.fetch_add(1, std::memory_order_relaxed);
    DeviceGuard guard(index);
    DEFINE_CUDA_CHECK(cudaMemcpy(host_dst, dev_src, n, cudaMemcpyDeviceToHost));
    // The copy waited for the device: a bad index found by a kernel before it is reported here,
    // before the host acts on values computed from it.
    raise_index_errors();
  }
  void copy_from_host(void* dev_dst, const void* host_src, std::size_t n, int index) override {
    if (!n) return;
    DeviceGuard guard(index);
    DEFINE_CUDA_CHECK(cudaMemcpy(dev_dst, host_src, n, cudaMemcpyHostToDevice));
  }
  void copy_device(void* dev_dst, int dst_index, const void* dev_src, int src_index, std::size_t n) override {
    if (!n || dev_dst == dev_src) return;
    DeviceGuard guard(dst_index);
    if (dst_index != src_index) {  // two devices never overlap
      DEFINE_CUDA_CHECK(cudaMemcpyPeer(dev_dst, dst_index, dev_src, src_index, n));
      return;
    }
    const auto* d = static_cast<const char*>(dev_dst);
    const auto* s = static_cast<const char*>(dev_src);
    const std::less<const char*> before;
    const bool overlap = before(d, s + n) && before(s, d + n);
    if (!overlap) {
      DEFINE_CUDA_CHECK(cudaMemcpy(dev_dst, dev_src, n, cudaMemcpyDeviceToDevice));
      return;
    }
    // cudaMemcpy leaves overlapping ranges undefined, but core expects memmove semantics
    // (like the CPU interface): go through a scratch block on the same device.
    CachingDeviceAllocator& alloc = allocator(dst_index);
    void* scratch = alloc.allocate(n, nullptr);
    try {
      DEFINE_CUDA_CHECK(cudaMemcpy(scratch, dev_src, n, cudaMemcpyDeviceToDevice));
      DEFINE_CUDA_CHECK(cudaMemcpy(dev_dst, scratch, n, cudaMemcpyDeviceToDevice));
    } catch (...) {
      alloc.deallocate(scratch);
      throw;
    }
    alloc.deallocate(scratch);  // stream-ordered reuse: safe before the copies finish
  }
  void memset_zero(void* dev_dst, std::size_t n, int index) override {
    if (!n) return;
    DeviceGuard guard(index);
    DEFINE_CUDA_CHECK(cudaMemset(dev_dst, 0, n));
  }
  void synchronize(int index) override {
    DeviceGuard guard(index);
    ::define::DEFINE_CUDA_NS::synchronize();
  }
};

}  // namespace

int device_count() {
  static const int count = query_device_count();  // the set of devices is fixed per process
  return count;
}

void set_device(int index) {
  check_index(index);
  DEFINE_CUDA_CHECK(cudaSetDevice(index));
}

int current_device() {
  int index = 0;
  DEFINE_CUDA_CHECK(cudaGetDevice(&index));
  return index;
}

std::string device_name(int index) {
  check_index(index);
  cudaDeviceProp prop{};
  DEFINE_CUDA_CHECK(cudaGetDeviceProperties(&prop, index));
  return prop.name;
}

int compute_capability(int index) {
  check_index(index);
  cudaDeviceProp prop{};
  DEFINE_CUDA_CHECK(cudaGetDeviceProperties(&prop, index));
  return 10 * prop.major + prop.minor;
}

void synchronize() {
  DEFINE_CUDA_CHECK(cudaDeviceSynchronize());
  raise_index_errors();
}

double seconds_per_call(int index, const std::function<void()>& f, int reps) {
  DeviceScope scope(index);
  f();  // warm-up: allocations, first-launch costs
  cudaEvent_t start = nullptr, stop = nullptr;
  DEFINE_CUDA_CHECK(cudaEventCreate(&start));
  DEFINE_CUDA_CHECK(cudaEventCreate(&stop));
  float ms = 0;
  try {
    DEFINE_CUDA_CHECK(cudaEventRecord(start, nullptr));
    for (int i = 0; i < reps; ++i) f();
    DEFINE_CUDA_CHECK(cudaEventRecord(stop, nullptr));
    DEFINE_CUDA_CHECK(cudaEventSynchronize(stop));
    DEFINE_CUDA_CHECK(cudaEventElapsedTime(&ms, start, stop));
  } catch (...) {
    (void)cudaEventDestroy(start);
    (void)cudaEventDestroy(stop);
    throw;
  }
  (void)cudaEventDestroy(start);
  (void)cudaEventDestroy(stop);
  raise_index_errors();
  return double(ms) * 1e-3 / std::max(reps, 1);
}

std::uint64_t device_to_host_copies() { return d2h_copies.load(std::memory_order_relaxed); }
void reset_device_to_host_copies() { d2h_copies.store(0, std::memory_order_relaxed); }

DeviceScope::DeviceScope(int index) {
  DEFINE_CUDA_CHECK(cudaGetDevice(&previous_));
  if (previous_ != index) {
    set_device(index);
    changed_ = true;
  }
}

DeviceScope::~DeviceScope() {
  if (changed_) (void)cudaSetDevice(previous_);  // a destructor must not throw; setting back cannot fail
}

CachingDeviceAllocator& allocator(int index) {
  check_index(index);
  return *device_states()[static_cast<std::size_t>(index)].allocator;
}

void record_stream(void* data, ::define::cuda::StreamId stream, int index) {
  // Without the cache every free is a cudaFree, which waits for the device anyway.
  if (caching_enabled()) allocator(index).record_stream(data, stream);
}

bool caching_allocator_enabled() { return caching_enabled(); }

void set_dry_run(bool on) {
#if defined(__CUDACC__)
  if (on) fail(kBackendName, "a dry run exists on the emulated device only");
#else
  ::cuda_emu::config().dry_run = on;
#endif
}

bool register_backend() {
  if (device_count() == 0) return false;
  static CudaInterface* iface = [] {
    auto* i = new CudaInterface();  // leaked: storage may be freed after main returns
    register_device_interface(kDeviceType, i);
    return i;
  }();
  (void)iface;
  return true;
}

}  // namespace define::DEFINE_CUDA_NS

#if !defined(__CUDACC__)
// The emulator's schedule switch, reachable from code that does not include the emulator.
namespace define::kernels {

void set_emu_schedule(const std::string& schedule) {
  ::cuda_emu::Config& c = ::cuda_emu::config();
  if (schedule == "random" || schedule == "race")
    fail("emu", "give the {} schedule a seed ({}:<seed>) so runs repeat", schedule, schedule);
  if (!::cuda_emu::parse_schedule(schedule, c.schedule, c.seed))
    fail("emu", "unknown schedule '{}' (expected forward, reverse, random:<seed> or race:<seed>)", schedule);
}

std::string emu_schedule() {
  const ::cuda_emu::Config& c = ::cuda_emu::config();
  switch (c.schedule) {
    case ::cuda_emu::Schedule::forward: return "forward";
    case ::cuda_emu::Schedule::reverse: return "reverse";
    case ::cuda_emu::Schedule::random: return "random:" + std::to_string(c.seed);
    case ::cuda_emu::Schedule::race: return "race:" + std::to_string(c.seed);
  }
  return "forward";
}

void set_emu_memory_capacity(std::size_t bytes) { ::cuda_emu::set_memory_capacity(bytes); }
std::size_t emu_memory_in_use(int device) { return ::cuda_emu::memory_in_use(device); }
std::uint64_t emu_kernel_launches() { return ::cuda_emu::detail::launch_counter().load(); }

}  // namespace define::kernels
#endif
