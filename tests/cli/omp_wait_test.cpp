// The `define` binary runs its OpenMP workers passively unless told otherwise (core/omp_wait.h):
// started without OMP_WAIT_POLICY it re-executes itself with PASSIVE, and a policy the user set is
// kept. Runs the real binary in a fresh process, since libgomp reads the variable when it loads.
#include <catch2/catch.hpp>

#include <string>

#include "cli/cli_test_util.h"

using define::test::run_command;

TEST_CASE("define binary: OpenMP wait policy PASSIVE by default, the user's choice kept", "[cli]") {
  const std::string bin = DEFINE_CLI_BINARY;
  const auto unset = run_command("env -u OMP_WAIT_POLICY '" + bin + "' version 2>&1");
  INFO(unset.second);
  CHECK(unset.first == 0);
  CHECK(unset.second.find("define 0.1.0") != std::string::npos);
  CHECK(unset.second.find("wait policy PASSIVE") != std::string::npos);
  const auto active = run_command("env OMP_WAIT_POLICY=ACTIVE '" + bin + "' version 2>&1");
  INFO(active.second);
  CHECK(active.first == 0);
  CHECK(active.second.find("wait policy ACTIVE") != std::string::npos);
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
