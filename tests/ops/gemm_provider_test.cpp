// The CPU GEMM provider choice (kernels/cpu/gemm_provider.h): each provider forced in turn gives the
// reference's results for every operand layout, odd sizes, batches and beta, in matmul and in
// grouped_linear (thread-count independence included; a plain threaded GEMM repeats its bits); auto
// measures a shape class (its transposition included, as matmul's library call has it) once, keeps
// the choice in its cache folder, reads it back in a later "process", honours a file another
// process wrote, replaces an unreadable one, times again what it timed while the process waited for
// a CPU, calibrates in bounded memory; and bad settings are named errors.
#include <catch2/catch.hpp>

#include <omp.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <atomic>
#include <cmath>
#include <filesystem>
#include <iterator>
#include <limits>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "harness/op_harness.h"
#include "support/common.h"
#include "autograd/views.h"
#include "kernels/backend.h"
#include "kernels/copy.h"
#include "kernels/cpu/gemm_provider.h"
#include "kernels/grouped_linear.h"
#include "kernels/matmul.h"
#include "core/process_info.h"

using namespace define;
using kernels::cpu::GemmChoice;
using kernels::cpu::GemmProvider;
using kernels::cpu::GemmProviderSettings;
namespace fs = std::filesystem;

namespace {

using define::test::check_close;
using define::test::values;

// Restores the process's provider settings when a test ends.
struct SettingsGuard {
  GemmProviderSettings saved = kernels::cpu::gemm_provider_settings();
  ~SettingsGuard() { kernels::cpu::set_gemm_provider_settings(saved); }
};

std::vector<GemmChoice> forced_choices() {
  std::vector<GemmChoice> c{GemmChoice::Eigen};
  if (kernels::cpu::openblas_available()) c.push_back(GemmChoice::OpenBlas);
  if (kernels::cpu::onednn_available()) c.push_back(GemmChoice::OneDnn);
  return c;
}

// A fresh, empty folder under the system's temporary folder.
fs::path fresh_folder(const std::string& name) {
  const fs::path p = fs::temp_directory_path() / fmt::format("define-gemm-provider-{}-{}", name, ::getpid());
  fs::remove_all(p);
  fs::create_directories(p);
  return p;
}

// False when the build has neither OpenBLAS nor oneDNN: auto then always means Eigen, and the auto
// tests have nothing to check (they skip).
bool auto_has_a_choice() { return kernels::cpu::openblas_available() || kernels::cpu::onednn_available(); }
constexpr const char* kNoChoice = "this build has neither OpenBLAS nor oneDNN, so auto always means Eigen";

std::string read_word(const fs::path& file) {
  std::ifstream in(file);
  std::string w;
  in >> w;
  return w;
}

}  // namespace

TEST_CASE("cpu gemm providers: every layout, odd sizes, batches and beta against the reference",
          "[matmul][gemm_provider][family:matmul]") {
  SettingsGuard guard;
  Generator gen(31);
  const std::int64_t B = 3, M = 37, N = 29, K = 53;
  for (const DType dt : {DType::Float32, DType::Float64}) {
    const double tol = dt == DType::Float32 ? 1e-5 : 1e-12;
    for (const GemmChoice choice : forced_choices()) {
      kernels::cpu::set_gemm_provider_settings({choice, std::nullopt});
      for (int layout = 0; layout < 8; ++layout) {
        const bool ta = layout & 1, tb = layout & 2, tc = layout & 4;
        INFO(kernels::cpu::to_string(choice) << " " << dtype_name(dt) << " trans_a " << ta << " trans_b " << tb
                                             << " transposed out " << tc);
        const Tensor a = rand_uniform(ta ? Shape{B, K, M} : Shape{B, M, K}, -1, 1, {dt}, gen);
        const Tensor b = rand_uniform(tb ? Shape{B, N, K} : Shape{B, K, N}, -1, 1, {dt}, gen);
        const Tensor c0 = rand_uniform({B, M, N}, -1, 1, {dt}, gen);
        // out either contiguous or a transposed view of a [B, N, M] buffer (column-major C).
        auto make_out = [&] {
          if (!tc) return kernels::contiguous(c0);
          return transpose(kernels::contiguous(transpose(c0, 1, 2)), 1, 2);
        };
        for (const double beta : {0.0, 0.5}) {
          const Tensor fast = make_out(), ref = make_out();
          kernels::gemm(a, b, fast, ta, tb, 1.5, beta);
          {
            kernels::CpuBackendGuard ref_guard(kernels::Backend::Ref);
            kernels::gemm(a, b, ref, ta, tb, 1.5, beta);
          }
          check_close(fast, ref, tol, tol);
        }
        // beta 0: C's old contents are never read (NaN garbage in a fresh buffer stays out).
        const Tensor garbage = make_out();
        kernels::fill(garbage, std::nan(""));
        const Tensor ref = make_out();
        kernels::gemm(a, b, garbage, ta, tb, 1.5, 0.0);
        {
          kernels::CpuBackendGuard ref_guard(kernels::Backend::Ref);
          kernels::gemm(a, b, ref, ta, tb, 1.5, 0.0);
        }
        check_close(garbage, ref, tol, tol);
      }
    }
  }
}

TEST_CASE("cpu gemm providers: grouped_linear forward and backward against the reference, any thread count",
          "[grouped_linear][gemm_provider][family:grouped_linear]") {
  SettingsGuard guard;
  Generator gen(32);
  // 600 rows: 3 row blocks for y and dx, 2 row chunks for dweight; odd per-group widths.
  const std::int64_t g = 3, k_in = 19, k_out = 23, rows = 600;
  const Tensor x = rand_uniform({rows, g * k_in}, -1, 1, {}, gen);
  const Tensor w = rand_uniform({g, k_in, k_out}, -1, 1, {}, gen);
  const Tensor b = rand_uniform({g, k_out}, -1, 1, {}, gen);
  const Tensor dy = rand_uniform({rows, g * k_out}, -1, 1, {}, gen);
  Tensor ref_y;
  kernels::GroupedLinearGrads ref;
  {
    kernels::CpuBackendGuard ref_guard(kernels::Backend::Ref);
    ref_y = kernels::grouped_linear(x, w, b);
    ref = kernels::grouped_linear_backward(dy, x, w, true, true, true);
  }
  const int saved_threads = omp_get_max_threads();
  for (const GemmChoice choice : forced_choices()) {
    kernels::cpu::set_gemm_provider_settings({choice, std::nullopt});
    std::vector<double> first_y, first_dw;
    for (const int threads : {1, 2, 3}) {
      INFO(kernels::cpu::to_string(choice) << ", " << threads << " threads");
      omp_set_num_threads(threads);
      const Tensor y = kernels::grouped_linear(x, w, b);
      const kernels::GroupedLinearGrads gr = kernels::grouped_linear_backward(dy, x, w, true, true, true);
      check_close(y, ref_y, 1e-5, 1e-5);
      check_close(gr.dx, ref.dx, 1e-5, 1e-5);
      check_close(gr.dweight, ref.dweight, 1e-4, 1e-4);  // sums of 600 products
      check_close(gr.dbias, ref.dbias, 1e-4, 1e-4);
      if (first_y.empty()) {
        first_y = values(y);
        first_dw = values(gr.dweight);
      } else {  // bit-identical for any thread count, whichever provider
        CHECK(values(y) == first_y);
        CHECK(values(gr.dweight) == first_dw);
      }
    }
  }
  omp_set_num_threads(saved_threads);
}

TEST_CASE("cpu gemm providers: a threaded GEMM repeats its bits, oneDNN's for any thread count",
          "[matmul][gemm_provider][family:matmul]") {
  SettingsGuard guard;
  Generator gen(33);
  // Big enough that every library threads it: a long inner dimension (a library that split the sum
  // across threads would round differently) and a tall-skinny dW-like product.
  const Tensor a = rand_uniform({300, 4000}, -1, 1, {}, gen), b = rand_uniform({4000, 200}, -1, 1, {}, gen);
  const Tensor at = rand_uniform({700, 250}, -1, 1, {}, gen), bt = rand_uniform({700, 200}, -1, 1, {}, gen);
  const auto products = [&] {
    const Tensor c = empty({300, 200}), ct = empty({250, 200});
    kernels::gemm(a, b, c, false, false, 1.0, 0.0);
    kernels::gemm(at, bt, ct, true, false, 1.0, 0.0);
    std::vector<double> v = values(c), vt = values(ct);
    v.insert(v.end(), vt.begin(), vt.end());
    return v;
  };
  const int saved_threads = omp_get_max_threads();
  for (const GemmChoice choice : forced_choices()) {
    kernels::cpu::set_gemm_provider_settings({choice, std::nullopt});
    std::vector<double> first;
    for (const int threads : {1, 2, 3}) {
      INFO(kernels::cpu::to_string(choice) << ", " << threads << " threads");
      omp_set_num_threads(threads);
      const std::vector<double> once = products();
      CHECK(products() == once);  // the same threads, the same bits
      // Only oneDNN keeps its blocking whatever the thread count: Eigen's serial and threaded
      // paths round differently, and OpenBLAS's blocking follows the thread count.
      if (first.empty()) first = once;
      else if (choice == GemmChoice::OneDnn) CHECK(once == first);
    }
  }
  omp_set_num_threads(saved_threads);
}

namespace {

// CPU seconds each thread of this process has run, by thread id: the scheduler's nanosecond count
// (schedstat) where the kernel keeps one, else user + system clock ticks; a thread that exits while
// it is read is left out.
std::map<long, double> thread_cpu_seconds() {
  std::map<long, double> cpu;
  for (const auto& e : fs::directory_iterator("/proc/self/task")) {
    const long tid = std::stol(e.path().filename().string());
    std::ifstream sched(e.path() / "schedstat");
    if (double ns = 0; sched >> ns) {
      cpu[tid] = ns * 1e-9;
      continue;
    }
    std::ifstream stat(e.path() / "stat");
    std::string line;
    std::getline(stat, line);
    const auto name_end = line.rfind(')');
    if (name_end == std::string::npos || name_end + 2 > line.size()) continue;  // the thread has exited
    std::istringstream fields(line.substr(name_end + 2));  // from field 3 (state) on
    std::vector<std::string> f{std::istream_iterator<std::string>(fields), {}};
    if (f.size() > 12) cpu[tid] = (std::stod(f[11]) + std::stod(f[12])) / double(sysconf(_SC_CLK_TCK));
  }
  return cpu;
}

}  // namespace

TEST_CASE("cpu gemm providers: a GEMM the library threads runs on the process's OpenMP threads",
          "[matmul][gemm_provider][family:matmul]") {
  // A library GEMM called from inside an OpenMP region, even an inactive one (`parallel for if
  // (false)`), opens a nested team, which libgomp runs on threads of its own: a third busy thread on
  // two cores, and GEMMs at the one-thread rate half the time (kernels/cpu/gemm_provider.h,
  // for_each_gemm). Here the work must land on the team's threads only, and on both of them.
  SettingsGuard guard;
  const int saved_threads = omp_get_max_threads();
  omp_set_num_threads(2);
  std::set<long> team;
#pragma omp parallel
  {
    const long tid = static_cast<long>(syscall(SYS_gettid));
#pragma omp critical
    team.insert(tid);
  }
  REQUIRE(team.size() == 2);
  Generator gen(34);
  const Tensor a = rand_uniform({512, 512}, -1, 1, {}, gen), b = rand_uniform({512, 512}, -1, 1, {}, gen);
  const Tensor c = empty({512, 512});
  for (const GemmChoice choice : forced_choices()) {
    INFO(kernels::cpu::to_string(choice));
    kernels::cpu::set_gemm_provider_settings({choice, std::nullopt});
    kernels::gemm(a, b, c, false, false, 1.0, 0.0);
    const std::map<long, double> before = thread_cpu_seconds();
    double team_least = 0, others_most = 0;
    for (int rep = 0; rep < 400 && team_least < 0.05; ++rep) {  // until each team thread ran 50 ms
      kernels::gemm(a, b, c, false, false, 1.0, 0.0);
#pragma omp parallel
      {  // a top-level region between GEMMs, as a training step's own kernels open
      }
      team_least = std::numeric_limits<double>::infinity();
      others_most = 0;
      for (const auto& [tid, seconds] : thread_cpu_seconds()) {
        const double ran = seconds - (before.count(tid) ? before.at(tid) : 0.0);
        if (team.count(tid)) team_least = std::min(team_least, ran);
        else others_most = std::max(others_most, ran);
      }
    }
    INFO("least CPU time of a team thread " << team_least << " s, most of another thread " << others_most << " s");
    CHECK(team_least >= 0.05);               // the library threaded the GEMM over the team
    CHECK(others_most < 0.1 * team_least);  // and no other thread did its work
  }
  omp_set_num_threads(saved_threads);
}

TEST_CASE("cpu gemm provider auto: the faster library, Eigen only when it wins by the margin",
          "[matmul][gemm_provider]") {
  using kernels::cpu::faster_provider;
  const double m = kernels::cpu::kEigenMargin, none = std::numeric_limits<double>::infinity();
  CHECK(faster_provider(1.0, 1.0, none) == GemmProvider::OpenBlas);          // a tie with Eigen
  CHECK(faster_provider(1.0 - m / 2, 1.0, none) == GemmProvider::OpenBlas);  // Eigen ahead by less
  CHECK(faster_provider(1.0 - 2 * m, 1.0, none) == GemmProvider::Eigen);     // Eigen ahead by more
  CHECK(faster_provider(1.0, 1.0 - m / 2, none) == GemmProvider::OpenBlas);  // OpenBLAS ahead
  CHECK(faster_provider(0.3e-6, 1.0e-6, none) == GemmProvider::Eigen);       // tiny products
  CHECK(faster_provider(1.0, 0.9, 0.8) == GemmProvider::OneDnn);             // oneDNN ahead of both
  CHECK(faster_provider(1.0, 0.8, 0.9) == GemmProvider::OpenBlas);           // OpenBLAS ahead of both
  CHECK(faster_provider(1.0, 0.8, 0.8) == GemmProvider::OpenBlas);           // the libraries tie
  CHECK(faster_provider(1.0, none, 0.9) == GemmProvider::OneDnn);            // a build without OpenBLAS
  CHECK(faster_provider(0.8 * (1 - 2 * m), 1.0, 0.8) == GemmProvider::Eigen);  // the margin is on the faster one
  CHECK(faster_provider(0.8 * (1 - m / 2), 1.0, 0.8) == GemmProvider::OneDnn);
  CHECK(faster_provider(1.0, none, none) == GemmProvider::Eigen);            // no library at all
}

TEST_CASE("cpu gemm provider auto: measured once per shape class, kept in the cache, read back",
          "[matmul][gemm_provider]") {
  if (!auto_has_a_choice()) DEFINE_SKIP_TEST(kNoChoice);
  SettingsGuard guard;
  const fs::path root = fresh_folder("auto");
  kernels::cpu::set_gemm_provider_settings({GemmChoice::Auto, root.string()});
  const fs::path folder = kernels::cpu::gemm_cache_folder();
  CHECK(folder.parent_path() == root / "cpu-gemm");

  // First use of a class: every provider the build has timed, the fastest kept, the file written.
  const GemmProvider first = kernels::cpu::gemm_provider(300, 70, 520, false);
  std::vector<kernels::cpu::GemmDecision> d = kernels::cpu::gemm_decisions();
  REQUIRE(d.size() == 1);
  CHECK(d[0].shape_class == "f32 m256 n64 k256 nn");
  CHECK(d[0].shape_class == kernels::cpu::gemm_shape_class(300, 70, 520, false));
  CHECK_FALSE(d[0].from_cache);
  CHECK(d[0].eigen_seconds > 0);
  CHECK(d[0].openblas_seconds > 0);  // infinity for a library the build lacks
  CHECK(d[0].onednn_seconds > 0);
  CHECK(std::isfinite(d[0].openblas_seconds) == kernels::cpu::openblas_available());
  CHECK(std::isfinite(d[0].onednn_seconds) == kernels::cpu::onednn_available());
  CHECK(first == kernels::cpu::faster_provider(d[0].eigen_seconds, d[0].openblas_seconds, d[0].onednn_seconds));
  const fs::path file = folder / "f32-m256-n64-k256-nn";
  REQUIRE(fs::exists(file));
  CHECK(read_word(file) == kernels::cpu::to_string(first));

  // Same class, another shape: no new measurement.
  CHECK(kernels::cpu::gemm_provider(1000, 127, 300, false) == first);
  CHECK(kernels::cpu::gemm_decisions().size() == 1);

  // The same shape run serially (inside a kernel's team) is a class of its own, with its own file.
  const GemmProvider serial = kernels::cpu::gemm_provider(300, 70, 520, false, kernels::cpu::GemmRun::Serial);
  d = kernels::cpu::gemm_decisions();
  REQUIRE(d.size() == 2);
  CHECK(d[1].shape_class == "f32 m256 n64 k256 nn serial");
  CHECK_FALSE(d[1].from_cache);
  CHECK(read_word(folder / "f32-m256-n64-k256-nn-serial") == kernels::cpu::to_string(serial));
  CHECK(kernels::cpu::gemm_provider(300, 70, 520, false) == first);  // the threaded class kept its choice
  CHECK(kernels::cpu::gemm_decisions().size() == 2);

  // So is the same shape with an operand transposed (the libraries pack it differently).
  const GemmProvider nt =
      kernels::cpu::gemm_provider(300, 70, 520, false, kernels::cpu::GemmRun::Threaded, {false, true});
  d = kernels::cpu::gemm_decisions();
  REQUIRE(d.size() == 3);
  CHECK(d[2].shape_class == "f32 m256 n64 k256 nt");
  CHECK(read_word(folder / "f32-m256-n64-k256-nt") == kernels::cpu::to_string(nt));
  CHECK(kernels::cpu::gemm_provider(300, 70, 520, false) == first);
  CHECK(kernels::cpu::gemm_decisions().size() == 3);

  // A later process (settings reset) reads the file instead of measuring.
  kernels::cpu::set_gemm_provider_settings({GemmChoice::Auto, root.string()});
  CHECK(kernels::cpu::gemm_provider(300, 70, 520, false) == first);
  d = kernels::cpu::gemm_decisions();
  REQUIRE(d.size() == 1);
  CHECK(d[0].from_cache);

  // A choice another process wrote is honoured whatever this machine's timings say.
  std::vector<GemmProvider> providers{GemmProvider::Eigen};
  if (kernels::cpu::openblas_available()) providers.push_back(GemmProvider::OpenBlas);
  if (kernels::cpu::onednn_available()) providers.push_back(GemmProvider::OneDnn);
  for (const GemmProvider p : providers) {
    kernels::cpu::set_gemm_provider_settings({GemmChoice::Auto, root.string()});
    std::ofstream(folder / "f32-m16-n16-k16-nn") << kernels::cpu::to_string(p) << '\n';
    CHECK(kernels::cpu::gemm_provider(20, 20, 20, false) == p);
  }

  // An unreadable file is measured again and replaced by a valid one.
  kernels::cpu::set_gemm_provider_settings({GemmChoice::Auto, root.string()});
  std::ofstream(folder / "f32-m4-n4-k4-nn") << "garbage\n";
  const GemmProvider replaced = kernels::cpu::gemm_provider(5, 6, 7, false);
  CHECK(read_word(folder / "f32-m4-n4-k4-nn") == kernels::cpu::to_string(replaced));
  CHECK_FALSE(kernels::cpu::gemm_decisions().back().from_cache);

  // A folder that cannot be made (under a regular file): the process measures and goes on (it warns
  // once on stderr that another process may choose differently).
  const fs::path blocker = root / "a-file";
  std::ofstream(blocker) << "not a folder\n";
  kernels::cpu::set_gemm_provider_settings({GemmChoice::Auto, (blocker / "cache").string()});
  (void)kernels::cpu::gemm_provider(40, 40, 40, false);
  REQUIRE(kernels::cpu::gemm_decisions().size() == 1);
  CHECK_FALSE(kernels::cpu::gemm_decisions()[0].from_cache);
  CHECK(kernels::cpu::gemm_decisions()[0].eigen_seconds > 0);

  // float64 GEMMs stay on Eigen under auto; no cache: nothing written.
  CHECK(kernels::cpu::gemm_provider(300, 70, 520, true) == GemmProvider::Eigen);
  const fs::path nowhere = fresh_folder("nocache");
  kernels::cpu::set_gemm_provider_settings({GemmChoice::Auto, std::nullopt});
  CHECK(kernels::cpu::gemm_cache_folder().empty());
  (void)kernels::cpu::gemm_provider(64, 64, 64, false);
  CHECK(fs::is_empty(nowhere));
  CHECK(kernels::cpu::gemm_decisions().size() == 1);
  fs::remove_all(root);
  fs::remove_all(nowhere);
}

TEST_CASE("cpu gemm provider auto: matmul asks for the class of the library call it makes",
          "[matmul][gemm_provider]") {
  if (!auto_has_a_choice()) DEFINE_SKIP_TEST(kNoChoice);
  SettingsGuard guard;
  Generator gen(32);
  const std::int64_t m = 300, n = 70, k = 520;
  const auto class_of_gemm = [&](bool ta, bool tb, bool column_major_out) {
    kernels::cpu::set_gemm_provider_settings({GemmChoice::Auto, std::nullopt});
    const Tensor a = rand_uniform(ta ? Shape{k, m} : Shape{m, k}, -1, 1, {}, gen);
    const Tensor b = rand_uniform(tb ? Shape{n, k} : Shape{k, n}, -1, 1, {}, gen);
    const Tensor out = column_major_out ? transpose(empty({n, m}), 0, 1) : empty({m, n});
    kernels::gemm(a, b, out, ta, tb, 1.0, 0.0);
    const std::vector<kernels::cpu::GemmDecision> d = kernels::cpu::gemm_decisions();
    REQUIRE(d.size() == 1);
    return d[0].shape_class;
  };
  CHECK(class_of_gemm(false, false, false) == "f32 m256 n64 k256 nn");
  CHECK(class_of_gemm(false, true, false) == "f32 m256 n64 k256 nt");
  CHECK(class_of_gemm(true, false, false) == "f32 m256 n64 k256 tn");
  // A column-major C is computed as C^T = B^T A^T on row-major storage: m and n swap, and each
  // operand, read in the other order, is transposed.
  CHECK(class_of_gemm(false, false, true) == "f32 m64 n256 k256 tt");
  CHECK(class_of_gemm(true, true, true) == "f32 m64 n256 k256 nn");
}

TEST_CASE("cpu gemm provider auto: a timing taken while the process waited for a CPU is taken again",
          "[matmul][gemm_provider]") {
  if (!auto_has_a_choice()) DEFINE_SKIP_TEST(kNoChoice);
  if (!fs::exists(fs::path("/proc/self/task") / std::to_string(::syscall(SYS_gettid)) / "schedstat")) {
    DEFINE_SKIP_TEST("this kernel does not report how long threads wait for a CPU (schedstat)");
  }
  SettingsGuard guard;
  kernels::cpu::set_gemm_provider_settings({GemmChoice::Auto, std::nullopt});
  // One spinning thread per CPU besides the calibration's own: every timing shares the cores.
  std::atomic<bool> stop{false};
  std::vector<std::thread> spinners;
  for (unsigned i = 0; i < std::max(1u, std::thread::hardware_concurrency()); ++i)
    spinners.emplace_back([&stop] {
      while (!stop.load(std::memory_order_relaxed)) {
      }
    });
  const GemmProvider chosen = kernels::cpu::gemm_provider(256, 256, 256, false);
  stop = true;
  for (std::thread& t : spinners) t.join();
  const std::vector<kernels::cpu::GemmDecision> d = kernels::cpu::gemm_decisions();
  REQUIRE(d.size() == 1);
  CHECK(d[0].retimed > 0);
  // Still a decision from the timings it kept (a machine busy throughout keeps the last attempts).
  CHECK(chosen == kernels::cpu::faster_provider(d[0].eigen_seconds, d[0].openblas_seconds, d[0].onednn_seconds));
}

TEST_CASE("cpu gemm provider auto: an outer product's class calibrates in megabytes, not gigabytes",
          "[matmul][gemm_provider]") {
  if (!auto_has_a_choice()) DEFINE_SKIP_TEST(kNoChoice);
  // Writing 5 to clear_refs resets the peak to the current resident memory (Linux 4.0 and later).
  const bool reset = static_cast<bool>(std::ofstream("/proc/self/clear_refs") << "5");
  const std::int64_t before = define::peak_rss_bytes();
  if (!reset || before <= 0) {
    DEFINE_SKIP_TEST("this kernel cannot reset or report the peak resident memory");
  }
  SettingsGuard guard;
  kernels::cpu::set_gemm_provider_settings({GemmChoice::Auto, std::nullopt});
  // 2^20 x 2^20 by k = 1: scaled by work alone, its C would be 2^30 floats (4 GiB).
  (void)kernels::cpu::gemm_provider(std::int64_t{1} << 20, std::int64_t{1} << 20, 1, false);
  REQUIRE(kernels::cpu::gemm_decisions().size() == 1);
  CHECK(define::peak_rss_bytes() - before < std::int64_t{256} << 20);
}

TEST_CASE("cpu gemm provider: forced choices and bad settings", "[matmul][gemm_provider]") {
  SettingsGuard guard;
  kernels::cpu::set_gemm_provider_settings({GemmChoice::Eigen, std::nullopt});
  CHECK(kernels::cpu::gemm_provider(512, 512, 512, false) == GemmProvider::Eigen);
  CHECK(kernels::cpu::gemm_decisions().empty());  // forced: nothing measured
  CHECK(kernels::cpu::parse_gemm_choice("auto") == GemmChoice::Auto);
  CHECK(kernels::cpu::parse_gemm_choice("eigen") == GemmChoice::Eigen);
  CHECK_THROWS_WITH(kernels::cpu::parse_gemm_choice("mkl"),
                    "DEFINE_CPU_GEMM: unknown value 'mkl' (expected auto, eigen, openblas or onednn)");
  if (kernels::cpu::openblas_available()) {
    kernels::cpu::set_gemm_provider_settings({GemmChoice::OpenBlas, std::nullopt});
    CHECK(kernels::cpu::gemm_provider(8, 8, 8, true) == GemmProvider::OpenBlas);
  } else {
    CHECK_THROWS_WITH(kernels::cpu::parse_gemm_choice("openblas"), Catch::Contains("this build has no OpenBLAS"));
  }
  if (kernels::cpu::onednn_available()) {
    CHECK(kernels::cpu::parse_gemm_choice("onednn") == GemmChoice::OneDnn);
    kernels::cpu::set_gemm_provider_settings({GemmChoice::OneDnn, std::nullopt});
    CHECK(kernels::cpu::gemm_provider(8, 8, 8, false, kernels::cpu::GemmRun::Serial) == GemmProvider::OneDnn);
  } else {
    CHECK_THROWS_WITH(kernels::cpu::parse_gemm_choice("onednn"), Catch::Contains("this build has no oneDNN"));
  }
}
