// Helpers for the emulator tests: device buffers, a configuration guard, and a way to run code in a
// fork()ed child (for tests whose bug kills the process).
#pragma once

#include <signal.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include <catch2/catch.hpp>

// Host-side code only needs the runtime shim and the configuration, not the CUDA keyword macros
// (which could clash with headers included later).
#define CUDA_EMU_NO_KEYWORDS
#include "cuda_emu/cuda_emu.hpp"

namespace emu_test {

// A cudaMalloc'ed array with upload/download, so the tests drive kernels exactly as GPU code would.
template <typename T>
class DeviceBuffer {
 public:
  explicit DeviceBuffer(std::size_t n) : n_(n) {
    REQUIRE(cudaMalloc(&ptr_, n * sizeof(T)) == cudaSuccess);
    REQUIRE(cudaMemset(ptr_, 0, n * sizeof(T)) == cudaSuccess);
  }
  explicit DeviceBuffer(const std::vector<T>& host) : DeviceBuffer(host.size()) { upload(host); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  ~DeviceBuffer() { cudaFree(ptr_); }

  T* get() const { return ptr_; }
  std::size_t size() const { return n_; }
  void upload(const std::vector<T>& host) {
    REQUIRE(host.size() == n_);
    REQUIRE(cudaMemcpy(ptr_, host.data(), n_ * sizeof(T), cudaMemcpyHostToDevice) == cudaSuccess);
  }
  std::vector<T> download() const {
    std::vector<T> host(n_);
    REQUIRE(cudaMemcpy(host.data(), ptr_, n_ * sizeof(T), cudaMemcpyDeviceToHost) == cudaSuccess);
    return host;
  }

 private:
  T* ptr_ = nullptr;
  std::size_t n_;
};

// The message of the kernel_error that `run` throws, or "(no error)".
inline std::string launch_error(const std::function<void()>& run) {
  try {
    run();
  } catch (const cuda_emu::kernel_error& e) {
    return e.what();
  }
  return "(no error)";
}

// Restores the emulator configuration at scope exit.
class ConfigGuard {
 public:
  ConfigGuard() : saved_(cuda_emu::config()) {}
  ConfigGuard(cuda_emu::Schedule schedule, std::uint64_t seed = 0) : ConfigGuard() {
    cuda_emu::config().schedule = schedule;
    cuda_emu::config().seed = seed;
  }
  ConfigGuard(const ConfigGuard&) = delete;
  ConfigGuard& operator=(const ConfigGuard&) = delete;
  ~ConfigGuard() { cuda_emu::config() = saved_; }

 private:
  cuda_emu::Config saved_;
};

// Runs `body` in a fork()ed child with default SIGSEGV/SIGBUS handling (and no core dump) and
// returns the raw wait status. The child exits 0 when `body` returns, 1 when it throws.
inline int run_in_child(const std::function<void()>& body) {
  const pid_t pid = fork();
  REQUIRE(pid >= 0);
  if (pid == 0) {
    struct sigaction dfl {};
    dfl.sa_handler = SIG_DFL;
    sigaction(SIGSEGV, &dfl, nullptr);
    sigaction(SIGBUS, &dfl, nullptr);
    struct rlimit no_core {};
    setrlimit(RLIMIT_CORE, &no_core);
    try {
      body();
    } catch (...) {
      _exit(1);
    }
    _exit(0);
  }
  int status = 0;
  REQUIRE(waitpid(pid, &status, 0) == pid);
  return status;
}

inline bool died_of_fault(int status) {
  return WIFSIGNALED(status) && (WTERMSIG(status) == SIGSEGV || WTERMSIG(status) == SIGBUS);
}

// Deterministic pseudo-random floats in [-1, 1).
inline std::vector<float> random_floats(std::size_t n, std::uint32_t seed) {
  std::vector<float> v(n);
  std::uint64_t s = seed * 0x9e3779b97f4a7c15ull + 1;
  for (auto& x : v) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    x = float(std::int64_t(s >> 40) - (1ll << 23)) / float(1 << 23);
  }
  return v;
}

// Smaller problems under AddressSanitizer, which makes fiber switches ~8x slower.
#if defined(__SANITIZE_ADDRESS__)
inline constexpr bool kSanitized = true;
#else
inline constexpr bool kSanitized = false;
#endif

}  // namespace emu_test
