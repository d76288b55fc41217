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
