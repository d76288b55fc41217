// Which op family (kernels/op_families.h) a Catch2 test case covers: its [family:<name>] tag.
// Op-harness test cases also carry [harness] (run_op_cases checks both), emulator kernel tests
// (tests/cuda/) carry [cuda]; tests/ops/op_coverage_test.cpp counts them per family.
#pragma once

#include <catch2/catch.hpp>

#include <string>
#include <string_view>

namespace define::test {

bool has_tag(const Catch::TestCaseInfo& test, std::string_view tag);
// The family the test case's [family:<name>] tag names; empty when it has none. Fails the running
// test when it names more than one.
std::string family_of(const Catch::TestCaseInfo& test);
// The running test case, as registered (with its tags).
const Catch::TestCaseInfo& current_test_case();

}  // namespace define::test
