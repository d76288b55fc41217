// Which library runs the CPU's GEMMs: Eigen or OpenBLAS, chosen per shape class by measurement.
//
// Why choose at all: neither library is fastest on every x86 machine. On the 2-core AMD EPYC
// (Zen 3) VM OpenBLAS's sgemm runs at 1.6-1.8x Eigen's from 256^3 to 1024^3; on an AMD EPYC Zen 4
// it was 1.27x; on an earlier VM Eigen was level or a little ahead. A fixed default is right on
// one machine and slow on the next, so `auto` (the default) times both on the first GEMM of each
// shape class and keeps the faster (OpenBLAS unless Eigen wins by a margin: faster_provider below).
//
// A shape class is (dtype, m, n, k) with each size rounded down to a power of 4 (m 256 covers
// 256..1023). The first GEMM of a class times both providers on one thread, on scratch operands
// of its shape (scaled down to at most 2^25 multiply-adds so it stays a few milliseconds), five
// interleaved rounds, fastest of each. One thread: the libraries differ in their micro-kernels,
// and a one-thread timing is what other processes on the cores disturb least.
//
// Every process on a machine must make the same choice, or two runs of the same config (a run and
// its resume, the ranks of a data-parallel job, the determinism tests) would round differently.
// So the choice is kept on disk, one file per class, under
//   $DEFINE_CACHE_DIR (or $XDG_CACHE_HOME/define, or $HOME/.cache/define)/cpu-gemm/<machine>/
// where <machine> names the CPU model and hashes its flags, the OpenBLAS build and the define
// build type. The first process to finish measuring a class creates its file (hard link of a
// complete temporary, so a reader never sees half a file, and an existing file is never
// replaced); every process, the first included, then uses what the file says. A file that does
// not read as a choice is measured again and replaced. DEFINE_CACHE_DIR=off keeps choices in
// memory only.
//
// DEFINE_CPU_GEMM=eigen or =openblas forces one provider for every GEMM (openblas is an error in a
// build without OpenBLAS); DEFINE_CPU_GEMM=auto is the default. float64 GEMMs (the gradient
// checks) always use Eigen unless openblas is forced: their speed does not matter, and a reference
// that never moves is worth more.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace define::kernels::cpu {

enum class GemmProvider { Eigen, OpenBlas };
enum class GemmChoice { Auto, Eigen, OpenBlas };

const char* to_string(GemmProvider p);
const char* to_string(GemmChoice c);
GemmChoice parse_gemm_choice(std::string_view s);  // auto | eigen | openblas, else an error

// True when this build has the OpenBLAS path (CMake found libopenblas).
bool openblas_available();

// The kernels OpenBLAS runs in this process ("SkylakeX", "Haswell", "Prescott", ...); "" in a build
// without OpenBLAS.
std::string openblas_core();

// The OpenBLAS kernels this CPU runs best by its features: "SkylakeX" with AVX-512 (F, BW, VL,
// DQ), "Haswell" with AVX2 and FMA, else "".
std::string openblas_kernels_for_cpu();

// The OPENBLAS_CORETYPE this process should run with, when OpenBLAS did not recognise the CPU.
// Debian 12's OpenBLAS (0.3.21) falls back to its generic "Prescott" kernels on x86 models newer
// than it knows (an Intel Xeon of family 6, model 207, for one): SGEMM 3-4x slower than with the
// AVX-512 kernels that CPU runs, so auto picks Eigen everywhere, and Eigen is itself 1.1-1.45x
// slower than OpenBLAS's AVX-512 kernels on the LSTM and translation models' GEMMs there
// (bench/gemm_provider_bench, 2026-11-29). Returns openblas_kernels_for_cpu() in that case, ""
// when OpenBLAS recognised the CPU, the user set OPENBLAS_CORETYPE, or the build has no OpenBLAS. OpenBLAS reads the variable once, when it
// is loaded: the programs restart themselves with it (core/omp_wait.h).
std::string openblas_coretype_override();

// What the programs (`define`, the benchmarks) call first thing in main(): restarts the program
// once with OMP_WAIT_POLICY=PASSIVE and, where needed, the OPENBLAS_CORETYPE above
// (prefer_passive_omp_wait, core/omp_wait.h). Variables the user set are left alone.
void restart_with_library_settings(char** argv);

// What a class's one-thread timings choose: OpenBLAS unless Eigen is faster by more than
// kEigenMargin. Why the margin: the timing runs on one thread and on scaled-down operands, where
// the two libraries often tie (within 1-4% on an Intel Xeon, model 167), while the real GEMMs of a
// 2-thread run are larger and threaded, where OpenBLAS was 10-26% ahead on those same tied classes
// (Eigen's win, where it had one, was 2-10%). Choosing OpenBLAS on a tie risks at most the margin;
// choosing Eigen on a tie risked a quarter. Where Eigen clearly wins (products with a dimension
// under 16, where OpenBLAS's call overhead shows: 20-70%), it is still chosen.
inline constexpr double kEigenMargin = 0.05;
GemmProvider faster_provider(double eigen_seconds, double openblas_seconds);

// The provider for an m x k by k x n GEMM (one of a batch). Called outside OpenMP regions (it may
// time both providers on first use of a shape class); thread-safe.
GemmProvider gemm_provider(std::int64_t m, std::int64_t n, std::int64_t k, bool is_double);

// C[m, n] = alpha * op(A) op(B) + beta * C for row-major matrices with leading dimensions lda,
// ldb, ldc (op(A) = A^T when trans_a, A being stored k x m). With beta == 0, C is never read.
// On the calling thread only (inside an OpenMP team both libraries run serially).
template <typename T>
void gemm_row_major(GemmProvider p, bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k,
                    T alpha, const T* a, std::int64_t lda, const T* b, std::int64_t ldb, T beta, T* c,
                    std::int64_t ldc);

// What auto decided in this process, one entry per shape class, in order of first use.
struct GemmDecision {
  std::string shape_class;  // e.g. "f32 m256 n64 k1024"
  GemmProvider provider = GemmProvider::Eigen;
  double eigen_seconds = 0, openblas_seconds = 0;  // this process's timings (0 when read from the cache)
  bool from_cache = false;                         // the choice came from an existing cache file
};
std::vector<GemmDecision> gemm_decisions();

// The class a shape falls in (the cache file's name with spaces for separators).
std::string gemm_shape_class(std::int64_t m, std::int64_t n, std::int64_t k, bool is_double);

// Settings normally read once from the environment (DEFINE_CPU_GEMM, DEFINE_CACHE_DIR). Setting
// them forgets this process's decisions: for tests and benchmarks. cache_dir: the folder under
// which cpu-gemm/ lives; std::nullopt keeps choices in memory only.
struct GemmProviderSettings {
  GemmChoice choice = GemmChoice::Auto;
  std::optional<std::string> cache_dir;
};
GemmProviderSettings gemm_provider_settings();
void set_gemm_provider_settings(const GemmProviderSettings& s);

// The folder this machine's choices live in (empty when they are kept in memory only).
std::string gemm_cache_folder();

}  // namespace define::kernels::cpu
