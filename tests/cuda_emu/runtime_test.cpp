// The CUDA runtime shim of the emulator: memory, errors, devices, streams and events.
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

#include "emu_test_support.hpp"

TEST_CASE("emu runtime: malloc memcpy memset and free", "[emu][runtime]") {
  (void)cudaGetLastError();  // errors left by other tests
  float* d = nullptr;
  REQUIRE(cudaMalloc(&d, 1000 * sizeof(float)) == cudaSuccess);
  REQUIRE(d != nullptr);
  CHECK(reinterpret_cast<std::uintptr_t>(d) % 256 == 0);
  std::vector<float> h(1000), back(1000);
  for (int i = 0; i < 1000; ++i) h[i] = float(i) * 0.5f;
  CHECK(cudaMemcpy(d, h.data(), 4000, cudaMemcpyHostToDevice) == cudaSuccess);
  float* e = nullptr;
  REQUIRE(cudaMalloc(reinterpret_cast<void**>(&e), 4000) == cudaSuccess);
  CHECK(cudaMemcpyAsync(e, d, 4000, cudaMemcpyDeviceToDevice, nullptr) == cudaSuccess);
  CHECK(cudaMemcpy(back.data(), e, 4000, cudaMemcpyDefault) == cudaSuccess);
  CHECK(back == h);
  CHECK(cudaMemset(e, 0, 4000) == cudaSuccess);
  CHECK(cudaMemsetAsync(e, 0xFF, 8, nullptr) == cudaSuccess);
  CHECK(cudaMemcpy(back.data(), e, 4000, cudaMemcpyDeviceToHost) == cudaSuccess);
  CHECK(std::isnan(back[0]));
  CHECK(std::isnan(back[1]));
  CHECK(back[2] == 0.f);
  CHECK(cudaFree(d) == cudaSuccess);
  CHECK(cudaFree(e) == cudaSuccess);
  CHECK(cudaFree(nullptr) == cudaSuccess);

  void* z = reinterpret_cast<void*>(1);
  CHECK(cudaMalloc(&z, 0) == cudaSuccess);
  CHECK(z == nullptr);
  CHECK(cudaMemcpy(nullptr, nullptr, 0, cudaMemcpyHostToDevice) == cudaSuccess);
  CHECK(cudaGetLastError() == cudaSuccess);
}

TEST_CASE("emu runtime: errors are recorded and cleared by cudaGetLastError", "[emu][runtime]") {
  (void)cudaGetLastError();
  CHECK(cudaSetDevice(2) == cudaErrorInvalidDevice);
  CHECK(cudaPeekAtLastError() == cudaErrorInvalidDevice);
  CHECK(cudaGetLastError() == cudaErrorInvalidDevice);
  CHECK(cudaGetLastError() == cudaSuccess);
  int src = 0;
  CHECK(cudaMemcpy(nullptr, &src, 4, cudaMemcpyHostToDevice) == cudaErrorInvalidValue);
  CHECK(cudaGetLastError() == cudaErrorInvalidValue);
  CHECK(std::string(cudaGetErrorString(cudaSuccess)) == "no error");
  CHECK(std::string(cudaGetErrorString(cudaErrorMemoryAllocation)) == "out of memory");
  CHECK(std::string(cudaGetErrorName(cudaErrorLaunchFailure)) == "cudaErrorLaunchFailure");
  CHECK(std::strlen(cudaGetErrorString(cudaErrorInvalidConfiguration)) > 0);
}

TEST_CASE("emu runtime: two devices with plausible properties, current per thread", "[emu][runtime]") {
  (void)cudaGetLastError();
  int count = 0, dev = -1;
  CHECK(cudaGetDeviceCount(&count) == cudaSuccess);
  CHECK(count == 2);  // CUDA_EMU_DEVICES' default
  CHECK(cudaSetDevice(1) == cudaSuccess);
  CHECK(cudaGetDevice(&dev) == cudaSuccess);
  CHECK(dev == 1);
  std::thread([] {
    int other = -1;
    cudaGetDevice(&other);
    CHECK(other == 0);  // a new host thread starts on device 0
  }).join();
  CHECK(cudaSetDevice(0) == cudaSuccess);
  CHECK(cudaGetDevice(&dev) == cudaSuccess);
  CHECK(dev == 0);
  cudaDeviceProp p;
  REQUIRE(cudaGetDeviceProperties(&p, 0) == cudaSuccess);
  CHECK(std::strlen(p.name) > 0);
  CHECK(p.warpSize == 32);
  CHECK(p.maxThreadsPerBlock == 1024);
  CHECK(p.maxThreadsDim[2] == 64);
  CHECK(p.maxGridSize[1] == 65535);
  CHECK(p.sharedMemPerBlock == 48 * 1024);
  CHECK(p.multiProcessorCount >= 1);
  {  // the properties follow CUDA_EMU_ARCH: sm_61 (GTX 1080 Ti) unless set
    emu_test::ConfigGuard g;
    cuda_emu::config().arch = 61;
    REQUIRE(cudaGetDeviceProperties(&p, 0) == cudaSuccess);
    CHECK((p.major == 6 && p.minor == 1));
    CHECK(p.sharedMemPerBlockOptin == 48 * 1024);
    cuda_emu::config().arch = 75;
    REQUIRE(cudaGetDeviceProperties(&p, 0) == cudaSuccess);
    CHECK((p.major == 7 && p.minor == 5));
    CHECK(p.sharedMemPerBlockOptin == 64 * 1024);
    int optin = 0;
    CHECK(cudaDeviceGetAttribute(&optin, cudaDevAttrMaxSharedMemoryPerBlockOptin, 0) == cudaSuccess);
    CHECK(optin == 64 * 1024);
  }
  CHECK(p.totalGlobalMem > 0);
  int sms = 0;
  CHECK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0) == cudaSuccess);
  CHECK(sms == p.multiProcessorCount);
  std::size_t free_bytes = 0, total = 0;
  CHECK(cudaMemGetInfo(&free_bytes, &total) == cudaSuccess);
  CHECK(total > 0);
  CHECK(free_bytes <= total);
  CHECK(cudaDeviceSynchronize() == cudaSuccess);
  CHECK(cudaGetDeviceProperties(&p, 3) == cudaErrorInvalidDevice);
  CHECK(cudaGetLastError() == cudaErrorInvalidDevice);
}

TEST_CASE("emu runtime: streams and events", "[emu][runtime]") {
  (void)cudaGetLastError();
  cudaStream_t s = nullptr;
  REQUIRE(cudaStreamCreate(&s) == cudaSuccess);
  CHECK(s != nullptr);
  cudaEvent_t start = nullptr, stop = nullptr;
  REQUIRE(cudaEventCreate(&start) == cudaSuccess);
  REQUIRE(cudaEventCreateWithFlags(&stop, cudaEventDefault) == cudaSuccess);
  float ms = -1;
  CHECK(cudaEventElapsedTime(&ms, start, stop) == cudaErrorInvalidResourceHandle);  // not recorded yet
  CHECK(cudaGetLastError() == cudaErrorInvalidResourceHandle);
  CHECK(cudaEventRecord(start, s) == cudaSuccess);
  CHECK(cudaStreamWaitEvent(s, start, 0) == cudaSuccess);
  CHECK(cudaStreamSynchronize(s) == cudaSuccess);
  CHECK(cudaEventRecord(stop, s) == cudaSuccess);
  CHECK(cudaEventSynchronize(stop) == cudaSuccess);
  CHECK(cudaEventElapsedTime(&ms, start, stop) == cudaSuccess);
  CHECK(ms >= 0.f);
  CHECK(cudaEventDestroy(start) == cudaSuccess);
  CHECK(cudaEventDestroy(stop) == cudaSuccess);
  CHECK(cudaStreamDestroy(s) == cudaSuccess);
  CHECK(cudaGetLastError() == cudaSuccess);
}

namespace {
void write_ones(float* p) { p[threadIdx.x] = 1.0f; }  // a kernel (this file has no CUDA keywords)
}  // namespace

TEST_CASE("emu runtime: device memory has an owner and a capacity", "[emu][runtime]") {
  (void)cudaGetLastError();
  REQUIRE(cudaSetDevice(1) == cudaSuccess);
  float* on1 = nullptr;
  REQUIRE(cudaMalloc(&on1, 4096) == cudaSuccess);
  CHECK(cuda_emu::memory_in_use(1) >= 4096);
  REQUIRE(cudaSetDevice(0) == cudaSuccess);
  CHECK(cuda_emu::detail::owner_of(on1 + 10) == 1);
  int host = 0;
  CHECK(cuda_emu::detail::owner_of(&host) == -1);

  // A kernel on device 0 handed device 1's memory: refused at launch, as a GPU would fault.
  try {
    launch(write_ones, dim3(1), dim3(4), 0, nullptr, on1);
    FAIL("launch did not refuse another device's memory");
  } catch (const cuda_emu::kernel_error& e) {
    CHECK_THAT(e.what(), Catch::Contains("kernel argument 0 points into the memory of device 1 but the kernel runs on device 0"));
  }
  CHECK(cudaGetLastError() == cudaErrorIllegalAddress);
  REQUIRE(cudaSetDevice(1) == cudaSuccess);
  launch(write_ones, dim3(1), dim3(4), 0, nullptr, on1);  // on its own device it runs
  CHECK(on1[3] == 1.0f);
  REQUIRE(cudaSetDevice(0) == cudaSuccess);

  // Capacity: a cudaMalloc beyond it fails, as on a full GPU.
  cuda_emu::set_memory_capacity(cuda_emu::memory_in_use(0) + 8192);
  void* big = nullptr;
  CHECK(cudaMalloc(&big, 16384) == cudaErrorMemoryAllocation);
  CHECK(big == nullptr);
  CHECK(cudaGetLastError() == cudaErrorMemoryAllocation);
  void* fits = nullptr;
  CHECK(cudaMalloc(&fits, 8192) == cudaSuccess);
  cuda_emu::set_memory_capacity(0);
  CHECK(cudaFree(fits) == cudaSuccess);
  // Freeing what cudaMalloc did not hand out is an error, not a crash.
  CHECK(cudaFree(&host) == cudaErrorInvalidValue);
  CHECK(cudaGetLastError() == cudaErrorInvalidValue);
  CHECK(cudaFree(on1) == cudaSuccess);
}
