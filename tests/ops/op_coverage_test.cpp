// Every op family of kernels/op_families.h is covered three ways: op-harness test cases (tests/ops/,
// tags [harness][family:<name>]), emulator kernel tests (tests/cuda/, tags [cuda][family:<name>]),
// and benchmarks (a kernel_bench case, bench/kernels/kernel_cases.h, or a family benchmark
// program, DEFINE_BENCH_FAMILY in bench/*.cpp). A new family without them, or a test or benchmark
// naming a family that is not in the list, fails here. Also checks that each family's backend
// contract exists and is included by every backend.
#include <catch2/catch.hpp>
#include <fmt/format.h>

#include <filesystem>
#include <map>
#include <string>

#include "bench/kernels/kernel_cases.h"
#include "harness/family_tags.h"
#include "kernels/op_families.h"
#include "support/common.h"

namespace {

namespace fs = std::filesystem;
using define::kernels::is_op_family;
using define::kernels::kOpFamilies;

struct Coverage {
  int harness_tests = 0, emulator_tests = 0, kernel_bench_cases = 0, bench_programs = 0;
};

fs::path source_path(const std::string& relative) { return fs::path(DEFINE_SOURCE_DIR) / relative; }

std::string read_file(const fs::path& path) {
  const std::string text = define::test::read_all(path);
  INFO("reading " << path);
  REQUIRE_FALSE(text.empty());
  return text;
}

void count_tests(std::map<std::string, Coverage>& coverage) {
  for (const Catch::TestCase& test : Catch::getRegistryHub().getTestCaseRegistry().getAllTests()) {
    const std::string family = define::test::family_of(test);
    if (family.empty()) continue;
    INFO("test case \"" << test.name << "\" is tagged [family:" << family << "]");
    CHECK(is_op_family(family));
    if (define::test::has_tag(test, "harness")) ++coverage[family].harness_tests;
    if (define::test::has_tag(test, "cuda")) ++coverage[family].emulator_tests;
  }
}

void count_benchmarks(std::map<std::string, Coverage>& coverage) {
  for (const auto& c : define::bench::kernel_bench::cases()) {
    INFO("kernel_bench case \"" << c.name << "\" names family " << c.family);
    CHECK(is_op_family(c.family));
    ++coverage[c.family].kernel_bench_cases;
  }
  // The benchmark programs are read from their sources: the asan preset does not build them.
  // (Plain string search: std::regex trips GCC 12's -Wmaybe-uninitialized under the sanitizers.)
  const std::string marker = "DEFINE_BENCH_FAMILY(\"";
  for (const fs::directory_entry& e : fs::directory_iterator(source_path("bench"))) {
    if (e.path().extension() != ".cpp") continue;
    const std::string source = read_file(e.path());
    for (auto at = source.find(marker); at != std::string::npos; at = source.find(marker, at + 1)) {
      const auto first = at + marker.size(), last = source.find('"', first);
      REQUIRE(last != std::string::npos);
      const std::string family = source.substr(first, last - first);
      INFO(e.path().filename().string() << " names family " << family);
      CHECK(is_op_family(family));
      ++coverage[family].bench_programs;
    }
  }
}

}  // namespace

TEST_CASE("op families: each has op-harness cases, emulator kernel tests and a benchmark", "[op_families]") {
  std::map<std::string, Coverage> coverage;
  for (std::string_view f : kOpFamilies) coverage[std::string(f)];
  count_tests(coverage);
  count_benchmarks(coverage);

  fmt::print("{:<18} {:>14} {:>15} {:>19} {:>15}\n", "op family", "harness tests", "emulator tests",
             "kernel_bench cases", "bench programs");
  for (std::string_view f : kOpFamilies) {
    const Coverage& c = coverage[std::string(f)];
    fmt::print("{:<18} {:>14} {:>15} {:>19} {:>15}\n", f, c.harness_tests, c.emulator_tests, c.kernel_bench_cases,
               c.bench_programs);
  }
  for (std::string_view f : kOpFamilies) {
    const Coverage& c = coverage[std::string(f)];
    INFO("op family " << f);
    CHECK(c.harness_tests > 0);
    CHECK(c.emulator_tests > 0);
    CHECK(c.kernel_bench_cases + c.bench_programs > 0);
  }
}

TEST_CASE("op families: each has one backend contract, included by every backend", "[op_families]") {
  for (std::string_view f : kOpFamilies) {
    const std::string include = fmt::format("#include \"kernels/contracts/{}.inc\"", f);
    INFO("op family " << f << ": every backend declares its contract with " << include);
    CHECK(fs::exists(source_path(fmt::format("kernels/contracts/{}.inc", f))));
    CHECK(read_file(source_path(fmt::format("kernels/ref/{}.h", f))).find(include) != std::string::npos);
    CHECK(read_file(source_path(fmt::format("kernels/cpu/{}.h", f))).find(include) != std::string::npos);
    CHECK(read_file(source_path("kernels/cuda/ops.inc")).find(include) != std::string::npos);
  }
  for (const fs::directory_entry& e : fs::directory_iterator(source_path("kernels/contracts"))) {
    INFO("contract " << e.path().filename().string() << " belongs to no op family of kernels/op_families.h");
    CHECK(is_op_family(e.path().stem().string()));
  }
}
