// The `define` binary runs its OpenMP workers passively unless told otherwise (core/omp_wait.h):
// started without OMP_WAIT_POLICY it re-executes itself with PASSIVE (and a short spin where its
// CPUs are separate cores), and a policy the user set is kept. Runs the real binary in a fresh
// process, since libgomp reads the variable when it loads. Also: the SMT-sibling test that decides
// the spin, on sibling lists as Linux writes them.
#include <catch2/catch.hpp>

#include <map>
#include <string>

#include "support/runs.h"
#include "core/omp_wait.h"

using define::test::run_command;

TEST_CASE("omp wait: CPUs that are SMT siblings are told apart from separate cores", "[cli]") {
  using define::cpus_share_a_core;
  // Two hyperthreads of one core (lists "0-1"), and of two cores interleaved ("0,2" / "1,3").
  const std::map<int, std::string> pairs = {{0, "0-1"}, {1, "0-1"}, {2, "2-3"}, {3, "2-3"}};
  const std::map<int, std::string> interleaved = {{0, "0,2"}, {1, "1,3"}, {2, "0,2"}, {3, "1,3"}};
  const std::map<int, std::string> single = {{0, "0"}, {1, "1"}, {2, "2"}};
  auto lists = [](const std::map<int, std::string>& m) {
    return [&m](int cpu) { return m.count(cpu) ? m.at(cpu) : std::string(); };
  };
  CHECK(cpus_share_a_core({0, 1}, lists(pairs)));
  CHECK_FALSE(cpus_share_a_core({0, 2}, lists(pairs)));  // one thread of each of two cores
  CHECK_FALSE(cpus_share_a_core({0, 1}, lists(interleaved)));
  CHECK(cpus_share_a_core({1, 3}, lists(interleaved)));
  CHECK_FALSE(cpus_share_a_core({0, 1, 2}, lists(single)));
  CHECK_FALSE(cpus_share_a_core({1}, lists(pairs)));  // one CPU shares with nothing it runs on
  // A list that is missing, malformed or does not name the CPU itself: assume sharing (passive).
  CHECK(cpus_share_a_core({0, 5}, lists(single)));
  CHECK(cpus_share_a_core({0}, [](int) { return std::string("x-1"); }));
  CHECK(cpus_share_a_core({0}, [](int) { return std::string("2-1"); }));
  CHECK(cpus_share_a_core({4}, [](int) { return std::string("0-3"); }));
}

TEST_CASE("define binary: OpenMP wait policy PASSIVE by default, the user's choice kept", "[cli]") {
  const std::string bin = DEFINE_CLI_BINARY;
  const auto unset = run_command("env -u OMP_WAIT_POLICY '" + bin + "' version 2>&1");
  INFO(unset.second);
  CHECK(unset.first == 0);
  CHECK(unset.second.find("define 0.1.0") != std::string::npos);
  CHECK(unset.second.find("wait policy PASSIVE") != std::string::npos);
  // The short spin where this process's CPUs are separate cores (the test inherits the binary's
  // affinity), none where two share a core.
  const auto bare = run_command("env -u OMP_WAIT_POLICY -u GOMP_SPINCOUNT '" + bin + "' version 2>&1");
  INFO(bare.second);
  const std::string spin = define::process_cpus_share_a_core() ? "spin count default"
                                                                : std::string("spin count ") + define::kShortSpinCount;
  CHECK(bare.second.find(spin) != std::string::npos);
  // The user's spin count is kept, and so is a policy the user set (with no spin count added).
  const auto user_spin = run_command("env -u OMP_WAIT_POLICY GOMP_SPINCOUNT=7 '" + bin + "' version 2>&1");
  INFO(user_spin.second);
  CHECK(user_spin.second.find("wait policy PASSIVE, spin count 7") != std::string::npos);
  const auto active = run_command("env -u GOMP_SPINCOUNT OMP_WAIT_POLICY=ACTIVE '" + bin + "' version 2>&1");
  INFO(active.second);
  CHECK(active.first == 0);
  CHECK(active.second.find("wait policy ACTIVE, spin count default") != std::string::npos);
}

TEST_CASE("define binary: OpenBLAS runs kernels for this CPU, the user's OPENBLAS_CORETYPE kept", "[cli]") {
  // Debian's OpenBLAS falls back to generic "Prescott" kernels on x86 models it does not know;
  // the binary restarts itself with the kernels the CPU runs (kernels/cpu/gemm_provider.h).
  const std::string bin = DEFINE_CLI_BINARY;
  const auto unset = run_command("env -u OPENBLAS_CORETYPE '" + bin + "' version 2>&1");
  INFO(unset.second);
  CHECK(unset.first == 0);
  if (unset.second.find("OpenBLAS: not in this build") != std::string::npos) return;
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
    CHECK(unset.second.find("OpenBLAS: kernels Prescott") == std::string::npos);
  const auto forced = run_command("env OPENBLAS_CORETYPE=Prescott '" + bin + "' version 2>&1");
  INFO(forced.second);
  CHECK(forced.second.find("OpenBLAS: kernels Prescott") != std::string::npos);
}
