// The CPU GEMM provider choice: see gemm_provider.h for the policy and why.
//
// GCC 12 reports -Wmaybe-uninitialized inside its own AVX-512 intrinsic headers when Eigen's GEMM
// kernels are inlined (see kernels/cpu/matmul.cpp): a known false positive, silenced for this file.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#endif

#include "kernels/cpu/gemm_provider.h"

#include <algorithm>
#include <atomic>
#include <bit>
#include <cctype>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <mutex>
#include <type_traits>

#include <Eigen/Core>
#include <fmt/format.h>
#include <omp.h>
#include <unistd.h>
#if DEFINE_CPU_BLAS
#include <cblas.h>
#endif
#if DEFINE_CPU_ONEDNN
#include <dnnl.h>
#endif

#include "core/cpu_info.h"
#include "core/error.h"
#include "core/fnv1a.h"
#include "core/omp_wait.h"

namespace define::kernels::cpu {
namespace {

namespace fs = std::filesystem;

// Calibration: operands scaled down to at most this many multiply-adds per thread, and to at most
// kMaxCalibrationElements elements of A, B and C together (a GEMM with a short k, such as an outer
// product, would otherwise allocate gigabytes for the same work), timed over enough repetitions
// that one timing covers at least kMinTimedWork (at most kMaxReps), kRounds interleaved rounds.
constexpr std::int64_t kMaxCalibrationWork = std::int64_t{1} << 29;
constexpr std::int64_t kMaxCalibrationElements = std::int64_t{1} << 24;  // 64 MiB of float32
constexpr std::int64_t kMinTimedWork = std::int64_t{1} << 20;
constexpr std::int64_t kMaxReps = 4096;  // tiny classes: a few milliseconds in all, not a second
constexpr int kRounds = 5;
// A timing during which a thread of this process waited for a CPU longer than kContendedShare of
// the timing plus kContendedSlackNs (wake-ups cost a few microseconds) is taken again, at most
// kMaxRetimes times (a machine busy throughout keeps the last one).
constexpr double kContendedShare = 0.02;
constexpr std::int64_t kContendedSlackNs = 20000;
constexpr int kMaxRetimes = 3;
// v2: Eigen must win by kEigenMargin; v3: oneDNN, threaded and serial classes timed as they run;
// v4: the operands' transposition is part of the class, calibration at up to 2^27 per thread;
// v5: at up to 2^29.
constexpr const char* kCacheVersion = "v5";

// ---- Eigen, OpenBLAS and oneDNN on row-major operands -------------------------------------

template <typename T, int Order>
using ConstMap = Eigen::Map<const Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Order>, Eigen::Unaligned,
                            Eigen::OuterStride<>>;
template <typename T>
using RowMap = Eigen::Map<Eigen::Matrix<T, Eigen::Dynamic, Eigen::Dynamic, Eigen::RowMajor>, Eigen::Unaligned,
                          Eigen::OuterStride<>>;

template <typename T, typename A, typename B>
void eigen_product(RowMap<T>& c, const A& a, const B& b, T alpha, T beta) {
  if (beta == T(0)) {
    if (alpha == T(1)) c.noalias() = a * b;  // C's old contents (possibly NaN garbage) never read
    else c.noalias() = alpha * a * b;
  } else {
    if (beta != T(1)) c *= beta;
    c.noalias() += alpha * a * b;
  }
}

// op(A) is A's storage read as m x k: row-major with outer stride lda, or, transposed, the same
// bytes read column-major.
template <typename T>
void eigen_gemm(bool ta, bool tb, std::int64_t m, std::int64_t n, std::int64_t k, T alpha, const T* a,
                std::int64_t lda, const T* b, std::int64_t ldb, T beta, T* c, std::int64_t ldc) {
  RowMap<T> C(c, m, n, Eigen::OuterStride<>(ldc));
  if (k == 0) {  // an empty product (Eigen asserts on empty reductions)
    if (beta == T(0)) C.setZero();
    else C *= beta;
    return;
  }
  const Eigen::OuterStride<> sa(lda), sb(ldb);
  if (!ta && !tb)
    eigen_product(C, ConstMap<T, Eigen::RowMajor>(a, m, k, sa), ConstMap<T, Eigen::RowMajor>(b, k, n, sb), alpha, beta);
  else if (!ta)
    eigen_product(C, ConstMap<T, Eigen::RowMajor>(a, m, k, sa), ConstMap<T, Eigen::ColMajor>(b, k, n, sb), alpha, beta);
  else if (!tb)
    eigen_product(C, ConstMap<T, Eigen::ColMajor>(a, m, k, sa), ConstMap<T, Eigen::RowMajor>(b, k, n, sb), alpha, beta);
  else
    eigen_product(C, ConstMap<T, Eigen::ColMajor>(a, m, k, sa), ConstMap<T, Eigen::ColMajor>(b, k, n, sb), alpha, beta);
}

// BLAS and oneDNN want each leading dimension at least the stored row length (and 1); a dim of
// size 1 may carry any stride, so take the larger.
struct LeadingDims {
  std::int64_t a, b, c;
};
LeadingDims library_leading_dims(bool ta, bool tb, std::int64_t m, std::int64_t n, std::int64_t k, std::int64_t lda,
                                 std::int64_t ldb, std::int64_t ldc) {
  return {std::max<std::int64_t>({lda, ta ? m : k, 1}), std::max<std::int64_t>({ldb, tb ? k : n, 1}),
          std::max<std::int64_t>({ldc, n, 1})};
}

#if DEFINE_CPU_BLAS
// False when a size does not fit BLAS's int (the caller then uses Eigen).
template <typename T>
bool blas_gemm(bool ta, bool tb, std::int64_t m, std::int64_t n, std::int64_t k, T alpha, const T* a,
               std::int64_t lda, const T* b, std::int64_t ldb, T beta, T* c, std::int64_t ldc) {
  const auto [la, lb, lc] = library_leading_dims(ta, tb, m, n, k, lda, ldb, ldc);
  constexpr std::int64_t kMax = std::numeric_limits<blasint>::max();
  if (std::max({m, n, k, la, lb, lc}) > kMax) return false;
  const auto i = [](std::int64_t v) { return static_cast<blasint>(v); };
  const CBLAS_TRANSPOSE ca = ta ? CblasTrans : CblasNoTrans, cb = tb ? CblasTrans : CblasNoTrans;
  if constexpr (std::is_same_v<T, float>)
    cblas_sgemm(CblasRowMajor, ca, cb, i(m), i(n), i(k), alpha, a, i(la), b, i(lb), beta, c, i(lc));
  else
    cblas_dgemm(CblasRowMajor, ca, cb, i(m), i(n), i(k), alpha, a, i(la), b, i(lb), beta, c, i(lc));
  return true;
}
#endif

#if DEFINE_CPU_ONEDNN
// False for float64 (oneDNN has no double GEMM) or when oneDNN refuses the call: the caller then
// uses Eigen.
template <typename T>
bool onednn_gemm(bool ta, bool tb, std::int64_t m, std::int64_t n, std::int64_t k, T alpha, const T* a,
                 std::int64_t lda, const T* b, std::int64_t ldb, T beta, T* c, std::int64_t ldc) {
  if constexpr (!std::is_same_v<T, float>) {
    return false;
  } else {
    const auto [la, lb, lc] = library_leading_dims(ta, tb, m, n, k, lda, ldb, ldc);
    return dnnl_sgemm(ta ? 'T' : 'N', tb ? 'T' : 'N', m, n, k, alpha, a, la, b, lb, beta, c, lc) == dnnl_success;
  }
}
#endif

// ---- settings and the machine's name -----------------------------------------------------------

std::optional<std::string> default_cache_dir() {
  if (const char* d = std::getenv("DEFINE_CACHE_DIR")) {
    const std::string_view v(d);
    if (v.empty() || v == "off") return std::nullopt;
    return std::string(v);
  }
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) return (fs::path(x) / "define").string();
  if (const char* h = std::getenv("HOME"); h && *h) return (fs::path(h) / ".cache" / "define").string();
  return std::nullopt;
}

GemmProviderSettings settings_from_environment() {
  GemmProviderSettings s;
  if (const char* v = std::getenv("DEFINE_CPU_GEMM")) s.choice = parse_gemm_choice(v);
  s.cache_dir = default_cache_dir();
  return s;
}

// "<cpu model>-<hash>": the model for a reader, the hash over what else changes the timings.
std::string machine_name() {
  const std::string model = cpuinfo_field("model name", "unknown-cpu"), flags = cpuinfo_field("flags");
  std::string readable;
  for (const char ch : model) {
    const bool keep = std::isalnum(static_cast<unsigned char>(ch)) != 0;
    if (keep) readable += ch;
    else if (!readable.empty() && readable.back() != '_') readable += '_';
  }
  while (!readable.empty() && readable.back() == '_') readable.pop_back();
  std::string build = fmt::format("{} eigen {}.{}.{}", kCacheVersion, EIGEN_WORLD_VERSION, EIGEN_MAJOR_VERSION,
                                  EIGEN_MINOR_VERSION);
#if DEFINE_CPU_BLAS
  build += fmt::format(" openblas {} {}", openblas_get_config(), openblas_get_corename());
#endif
  build += " onednn " + onednn_version();
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
  build += " sanitized";  // instrumented Eigen against uninstrumented OpenBLAS: its own choices
#endif
#ifndef NDEBUG
  build += " debug";
#endif
  const std::string facts = model + '\n' + flags + '\n' + build;
  std::uint64_t hash = kFnv1aOffset;
  fnv1a(hash, facts.data(), facts.size());
  return fmt::format("{}-{:016x}", readable.empty() ? "cpu" : readable, hash);
}

// ---- measuring ----------------------------------------------------------------------------------

template <typename T>
double seconds_of(GemmProvider p, std::int64_t m, std::int64_t n, std::int64_t k, GemmTrans trans,
                  const std::vector<T>& a, const std::vector<T>& b, std::vector<T>& c, int reps) {
  const std::int64_t lda = trans.a ? m : k, ldb = trans.b ? k : n;
  const auto t0 = std::chrono::steady_clock::now();
  for (int r = 0; r < reps; ++r)
    gemm_row_major<T>(p, trans.a, trans.b, m, n, k, T(1), a.data(), lda, b.data(), ldb, T(0), c.data(), n);
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / reps;
}

// How long this process's threads have been runnable but waiting for a CPU, in nanoseconds, summed
// (the second field of /proc/self/task/*/schedstat); -1 where the kernel does not say. Why it
// matters: a choice is kept on disk for every later process, so a timing taken while something
// else held a core must not decide it (a calibration beside another program once kept the slower
// library for every later run: docs/results.md).
std::int64_t cpu_wait_ns() {
  std::error_code ec;
  fs::directory_iterator it("/proc/self/task", ec);
  if (ec) return -1;
  std::int64_t total = 0;
  bool any = false;
  for (; it != fs::directory_iterator(); it.increment(ec)) {
    if (ec) break;
    std::ifstream in(it->path() / "schedstat");  // a thread that has just exited reads as nothing
    std::int64_t running = 0, waiting = 0;
    if (in >> running >> waiting) {
      total += waiting;
      any = true;
    }
  }
  return any ? total : -1;
}

// Times the providers the build has, on the run's threads (one for a serial class); fills d's
// timings and provider.
template <typename T>
void measure(std::int64_t m, std::int64_t n, std::int64_t k, GemmRun run, GemmTrans trans, GemmDecision& d) {
  m = std::max<std::int64_t>(m, 1), n = std::max<std::int64_t>(n, 1), k = std::max<std::int64_t>(k, 1);
  const int saved_threads = omp_get_max_threads();
  const int threads = run == GemmRun::Serial ? 1 : saved_threads;
  // Scale the longest dimension down until the work and the operands fit (the class keeps its
  // shape's character).
  while (m * n * k > kMaxCalibrationWork * threads || m * k + k * n + m * n > kMaxCalibrationElements) {
    std::int64_t& longest = m >= n && m >= k ? m : (n >= k ? n : k);
    longest = std::max<std::int64_t>(longest / 2, 1);
  }
  std::vector<T> a(static_cast<std::size_t>(m * k)), b(static_cast<std::size_t>(k * n)), c(static_cast<std::size_t>(m * n));
  for (std::size_t i = 0; i < a.size(); ++i) a[i] = T(static_cast<int>(i % 17) - 8) / T(16);
  for (std::size_t i = 0; i < b.size(); ++i) b[i] = T(static_cast<int>(i % 13) - 6) / T(16);
  const int reps = static_cast<int>(std::clamp<std::int64_t>(kMinTimedWork / (m * n * k), 1, kMaxReps));
  omp_set_num_threads(threads);  // this thread's setting only; every library follows it
  std::vector<GemmProvider> candidates{GemmProvider::Eigen};
  if (openblas_available()) candidates.push_back(GemmProvider::OpenBlas);
  if (onednn_available()) candidates.push_back(GemmProvider::OneDnn);
  std::map<GemmProvider, double> best;
  for (const GemmProvider p : candidates) {  // warm-up: page-in, the libraries' buffers and JIT code
    seconds_of<T>(p, m, n, k, trans, a, b, c, 1);
    best[p] = std::numeric_limits<double>::infinity();
  }
  // Interleaved, so a slow moment costs every provider; a timing while the process waited for a
  // CPU is taken again (cpu_wait_ns).
  for (int r = 0; r < kRounds; ++r)
    for (const GemmProvider p : candidates)
      for (int attempt = 0;; ++attempt) {
        const std::int64_t wait_before = cpu_wait_ns();
        const double seconds = seconds_of<T>(p, m, n, k, trans, a, b, c, reps);
        const std::int64_t wait_after = cpu_wait_ns();
        const bool contended = wait_before >= 0 && wait_after >= 0 &&
                               static_cast<double>(wait_after - wait_before) >
                                   kContendedShare * seconds * reps * 1e9 + static_cast<double>(kContendedSlackNs);
        if (!contended || attempt == kMaxRetimes) {
          best[p] = std::min(best[p], seconds);
          break;
        }
        ++d.retimed;
      }
  omp_set_num_threads(saved_threads);
  const auto time_of = [&](GemmProvider p) {
    const auto it = best.find(p);
    return it == best.end() ? std::numeric_limits<double>::infinity() : it->second;
  };
  d.eigen_seconds = time_of(GemmProvider::Eigen);
  d.openblas_seconds = time_of(GemmProvider::OpenBlas);
  d.onednn_seconds = time_of(GemmProvider::OneDnn);
  d.provider = faster_provider(d.eigen_seconds, d.openblas_seconds, d.onednn_seconds);
}

// ---- the cache ------------------------------------------------------------------------------------

std::optional<GemmProvider> read_choice(const fs::path& file) {
  std::ifstream in(file);
  std::string word;
  if (!(in >> word)) return std::nullopt;
  if (word == "eigen") return GemmProvider::Eigen;
  if (word == "openblas" && openblas_available()) return GemmProvider::OpenBlas;
  if (word == "onednn" && onednn_available()) return GemmProvider::OneDnn;
  return std::nullopt;
}

// Says once per process that choices cannot be kept, and what that costs.
void warn_unwritable(const fs::path& folder, const std::string& why) {
  static std::once_flag once;
  std::call_once(once, [&] {
    std::fprintf(stderr,
                 "define: cannot keep CPU GEMM choices in '%s' (%s); this process measures its own, so another "
                 "process (a resume, another rank) may choose differently and round differently. Set "
                 "DEFINE_CACHE_DIR to a writable folder, or DEFINE_CPU_GEMM=eigen, =openblas or =onednn.\n",
                 folder.c_str(), why.c_str());
  });
}

// Publishes d under `file` unless another process got there first; returns what the file says
// afterwards (d's own choice, with a warning, when the folder cannot be written).
GemmProvider publish(const fs::path& file, const GemmDecision& d) {
  std::error_code ec;
  fs::create_directories(file.parent_path(), ec);
  static std::atomic<int> counter{0};
  const fs::path tmp = file.parent_path() / fmt::format(".{}.{}.{}", file.filename().string(), ::getpid(), counter++);
  {
    std::ofstream out(tmp, std::ios::trunc);
    out << to_string(d.provider) << " eigen_s " << d.eigen_seconds << " openblas_s " << d.openblas_seconds
        << " onednn_s " << d.onednn_seconds << '\n';
    if (!out.flush()) {
      warn_unwritable(file.parent_path(), ec ? ec.message() : "cannot create a file there");
      fs::remove(tmp, ec);
      return d.provider;
    }
  }
  GemmProvider result = d.provider;
  if (::link(tmp.c_str(), file.c_str()) != 0) {
    const int err = errno;
    if (err != EEXIST) warn_unwritable(file.parent_path(), std::strerror(err));
    else if (const auto theirs = read_choice(file)) result = *theirs;  // the first process's choice holds
    else fs::rename(tmp, file, ec);                                    // unreadable: replace it
  }
  fs::remove(tmp, ec);
  return result;
}

struct State {
  std::mutex mutex;
  bool loaded = false;
  GemmProviderSettings settings;
  std::string folder;  // cpu-gemm/<machine>, empty without a cache
  std::map<std::uint32_t, GemmProvider> chosen;  // by class_key: no string built per GEMM
  std::vector<GemmDecision> decisions;

  void load_locked() {
    if (loaded) return;
    settings = settings_from_environment();
    set_folder_locked();
    loaded = true;
  }
  void set_folder_locked() {
    folder = settings.cache_dir ? (fs::path(*settings.cache_dir) / "cpu-gemm" / machine_name()).string() : "";
  }
};

State& state() {
  static State s;
  return s;
}

std::string file_name_of(const std::string& shape_class) {
  std::string f = shape_class;
  std::replace(f.begin(), f.end(), ' ', '-');
  return f;
}

// floor(log4 x), 0 for x <= 1.
int log4_floor(std::int64_t x) {
  return x <= 1 ? 0 : (std::bit_width(static_cast<std::uint64_t>(x)) - 1) / 2;
}
std::int64_t power_of_four_floor(std::int64_t x) { return std::int64_t{1} << (2 * log4_floor(x)); }

// The shape class as a number: the three exponents (each < 32), the transpositions, how it runs
// and the dtype.
std::uint32_t class_key(std::int64_t m, std::int64_t n, std::int64_t k, bool is_double, GemmRun run,
                        GemmTrans trans) {
  return static_cast<std::uint32_t>((log4_floor(m) << 16) | (log4_floor(n) << 11) | (log4_floor(k) << 6) |
                                    (trans.a ? 8 : 0) | (trans.b ? 4 : 0) | (run == GemmRun::Serial ? 2 : 0) |
                                    (is_double ? 1 : 0));
}

}  // namespace

GemmProvider faster_provider(double eigen_seconds, double openblas_seconds, double onednn_seconds) {
  const GemmProvider library = onednn_seconds < openblas_seconds ? GemmProvider::OneDnn : GemmProvider::OpenBlas;
  const double library_seconds = std::min(openblas_seconds, onednn_seconds);
  return eigen_seconds < library_seconds * (1 - kEigenMargin) ? GemmProvider::Eigen : library;
}

const char* to_string(GemmProvider p) {
  switch (p) {
    case GemmProvider::OpenBlas: return "openblas";
    case GemmProvider::OneDnn: return "onednn";
    case GemmProvider::Eigen: break;
  }
  return "eigen";
}
const char* to_string(GemmChoice c) {
  switch (c) {
    case GemmChoice::Auto: return "auto";
    case GemmChoice::OpenBlas: return "openblas";
    case GemmChoice::OneDnn: return "onednn";
    case GemmChoice::Eigen: break;
  }
  return "eigen";
}

GemmChoice parse_gemm_choice(std::string_view s) {
  if (s == "auto" || s.empty()) return GemmChoice::Auto;
  if (s == "eigen") return GemmChoice::Eigen;
  if (s == "openblas") {
    if (!openblas_available())
      fail("DEFINE_CPU_GEMM", "openblas was asked for, but this build has no OpenBLAS (install "
                              "libopenblas-openmp-dev and reconfigure), use auto or eigen");
    return GemmChoice::OpenBlas;
  }
  if (s == "onednn") {
    if (!onednn_available())
      fail("DEFINE_CPU_GEMM", "onednn was asked for, but this build has no oneDNN (install libdnnl-dev and "
                              "reconfigure), use auto, eigen or openblas");
    return GemmChoice::OneDnn;
  }
  fail("DEFINE_CPU_GEMM", "unknown value '{}' (expected auto, eigen, openblas or onednn)", s);
}

bool openblas_available() {
#if DEFINE_CPU_BLAS
  return true;
#else
  return false;
#endif
}

bool onednn_available() {
#if DEFINE_CPU_ONEDNN
  return true;
#else
  return false;
#endif
}

std::string onednn_version() {
#if DEFINE_CPU_ONEDNN
  const dnnl_version_t* v = dnnl_version();
  return fmt::format("{}.{}.{}", v->major, v->minor, v->patch);
#else
  return {};
#endif
}

std::string openblas_core() {
#if DEFINE_CPU_BLAS
  return openblas_get_corename();
#else
  return {};
#endif
}

std::string openblas_kernels_for_cpu() {
  if (__builtin_cpu_supports("avx512f") && __builtin_cpu_supports("avx512bw") && __builtin_cpu_supports("avx512vl") &&
      __builtin_cpu_supports("avx512dq"))
    return "SkylakeX";
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma")) return "Haswell";
  return {};
}

std::string openblas_coretype_override() {
  if (std::getenv("OPENBLAS_CORETYPE") != nullptr || openblas_core() != "Prescott") return {};
  return openblas_kernels_for_cpu();
}

void restart_with_library_settings(char** argv) {
  prefer_passive_omp_wait(argv, {{"OPENBLAS_CORETYPE", openblas_coretype_override()}});
}

std::string gemm_shape_class(std::int64_t m, std::int64_t n, std::int64_t k, bool is_double, GemmRun run,
                             GemmTrans trans) {
  return fmt::format("{} m{} n{} k{} {}{}{}", is_double ? "f64" : "f32", power_of_four_floor(m),
                     power_of_four_floor(n), power_of_four_floor(k), trans.a ? 't' : 'n', trans.b ? 't' : 'n',
                     run == GemmRun::Serial ? " serial" : "");
}

GemmProvider gemm_provider(std::int64_t m, std::int64_t n, std::int64_t k, bool is_double, GemmRun run,
                           GemmTrans trans) {
  State& s = state();
  std::lock_guard lock(s.mutex);
  s.load_locked();
  switch (s.settings.choice) {
    case GemmChoice::Eigen: return GemmProvider::Eigen;
    case GemmChoice::OpenBlas: return GemmProvider::OpenBlas;
    case GemmChoice::OneDnn: return GemmProvider::OneDnn;
    case GemmChoice::Auto: break;
  }
  if ((!openblas_available() && !onednn_available()) || is_double) return GemmProvider::Eigen;
  const std::uint32_t key = class_key(m, n, k, is_double, run, trans);
  if (const auto it = s.chosen.find(key); it != s.chosen.end()) return it->second;
  const std::string shape_class = gemm_shape_class(m, n, k, is_double, run, trans);

  GemmDecision d;
  d.shape_class = shape_class;
  const fs::path file = s.folder.empty() ? fs::path() : fs::path(s.folder) / file_name_of(shape_class);
  if (const auto cached = s.folder.empty() ? std::nullopt : read_choice(file)) {
    d.provider = *cached;
    d.from_cache = true;
  } else {
    measure<float>(m, n, k, run, trans, d);
    if (!s.folder.empty()) {
      const GemmProvider published = publish(file, d);
      d.from_cache = published != d.provider;
      d.provider = published;
    }
  }
  s.chosen.emplace(key, d.provider);
  s.decisions.push_back(d);
  return d.provider;
}

std::vector<GemmDecision> gemm_decisions() {
  State& s = state();
  std::lock_guard lock(s.mutex);
  return s.decisions;
}

GemmProviderSettings gemm_provider_settings() {
  State& s = state();
  std::lock_guard lock(s.mutex);
  s.load_locked();
  return s.settings;
}

void set_gemm_provider_settings(const GemmProviderSettings& settings) {
  if (settings.choice == GemmChoice::OpenBlas && !openblas_available()) parse_gemm_choice("openblas");  // the error
  if (settings.choice == GemmChoice::OneDnn && !onednn_available()) parse_gemm_choice("onednn");
  State& s = state();
  std::lock_guard lock(s.mutex);
  s.settings = settings;
  s.set_folder_locked();
  s.loaded = true;
  s.chosen.clear();
  s.decisions.clear();
}

std::string gemm_cache_folder() {
  State& s = state();
  std::lock_guard lock(s.mutex);
  s.load_locked();
  return s.folder;
}

template <typename T>
void gemm_row_major(GemmProvider p, bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k,
                    T alpha, const T* a, std::int64_t lda, const T* b, std::int64_t ldb, T beta, T* c,
                    std::int64_t ldc) {
  if (m == 0 || n == 0) return;
#if DEFINE_CPU_BLAS
  if (p == GemmProvider::OpenBlas && k > 0 && blas_gemm<T>(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc))
    return;
#endif
#if DEFINE_CPU_ONEDNN
  if (p == GemmProvider::OneDnn && k > 0 &&
      onednn_gemm<T>(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc))
    return;
#endif
  (void)p;
  eigen_gemm<T>(trans_a, trans_b, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc);
}

template void gemm_row_major<float>(GemmProvider, bool, bool, std::int64_t, std::int64_t, std::int64_t, float,
                                    const float*, std::int64_t, const float*, std::int64_t, float, float*,
                                    std::int64_t);
template void gemm_row_major<double>(GemmProvider, bool, bool, std::int64_t, std::int64_t, std::int64_t, double,
                                     const double*, std::int64_t, const double*, std::int64_t, double, double*,
                                     std::int64_t);

}  // namespace define::kernels::cpu
