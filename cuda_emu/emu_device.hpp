// CUDA execution emulator, part 5 of 6: what device code calls. Barriers and warp intrinsics go to
// the current block's Runner; atomics use std::atomic_ref (relaxed, as CUDA's); fences are seq_cst;
// fast-math intrinsics are computed at full precision (tests must allow for the GPU's error).
#pragma once

#include <atomic>
#include <bit>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <math.h>
#include <stdexcept>
#include <string>
#include <type_traits>

#include "cuda_emu/emu_runner.hpp"
#include "cuda_emu/emu_types.hpp"

namespace cuda_emu::detail {

[[noreturn, gnu::cold, gnu::noinline]] inline void called_outside_kernel(const char* what) {
  throw std::logic_error(cat(what, " called outside a kernel"));
}
// Inlined into every warp primitive and tensor-core op: the error path is kept out of line.
CUDA_EMU_UNINSTRUMENTED inline Runner& current_runner(const char* what) {
  Runner* r = tls_runner;
  if (!r) [[unlikely]]
    called_outside_kernel(what);
  return *r;
}

inline unsigned char* dynamic_shared_memory() { return current_runner("EMU_DYNAMIC_SHARED").dynamic_smem(); }

template <typename T>
std::uint64_t to_bits(T v) {
  static_assert(std::is_trivially_copyable_v<T> && sizeof(T) <= 8, "warp shuffles move values of at most 8 bytes");
  std::uint64_t bits = 0;
  std::memcpy(&bits, &v, sizeof(T));
  return bits;
}
template <typename T>
T from_bits(std::uint64_t bits) {
  T v;
  std::memcpy(&v, &bits, sizeof(T));
  return v;
}

inline void check_width(Runner& r, const char* op, int width) {
  if (width < 1 || width > 32 || (width & (width - 1)) != 0) {
    std::string message = cat(op, ": width ", width, " is not a power of two in [1, 32]");
    r.fail(std::move(message));
  }
}

}  // namespace cuda_emu::detail

// Dynamic shared memory: `EMU_DYNAMIC_SHARED(float, s);` in a kernel gives `float* s` pointing at the
// launch's smem_bytes (nullptr for 0 bytes). The buffer ends at a PROT_NONE page.
#define EMU_DYNAMIC_SHARED(T, name) T* name = reinterpret_cast<T*>(::cuda_emu::detail::dynamic_shared_memory())

namespace cuda_emu::detail {
template <typename T, std::size_t Align = 1>
T& static_shared(const SharedSite* site) {
  static_assert(std::is_trivially_default_constructible_v<T> && std::is_trivially_destructible_v<T>,
                "shared memory holds trivial types only (a GPU never constructs it)");
  return *static_cast<T*>(
      current_runner("EMU_STATIC_SHARED").static_shared(site, sizeof(T), alignof(T) > Align ? alignof(T) : Align));
}
}  // namespace cuda_emu::detail

// Static shared memory: `EMU_STATIC_SHARED(tile, float[32][33]);` in a kernel declares `tile` as the
// block's shared array (nvcc: `__shared__ float tile[32][33]`). Here it is a reference into the
// block's arena, counted against the per-block limit, NaN-filled in debug mode, overflow-checked.
#define EMU_STATIC_SHARED(name, ...)                                                                    \
  static constexpr ::cuda_emu::detail::SharedSite name##_emu_site_{#name, __FILE__, __LINE__};          \
  ::std::type_identity_t<__VA_ARGS__>& name =                                                           \
      ::cuda_emu::detail::static_shared<::std::type_identity_t<__VA_ARGS__>>(&name##_emu_site_)
// The same, 16-byte aligned (nvcc: `__shared__ __align__(16) ...`), for arrays of smaller elements read
// by 16-byte vector accesses or ldmatrix rows from their first element. (Without it the emulator
// places an array at exactly its element type's alignment, as little as nvcc promises.)
#define EMU_STATIC_SHARED_ALIGN16(name, ...)                                                   \
  static constexpr ::cuda_emu::detail::SharedSite name##_emu_site_{#name, __FILE__, __LINE__}; \
  ::std::type_identity_t<__VA_ARGS__>& name =                                                  \
      ::cuda_emu::detail::static_shared<::std::type_identity_t<__VA_ARGS__>, 16>(&name##_emu_site_)

// __launch_bounds__(max_threads[, min_blocks]) caps a kernel's registers so that max_threads fit on a
// multiprocessor, and a GPU refuses a larger block (cudaErrorLaunchOutOfResources). The emulator
// cannot read the attribute (it expands to nothing here), so each bounded kernel repeats its bound as
// its first statement, `EMU_CHECK_LAUNCH_BOUNDS(max_threads[, min_blocks]);` (nothing under nvcc;
// scripts/checks/check-launch-bounds.sh checks that the two agree), and a block larger than the bound fails
// its launch here too, before any of the kernel's code has run.
namespace cuda_emu::detail {
constexpr long long launch_bound_threads(long long max_threads, long long /*min_blocks*/ = 0) { return max_threads; }
inline void check_launch_bounds(long long max_threads, const char* bounds, const char* file, int line) {
  const unsigned long long threads = static_cast<unsigned long long>(blockDim.x) * blockDim.y * blockDim.z;
  if (threads <= static_cast<unsigned long long>(max_threads)) return;
  Pool::instance().launch_bounds_exceeded();
  throw std::runtime_error(cat("too many resources requested for launch: a block of ", threads,
                               " threads, more than the kernel's __launch_bounds__(", bounds, ") allows (",
                               call_site(file, line), ")"));
}
}  // namespace cuda_emu::detail
#define EMU_CHECK_LAUNCH_BOUNDS(...)                                                                           \
  ::cuda_emu::detail::check_launch_bounds(::cuda_emu::detail::launch_bound_threads(__VA_ARGS__), #__VA_ARGS__, \
                                          __FILE__, __LINE__)

// ---------------------------------------------------------------------------------------------
// Block barriers. The default arguments capture the call site, used to report divergent barriers.

inline void __syncthreads(const char* file = __builtin_FILE(), int line = __builtin_LINE()) {
  cuda_emu::detail::current_runner("__syncthreads")
      .barrier(file, line, cuda_emu::detail::BarrierKind::plain, false);
}
inline int __syncthreads_count(int predicate, const char* file = __builtin_FILE(), int line = __builtin_LINE()) {
  return cuda_emu::detail::current_runner("__syncthreads_count")
      .barrier(file, line, cuda_emu::detail::BarrierKind::count, predicate != 0);
}
inline int __syncthreads_and(int predicate, const char* file = __builtin_FILE(), int line = __builtin_LINE()) {
  return cuda_emu::detail::current_runner("__syncthreads_and")
      .barrier(file, line, cuda_emu::detail::BarrierKind::all, predicate != 0);
}
inline int __syncthreads_or(int predicate, const char* file = __builtin_FILE(), int line = __builtin_LINE()) {
  return cuda_emu::detail::current_runner("__syncthreads_or")
      .barrier(file, line, cuda_emu::detail::BarrierKind::any, predicate != 0);
}

// ---------------------------------------------------------------------------------------------
// Warp intrinsics: barriers among the lanes named in `mask` that exchange values.

inline void __syncwarp(unsigned mask = 0xffffffffu, const char* file = __builtin_FILE(), int line = __builtin_LINE()) {
  cuda_emu::detail::current_runner("__syncwarp")
      .warp_op("__syncwarp", mask, 0, -1, false, nullptr, nullptr, file, line);
}

template <typename T>
T __shfl_sync(unsigned mask, T var, int srcLane, int width = warpSize, const char* file = __builtin_FILE(),
       int line = __builtin_LINE()) {
  auto& r = cuda_emu::detail::current_runner("__shfl_sync");
  cuda_emu::detail::check_width(r, "__shfl_sync", width);
  const int lane = r.lane();
  const int src = (lane & ~(width - 1)) + (srcLane & (width - 1));
  return cuda_emu::detail::from_bits<T>(
      r.warp_op("__shfl_sync", mask, cuda_emu::detail::to_bits(var), src, false, nullptr, nullptr, file, line));
}

template <typename T>
T __shfl_up_sync(unsigned mask, T var, unsigned int delta, int width = warpSize, const char* file = __builtin_FILE(),
       int line = __builtin_LINE()) {
  auto& r = cuda_emu::detail::current_runner("__shfl_up_sync");
  cuda_emu::detail::check_width(r, "__shfl_up_sync", width);
  const int lane = r.lane();
  const int src = unsigned(lane & (width - 1)) >= delta ? lane - int(delta) : lane;
  return cuda_emu::detail::from_bits<T>(
      r.warp_op("__shfl_up_sync", mask, cuda_emu::detail::to_bits(var), src, false, nullptr, nullptr, file, line));
}

template <typename T>
T __shfl_down_sync(unsigned mask, T var, unsigned int delta, int width = warpSize, const char* file = __builtin_FILE(),
       int line = __builtin_LINE()) {
  auto& r = cuda_emu::detail::current_runner("__shfl_down_sync");
  cuda_emu::detail::check_width(r, "__shfl_down_sync", width);
  const int lane = r.lane();
  const int src = unsigned(lane & (width - 1)) + delta < unsigned(width) ? lane + int(delta) : lane;
  return cuda_emu::detail::from_bits<T>(
      r.warp_op("__shfl_down_sync", mask, cuda_emu::detail::to_bits(var), src, false, nullptr, nullptr, file, line));
}

template <typename T>
T __shfl_xor_sync(unsigned mask, T var, int laneMask, int width = warpSize, const char* file = __builtin_FILE(),
       int line = __builtin_LINE()) {
  auto& r = cuda_emu::detail::current_runner("__shfl_xor_sync");
  cuda_emu::detail::check_width(r, "__shfl_xor_sync", width);
  const int lane = r.lane();
  // Lanes may read from earlier width-groups but not later ones (then they get their own value).
  int src = lane ^ (laneMask & 31);
  if (src >= (lane & ~(width - 1)) + width) src = lane;
  return cuda_emu::detail::from_bits<T>(
      r.warp_op("__shfl_xor_sync", mask, cuda_emu::detail::to_bits(var), src, false, nullptr, nullptr, file, line));
}

inline unsigned __ballot_sync(unsigned mask, int predicate, const char* file = __builtin_FILE(),
                              int line = __builtin_LINE()) {
  std::uint32_t ballot = 0;
  cuda_emu::detail::current_runner("__ballot_sync")
      .warp_op("__ballot_sync", mask, 0, -1, predicate != 0, &ballot, nullptr, file, line);
  return ballot;
}
inline int __any_sync(unsigned mask, int predicate, const char* file = __builtin_FILE(), int line = __builtin_LINE()) {
  std::uint32_t ballot = 0;
  cuda_emu::detail::current_runner("__any_sync")
      .warp_op("__any_sync", mask, 0, -1, predicate != 0, &ballot, nullptr, file, line);
  return ballot != 0;
}
inline int __all_sync(unsigned mask, int predicate, const char* file = __builtin_FILE(), int line = __builtin_LINE()) {
  std::uint32_t ballot = 0, group = 0;
  cuda_emu::detail::current_runner("__all_sync")
      .warp_op("__all_sync", mask, 0, -1, predicate != 0, &ballot, &group, file, line);
  return ballot == group;
}
// Approximation: the lanes of this warp that exist and have not returned (the emulator cannot see
// branches). Do not build logic on it.
inline unsigned __activemask() { return cuda_emu::detail::current_runner("__activemask").active_mask(); }

// ---------------------------------------------------------------------------------------------
// Memory: loads through the read-only cache, fences.

template <typename T>
inline T __ldg(const T* p) { return *p; }
template <typename T>
inline T __ldcg(const T* p) { return *p; }
template <typename T>
inline T __ldcs(const T* p) { return *p; }
template <typename T>
inline void __stcg(T* p, T v) { *p = v; }
template <typename T>
inline void __stcs(T* p, T v) { *p = v; }

inline void __threadfence() { std::atomic_thread_fence(std::memory_order_seq_cst); }
inline void __threadfence_block() { std::atomic_thread_fence(std::memory_order_seq_cst); }
inline void __threadfence_system() { std::atomic_thread_fence(std::memory_order_seq_cst); }

[[noreturn]] inline void __trap() { throw cuda_emu::device_trap(); }
inline void __nanosleep(unsigned) {}
inline long long clock64() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

// ---------------------------------------------------------------------------------------------
// Atomics. The value argument is non-deduced, so atomicAdd(&unsigned_counter, 1) compiles as in CUDA.

template <typename T>
inline T atomicAdd(T* address, std::type_identity_t<T> val) {
  return std::atomic_ref<T>(*address).fetch_add(val, std::memory_order_relaxed);
}
template <typename T>
inline T atomicSub(T* address, std::type_identity_t<T> val) {
  static_assert(std::is_integral_v<T>, "atomicSub: integers only");
  return std::atomic_ref<T>(*address).fetch_sub(val, std::memory_order_relaxed);
}
template <typename T>
inline T atomicExch(T* address, std::type_identity_t<T> val) {
  return std::atomic_ref<T>(*address).exchange(val, std::memory_order_relaxed);
}
template <typename T>
inline T atomicCAS(T* address, std::type_identity_t<T> compare, std::type_identity_t<T> val) {
  std::atomic_ref<T>(*address).compare_exchange_strong(compare, val, std::memory_order_relaxed,
                                                       std::memory_order_relaxed);
  return compare;  // the old value, whether or not the swap happened
}
template <typename T>
inline T atomicMin(T* address, std::type_identity_t<T> val) {
  std::atomic_ref<T> ref(*address);
  T old = ref.load(std::memory_order_relaxed);
  while (val < old && !ref.compare_exchange_weak(old, val, std::memory_order_relaxed)) {
  }
  return old;
}
template <typename T>
inline T atomicMax(T* address, std::type_identity_t<T> val) {
  std::atomic_ref<T> ref(*address);
  T old = ref.load(std::memory_order_relaxed);
  while (old < val && !ref.compare_exchange_weak(old, val, std::memory_order_relaxed)) {
  }
  return old;
}
template <typename T>
inline T atomicAnd(T* address, std::type_identity_t<T> val) {
  return std::atomic_ref<T>(*address).fetch_and(val, std::memory_order_relaxed);
}
template <typename T>
inline T atomicOr(T* address, std::type_identity_t<T> val) {
  return std::atomic_ref<T>(*address).fetch_or(val, std::memory_order_relaxed);
}
template <typename T>
inline T atomicXor(T* address, std::type_identity_t<T> val) {
  return std::atomic_ref<T>(*address).fetch_xor(val, std::memory_order_relaxed);
}
// ((old >= val) ? 0 : old + 1)
inline unsigned atomicInc(unsigned* address, unsigned val) {
  std::atomic_ref<unsigned> ref(*address);
  unsigned old = ref.load(std::memory_order_relaxed);
  while (!ref.compare_exchange_weak(old, old >= val ? 0u : old + 1u, std::memory_order_relaxed)) {
  }
  return old;
}
// (((old == 0) || (old > val)) ? val : old - 1)
inline unsigned atomicDec(unsigned* address, unsigned val) {
  std::atomic_ref<unsigned> ref(*address);
  unsigned old = ref.load(std::memory_order_relaxed);
  while (!ref.compare_exchange_weak(old, (old == 0u || old > val) ? val : old - 1u, std::memory_order_relaxed)) {
  }
  return old;
}

// ---------------------------------------------------------------------------------------------
// Math intrinsics (full precision here) and bit tricks.

inline float __expf(float x) { return ::expf(x); }
inline float __exp10f(float x) { return ::powf(10.0f, x); }
inline float __logf(float x) { return ::logf(x); }
inline float __log2f(float x) { return ::log2f(x); }
inline float __log10f(float x) { return ::log10f(x); }
inline float __powf(float x, float y) { return ::powf(x, y); }
inline float __sinf(float x) { return ::sinf(x); }
inline float __cosf(float x) { return ::cosf(x); }
inline float __tanf(float x) { return ::tanf(x); }
inline void __sincosf(float x, float* s, float* c) {
  *s = ::sinf(x);
  *c = ::cosf(x);
}
inline float __fdividef(float a, float b) { return a / b; }
inline float __fdiv_rn(float a, float b) { return a / b; }
inline float __frcp_rn(float x) { return 1.0f / x; }
inline float __fsqrt_rn(float x) { return ::sqrtf(x); }
inline float __fadd_rn(float a, float b) { return a + b; }
inline float __fsub_rn(float a, float b) { return a - b; }
inline float __fmul_rn(float a, float b) { return a * b; }
inline float __fmaf_rn(float a, float b, float c) { return ::fmaf(a, b, c); }
inline double __fma_rn(double a, double b, double c) { return ::fma(a, b, c); }
inline double __dadd_rn(double a, double b) { return a + b; }
inline double __dmul_rn(double a, double b) { return a * b; }
inline float __saturatef(float x) { return x > 0.0f ? (x < 1.0f ? x : 1.0f) : 0.0f; }  // NaN -> 0
inline float rsqrtf(float x) { return 1.0f / ::sqrtf(x); }
inline double rsqrt(double x) { return 1.0 / ::sqrt(x); }
inline float rcbrtf(float x) { return 1.0f / ::cbrtf(x); }
inline float normcdff(float x) { return 0.5f * ::erfcf(-x * 0.70710678118654752f); }
inline double normcdf(double x) { return 0.5 * ::erfc(-x * 0.70710678118654752); }

inline float __int_as_float(int v) { return std::bit_cast<float>(v); }
inline int __float_as_int(float v) { return std::bit_cast<int>(v); }
inline float __uint_as_float(unsigned v) { return std::bit_cast<float>(v); }
inline unsigned __float_as_uint(float v) { return std::bit_cast<unsigned>(v); }
inline double __longlong_as_double(long long v) { return std::bit_cast<double>(v); }
inline long long __double_as_longlong(double v) { return std::bit_cast<long long>(v); }

inline int __popc(unsigned x) { return std::popcount(x); }
inline int __popcll(unsigned long long x) { return std::popcount(x); }
inline int __clz(int x) { return std::countl_zero(unsigned(x)); }
inline int __clzll(long long x) { return std::countl_zero((unsigned long long)x); }
inline int __ffs(int x) { return x == 0 ? 0 : std::countr_zero(unsigned(x)) + 1; }
inline int __ffsll(long long x) { return x == 0 ? 0 : std::countr_zero((unsigned long long)x) + 1; }
inline unsigned __brev(unsigned x) {
  unsigned r = 0;
  for (int i = 0; i < 32; ++i, x >>= 1) r = (r << 1) | (x & 1u);
  return r;
}
inline unsigned long long __brevll(unsigned long long x) {
  unsigned long long r = 0;
  for (int i = 0; i < 64; ++i, x >>= 1) r = (r << 1) | (x & 1ull);
  return r;
}
inline int __mul24(int a, int b) { return int((long long)a * b); }
inline unsigned __umul24(unsigned a, unsigned b) { return a * b; }
inline int __mulhi(int a, int b) { return int(((long long)a * b) >> 32); }
inline unsigned __umulhi(unsigned a, unsigned b) { return unsigned(((unsigned long long)a * b) >> 32); }
inline long long __mul64hi(long long a, long long b) { return (long long)(((__int128)a * b) >> 64); }
inline unsigned long long __umul64hi(unsigned long long a, unsigned long long b) {
  return (unsigned long long)(((unsigned __int128)a * b) >> 64);
}

// CUDA's global min/max overloads, for any mix of arithmetic types.
template <typename A, typename B>
  requires(std::is_arithmetic_v<A> && std::is_arithmetic_v<B>)
inline constexpr std::common_type_t<A, B> min(A a, B b) {
  using C = std::common_type_t<A, B>;
  return C(b) < C(a) ? C(b) : C(a);
}
template <typename A, typename B>
  requires(std::is_arithmetic_v<A> && std::is_arithmetic_v<B>)
inline constexpr std::common_type_t<A, B> max(A a, B b) {
  using C = std::common_type_t<A, B>;
  return C(a) < C(b) ? C(b) : C(a);
}
