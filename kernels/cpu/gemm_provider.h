// Which library runs the CPU's GEMMs: Eigen, OpenBLAS or oneDNN, chosen per shape class by measurement.
//
// Why choose at all: no one library is fastest on every x86 machine and every shape; they differ
// most in how they thread and pack, and their order changes from CPU to CPU (docs/results.md).
// A fixed default is right on one machine and slow on the next, so `auto` (the default) times
// every provider the build has on the first GEMM of each shape class and keeps the fastest
// (faster_provider below: Eigen only when it wins by a margin).
//
// A shape class is (dtype, m, n, k, which operands are transposed, how it runs) with each size
// rounded down to a power of 4 (m 256 covers 256..1023). The transposition changes how a library
// packs its operands, and the faster library can differ with B transposed (Transformer-XL's per-head
// scores chose the slower one while classes were timed untransposed). How it runs: a threaded
// GEMM (called outside any OpenMP team, so the library threads it) or a serial one (one of many run
// by the threads of a kernel's own team); the libraries differ most in how they thread, so each
// kind is timed the way it runs. The first GEMM
// of a class times the providers on scratch operands of its shape (scaled down to at most 2^29
// multiply-adds per thread: about 0.2 s for the largest classes, once per machine), five
// interleaved rounds, fastest of each: a slow moment is other tenants' load, never the library.
// Why that large: oneDNN's lead over OpenBLAS grows with the rows, so classes scaled down further
// timed as a tie and kept the library that is slower at their real size (a tie goes to OpenBLAS).
// A timing during which one of the process's threads waited for a CPU (another program held a
// core) is taken again, up to three times.
//
// Every process on a machine must make the same choice, or two runs of the same config (a run and
// its resume, the ranks of a data-parallel job, the determinism tests) would round differently.
// So the choice is kept on disk, one file per class, under
//   $DEFINE_CACHE_DIR (or $XDG_CACHE_HOME/define, or $HOME/.cache/define)/cpu-gemm/<machine>/
// where <machine> names the CPU model and hashes its flags, the OpenBLAS and oneDNN builds and the define
// build type. The first process to finish measuring a class creates its file (hard link of a
// complete temporary, so a reader never sees half a file, and an existing file is never
// replaced); every process, the first included, then uses what the file says. A file that does
// not read as a choice is measured again and replaced. DEFINE_CACHE_DIR=off keeps choices in
// memory only.
//
// DEFINE_CPU_GEMM=eigen, =openblas or =onednn forces one provider for every GEMM (a library the build
// lacks is an error); DEFINE_CPU_GEMM=auto is the default. float64 GEMMs (the gradient checks)
// always use Eigen unless a library is forced: their speed does not matter, and a reference that
// never moves is worth more. oneDNN has no float64 GEMM: with onednn forced, float64 runs on Eigen.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace define::kernels::cpu {

enum class GemmProvider { Eigen, OpenBlas, OneDnn };
enum class GemmChoice { Auto, Eigen, OpenBlas, OneDnn };

// Which operands of C = op(A) op(B) are transposed, as the library call sees them (row-major).
struct GemmTrans {
  bool a = false, b = false;
};

// How a GEMM runs: threaded by its library (called outside any OpenMP team), or serially on one
// thread of a kernel's own team (inside a parallel region every library runs serially).
enum class GemmRun { Threaded, Serial };

// Runs body(i) for i in [0, count): shared out over an OpenMP team when `team`, else in a plain
// loop on this thread, the way a loop of GEMMs must run. `#pragma omp parallel for if (team)`
// is not the same: with `team` false it still opens an (inactive) region, every library GEMM
// threaded inside it opens a nested one, and libgomp runs nested teams on threads of their own,
// not on the process's workers: a third thread woken for each GEMM beside a worker that may still
// be spinning, on two cores. Such GEMMs ran at the one-thread rate about half the time, which slowed
// the training of the models (docs/results.md).
template <typename Body>
void for_each_gemm(std::int64_t count, bool team, const Body& body) {
  if (team) {
#pragma omp parallel for schedule(static)
    for (std::int64_t i = 0; i < count; ++i) body(i);
  } else {
    for (std::int64_t i = 0; i < count; ++i) body(i);
  }
}

const char* to_string(GemmProvider p);
const char* to_string(GemmChoice c);
GemmChoice parse_gemm_choice(std::string_view s);  // auto | eigen | openblas | onednn, else an error

// True when this build has the OpenBLAS path (CMake found libopenblas).
bool openblas_available();
// True when this build has the oneDNN path (CMake found libdnnl).
bool onednn_available();
// oneDNN's version ("2.6.3"), "" in a build without it.
std::string onednn_version();

// The kernels OpenBLAS runs in this process ("SkylakeX", "Haswell", "Prescott", ...); "" in a build
// without OpenBLAS.
std::string openblas_core();

// The OpenBLAS kernels this CPU runs best by its features: "SkylakeX" with AVX-512 (F, BW, VL,
// DQ), "Haswell" with AVX2 and FMA, else "".
std::string openblas_kernels_for_cpu();

// The OPENBLAS_CORETYPE this process should run with, when OpenBLAS did not recognise the CPU.
// Debian 12's OpenBLAS (0.3.21) falls back to its generic "Prescott" kernels on x86 models newer
// than it knows, several times slower at SGEMM than the kernels the CPU can run, so auto would settle
// for Eigen, itself slower than OpenBLAS's right kernels (docs/results.md). Returns
// openblas_kernels_for_cpu() in that case, "" when OpenBLAS recognised the CPU, the user set
// OPENBLAS_CORETYPE, or the build has no OpenBLAS. OpenBLAS reads the variable once, when it is
// loaded: the programs restart themselves with it (core/omp_wait.h).
std::string openblas_coretype_override();

// What the programs (`define`, the benchmarks) call first thing in main(): restarts the program
// once with OMP_WAIT_POLICY=PASSIVE and, where needed, the OPENBLAS_CORETYPE above
// (prefer_passive_omp_wait, core/omp_wait.h). Variables the user set are left alone.
void restart_with_library_settings(char** argv);

// What a class's timings choose: the faster of the two BLAS libraries (OpenBLAS on a tie), unless
// Eigen is faster than that by more than kEigenMargin. A library the build lacks has an infinite
// time. Why the margin: on scaled-down operands the libraries often tie, while at the real sizes of
// those classes OpenBLAS can be well ahead (docs/results.md): choosing a library on a tie risks at
// most the margin, choosing Eigen risked far more. Where Eigen clearly wins (products with a
// dimension under 16, where the libraries' call overhead shows), it is still chosen.
inline constexpr double kEigenMargin = 0.05;
GemmProvider faster_provider(double eigen_seconds, double openblas_seconds, double onednn_seconds);

// The provider for an m x k by k x n GEMM (one of a batch) that runs as `run` says, with the
// operands transposed as `trans` says (the flags its gemm_row_major call will get). Called outside
// OpenMP regions (it may time the providers on first use of a shape class); thread-safe.
GemmProvider gemm_provider(std::int64_t m, std::int64_t n, std::int64_t k, bool is_double,
                           GemmRun run = GemmRun::Threaded, GemmTrans trans = {});

// C[m, n] = alpha * op(A) op(B) + beta * C for row-major matrices with leading dimensions lda,
// ldb, ldc (op(A) = A^T when trans_a, A being stored k x m). With beta == 0, C is never read.
// Threaded by the library outside an OpenMP team; serial inside one.
template <typename T>
void gemm_row_major(GemmProvider p, bool trans_a, bool trans_b, std::int64_t m, std::int64_t n, std::int64_t k,
                    T alpha, const T* a, std::int64_t lda, const T* b, std::int64_t ldb, T beta, T* c,
                    std::int64_t ldc);

// What auto decided in this process, one entry per shape class, in order of first use.
struct GemmDecision {
  std::string shape_class;  // e.g. "f32 m256 n64 k1024 nn" (threaded), "f32 m64 n64 k16 nt serial"
  GemmProvider provider = GemmProvider::Eigen;
  // This process's timings (0 when read from the cache; infinity for a library the build lacks).
  double eigen_seconds = 0, openblas_seconds = 0, onednn_seconds = 0;
  bool from_cache = false;                         // the choice came from an existing cache file
  int retimed = 0;  // timings taken again because a thread of the process waited for a CPU meanwhile
};
std::vector<GemmDecision> gemm_decisions();

// The class a shape falls in (the cache file's name with spaces for separators).
std::string gemm_shape_class(std::int64_t m, std::int64_t n, std::int64_t k, bool is_double,
                             GemmRun run = GemmRun::Threaded, GemmTrans trans = {});

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
