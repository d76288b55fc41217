// CUDA execution emulator, part 1 of 6: CUDA's value types (dim3, uint3, float4, ...), the built-in
// index variables, the runtime's enums, the emulator's configuration and its error type.
// Include "cuda_emu/cuda_emu.hpp" (or, from a kernel file, "kernels/cuda/cuda_compat.cuh"), not this.
#pragma once

#include <cstddef>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <type_traits>

// The emulator's own code is compiled into every kernel file, whose instrumentation (emu_race.hpp)
// would call a hook at each of its loads and stores; the runner's functions, the fiber switches and
// the warp-wide collectives' arithmetic opt out. What they touch is the emulator's state, which the
// race schedule and the profile skip anyway, and with the hooks a barrier or a warp intrinsic cost
// about twice as much. Device-side code that reads or writes the kernel's memory on its behalf
// (ldmatrix's row, cp.async, atomics) stays instrumented or calls the hooks itself.
#define CUDA_EMU_UNINSTRUMENTED __attribute__((no_sanitize_thread))

// ---------------------------------------------------------------------------------------------
// Vector types. Same layout and alignment as CUDA's vector_types.h, so kernels may reinterpret
// global memory as float4 etc. exactly as on the GPU.

struct uint3 {
  unsigned int x, y, z;
};

struct dim3 {
  unsigned int x, y, z;
  constexpr dim3(unsigned int vx = 1, unsigned int vy = 1, unsigned int vz = 1) : x(vx), y(vy), z(vz) {}
  constexpr dim3(uint3 v) : x(v.x), y(v.y), z(v.z) {}
  constexpr operator uint3() const { return uint3{x, y, z}; }
};

#define CUDA_EMU_VEC2(T, name, align)                                     \
  struct alignas(align) name {                                            \
    T x, y;                                                               \
  };                                                                      \
  inline constexpr name make_##name(T x, T y) { return name{x, y}; }
#define CUDA_EMU_VEC3(T, name)                                            \
  struct name {                                                           \
    T x, y, z;                                                            \
  };                                                                      \
  inline constexpr name make_##name(T x, T y, T z) { return name{x, y, z}; }
#define CUDA_EMU_VEC4(T, name, align)                                     \
  struct alignas(align) name {                                            \
    T x, y, z, w;                                                         \
  };                                                                      \
  inline constexpr name make_##name(T x, T y, T z, T w) { return name{x, y, z, w}; }

CUDA_EMU_VEC2(signed char, char2, 2)
CUDA_EMU_VEC2(unsigned char, uchar2, 2)
CUDA_EMU_VEC4(signed char, char4, 4)
CUDA_EMU_VEC4(unsigned char, uchar4, 4)
CUDA_EMU_VEC2(short, short2, 4)
CUDA_EMU_VEC2(unsigned short, ushort2, 4)
CUDA_EMU_VEC4(short, short4, 8)
CUDA_EMU_VEC4(unsigned short, ushort4, 8)
CUDA_EMU_VEC2(int, int2, 8)
CUDA_EMU_VEC3(int, int3)
CUDA_EMU_VEC4(int, int4, 16)
CUDA_EMU_VEC2(unsigned int, uint2, 8)
CUDA_EMU_VEC4(unsigned int, uint4, 16)
CUDA_EMU_VEC2(long long, longlong2, 16)
CUDA_EMU_VEC2(unsigned long long, ulonglong2, 16)
CUDA_EMU_VEC2(float, float2, 8)
CUDA_EMU_VEC3(float, float3)
CUDA_EMU_VEC4(float, float4, 16)
CUDA_EMU_VEC2(double, double2, 16)
CUDA_EMU_VEC3(double, double3)

#undef CUDA_EMU_VEC2
#undef CUDA_EMU_VEC3
#undef CUDA_EMU_VEC4

inline constexpr uint3 make_uint3(unsigned int x, unsigned int y, unsigned int z) { return uint3{x, y, z}; }

// ---------------------------------------------------------------------------------------------
// Built-in variables. thread_local because a block runs start to finish on one OS thread; the
// scheduler rewrites threadIdx on every fiber switch. Constant-initialised, so reading threadIdx.x
// is a single %fs-relative load in an executable.

inline thread_local uint3 threadIdx{0, 0, 0};
inline thread_local uint3 blockIdx{0, 0, 0};
inline thread_local dim3 blockDim{1, 1, 1};
inline thread_local dim3 gridDim{1, 1, 1};
inline constexpr int warpSize = 32;

// ---------------------------------------------------------------------------------------------
// Runtime enums and handles (values as in the CUDA runtime, so printed codes mean the same).

enum cudaError {
  cudaSuccess = 0,
  cudaErrorInvalidValue = 1,
  cudaErrorMemoryAllocation = 2,
  cudaErrorInitializationError = 3,
  cudaErrorInvalidConfiguration = 9,
  cudaErrorInvalidMemcpyDirection = 21,
  cudaErrorNoDevice = 100,
  cudaErrorInvalidDevice = 101,
  cudaErrorInvalidResourceHandle = 400,
  cudaErrorNotReady = 600,
  cudaErrorIllegalAddress = 700,
  cudaErrorLaunchOutOfResources = 701,
  cudaErrorLaunchFailure = 719,
  cudaErrorNotSupported = 801,
  cudaErrorUnknown = 999,
};
typedef enum cudaError cudaError_t;

enum cudaMemcpyKind {
  cudaMemcpyHostToHost = 0,
  cudaMemcpyHostToDevice = 1,
  cudaMemcpyDeviceToHost = 2,
  cudaMemcpyDeviceToDevice = 3,
  cudaMemcpyDefault = 4,
};

// Same spelling as the CUDA runtime's typedefs, so a plain C++ header can forward-declare
// `struct CUstream_st; typedef CUstream_st* cudaStream_t;` and work with both builds.
struct CUstream_st;
typedef struct CUstream_st* cudaStream_t;
struct CUevent_st;
typedef struct CUevent_st* cudaEvent_t;

// Whether this translation unit was compiled with the memory-access instrumentation the race
// schedule feeds on (emu_race.hpp).
#if defined(__SANITIZE_THREAD__)
#define CUDA_EMU_RACE_HOOKS 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define CUDA_EMU_RACE_HOOKS 1
#endif
#endif

namespace cuda_emu {

namespace detail {
inline constexpr bool kRaceHooks =
#if defined(CUDA_EMU_RACE_HOOKS)
    true;
#else
    false;
#endif
}  // namespace detail

// ---------------------------------------------------------------------------------------------
// Configuration: read from the environment on first use, then changeable by tests between launches
// (each launch takes a snapshot).
//   CUDA_EMU_SCHEDULE = forward | reverse | random[:seed] | race[:seed]
//                       the order of threads between barriers and of blocks in the grid:
//                       forward runs both in index order; reverse runs both backwards; random
//                       shuffles both (seeded); race permutes the blocks as random does and lets a
//                       thread give way to another at its global and shared memory accesses (seeded
//                       coin flips, see emu_race.hpp), so a read-modify-write race between threads
//                       gives a wrong answer instead of the right one
//   CUDA_EMU_DEBUG    = 1   fill shared memory (static and dynamic) with 0xFF (NaN) before each block
//   CUDA_EMU_STRICT   = 1   threads that returned before a __syncthreads() are an error
//   CUDA_EMU_ARCH     = 61 | 70 | 75 | 80 | 86 | 89 | 90 (or sm_61 ...): the GPU whose per-block
//                       limits launches must respect (default 61, the users' oldest: GTX 1080 Ti)
//   CUDA_EMU_THREADS  = N   OS threads running blocks (default: hardware concurrency)
//   CUDA_EMU_STACK_KB = N   fiber stack size (default 64, 256 under AddressSanitizer)

enum class Schedule { forward, reverse, random, race };

// Per-block limits of a GPU architecture that the emulator enforces.
struct ArchLimits {
  int major = 6, minor = 1;
  std::size_t smem_default = 48 * 1024;  // static + dynamic shared memory without an opt-in
  std::size_t smem_optin = 48 * 1024;    // the most cudaFuncAttributeMaxDynamicSharedMemorySize allows
};

// Limits by compute capability (CUDA programming guide, table "Technical Specifications per
// Compute Capability"); false for an architecture the table here does not know.
inline bool arch_limits(int arch, ArchLimits& out) {
  switch (arch) {
    case 61: out = {6, 1, 48 * 1024, 48 * 1024}; return true;
    case 70: out = {7, 0, 48 * 1024, 96 * 1024}; return true;
    case 75: out = {7, 5, 48 * 1024, 64 * 1024}; return true;
    case 80: out = {8, 0, 48 * 1024, 163 * 1024}; return true;
    case 86: out = {8, 6, 48 * 1024, 99 * 1024}; return true;
    case 89: out = {8, 9, 48 * 1024, 99 * 1024}; return true;
    case 90: out = {9, 0, 48 * 1024, 227 * 1024}; return true;
    default: return false;
  }
}

struct Config {
  Schedule schedule = Schedule::forward;
  std::uint64_t seed = 0;  // random and race schedules: the seed of every shuffle and switch
  bool debug = false;
  bool strict = false;
  // Dry run: launches and GEMMs are checked but not run, memory is allocated, copied and set as
  // usual. What code allocates then costs no arithmetic: a memory plan of a large model in seconds
  // (train/memory_plan.h). Results are garbage; host code that branches on device values does not
  // take the path it would.
  bool dry_run = false;
  int arch = 61;
  unsigned threads = 1;
#if defined(__SANITIZE_ADDRESS__)
  std::size_t stack_kb = 256;
#else
  std::size_t stack_kb = 64;
#endif
};

// Parses "forward", "reverse", "random[:<seed>]" or "race[:<seed>]". A random or race schedule
// without a seed gets a fresh one, printed to stderr so a failing run can be repeated.
inline bool parse_schedule(std::string_view text, Schedule& schedule, std::uint64_t& seed) {
  if (text == "forward") {
    schedule = Schedule::forward;
  } else if (text == "reverse") {
    schedule = Schedule::reverse;
  } else if (const std::string_view name = text.substr(0, text.find(':'));
             (name == "random" || name == "race") && (text.size() == name.size() || text.size() > name.size() + 1)) {
    schedule = name == "random" ? Schedule::random : Schedule::race;
    if (text.size() > name.size()) {
      seed = std::strtoull(std::string(text.substr(name.size() + 1)).c_str(), nullptr, 10);
    } else {
      seed = std::uint64_t(std::chrono::system_clock::now().time_since_epoch().count()) * 0x9e3779b97f4a7c15ull;
      seed ^= seed >> 29;
      const std::string n(name);
      std::fprintf(stderr, "cuda_emu: %s schedule, seed %llu (repeat with CUDA_EMU_SCHEDULE=%s:%llu)\n", n.c_str(),
                   static_cast<unsigned long long>(seed), n.c_str(), static_cast<unsigned long long>(seed));
    }
  } else {
    return false;
  }
  return true;
}

inline Config config_from_env() {
  Config c;
  unsigned hw = std::thread::hardware_concurrency();
  c.threads = hw ? hw : 1;
  auto flag = [](const char* name) {
    const char* v = std::getenv(name);
    return v && *v && std::string_view(v) != "0";
  };
  if (const char* s = std::getenv("CUDA_EMU_SCHEDULE"); s && *s) {
    if (!parse_schedule(s, c.schedule, c.seed))
      std::fprintf(stderr, "cuda_emu: ignoring CUDA_EMU_SCHEDULE=%s (want forward, reverse, random[:seed], race[:seed])\n",
                   s);
  }
  if (const char* a = std::getenv("CUDA_EMU_ARCH"); a && *a) {
    const int arch = std::atoi(a + (std::string_view(a).substr(0, 3) == "sm_" ? 3 : 0));
    ArchLimits limits;
    if (arch_limits(arch, limits)) {
      c.arch = arch;
    } else {
      std::fprintf(stderr, "cuda_emu: ignoring CUDA_EMU_ARCH=%s (want 61, 70, 75, 80, 86, 89 or 90)\n", a);
    }
  }
  c.debug = flag("CUDA_EMU_DEBUG");
  c.strict = flag("CUDA_EMU_STRICT");
  c.dry_run = flag("CUDA_EMU_DRY_RUN");
  if (const char* t = std::getenv("CUDA_EMU_THREADS"); t && std::atoi(t) > 0) c.threads = unsigned(std::atoi(t));
  if (const char* k = std::getenv("CUDA_EMU_STACK_KB"); k && std::atoi(k) >= 16) c.stack_kb = std::size_t(std::atoi(k));
  return c;
}

// The process-wide configuration. Not synchronised: change it only while no launch is running.
inline Config& config() {
  static Config c = config_from_env();
  return c;
}

namespace detail {
// Builds a message by appending pieces (strings, C strings, integers). Appending only, instead of
// "literal" + std::string, also sidesteps a GCC 12 -Wrestrict false positive at -O3.
inline void append_piece(std::string& out, std::string_view piece) { out.append(piece); }
inline void append_piece(std::string& out, const char* piece) { out.append(piece ? piece : "(null)"); }
template <typename I>
  requires std::is_integral_v<I>
inline void append_piece(std::string& out, I value) {
  out.append(std::to_string(value));
}
template <typename... Pieces>
std::string cat(const Pieces&... pieces) {
  std::string out;
  (append_piece(out, pieces), ...);
  return out;
}
inline std::string format_index(uint3 v) { return cat("(", v.x, ",", v.y, ",", v.z, ")"); }
}  // namespace detail

// ---------------------------------------------------------------------------------------------
// Errors. A failure inside a kernel (an exception, __trap(), a divergent barrier, a warp deadlock)
// aborts its block and comes out of launch() as kernel_error; so does an invalid launch
// configuration (block_linear == -1 then).

class kernel_error : public std::runtime_error {
 public:
  kernel_error(const std::string& message, uint3 block_index, long long linear_block)
      : std::runtime_error(linear_block >= 0 ? detail::cat("cuda_emu: kernel failed in block ",
                                                           detail::format_index(block_index), ": ", message)
                                             : detail::cat("cuda_emu: ", message)),
        block(block_index),
        block_linear(linear_block),
        detail(message) {}

  uint3 block;             // blockIdx of the failing block
  long long block_linear;  // its linear index, or -1 for errors before any block ran
  std::string detail;      // the message without the block prefix
};

// Thrown by __trap() in emulated device code.
class device_trap : public std::runtime_error {
 public:
  device_trap() : std::runtime_error("__trap() called") {}
};

namespace detail {
// cudaGetLastError() state: per host thread, as in CUDA.
inline thread_local cudaError_t last_error = cudaSuccess;
inline void set_last_error(cudaError_t e) {
  if (e != cudaSuccess) last_error = e;
}
}  // namespace detail

}  // namespace cuda_emu
