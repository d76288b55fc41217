#include "support/common.h"

#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <functional>
#include <limits>
#include <sstream>
#include <string>
#include <system_error>
#include <utility>

#include <unistd.h>

#include <fmt/format.h>

#include "harness/op_harness.h"

namespace define::test {

std::vector<double> values(const Tensor& t) { return to_doubles(t); }

Tensor tokens(const std::vector<std::int64_t>& ids, Shape shape) {
  return from_vector<std::int64_t>(ids, std::move(shape));
}

double max_abs(const Tensor& t) {
  double m = 0;
  for (double v : values(t)) m = std::max(m, std::abs(v));
  return m;
}

double max_diff(const std::vector<double>& a, const std::vector<double>& b) {
  REQUIRE(a.size() == b.size());
  double m = 0;
  for (std::size_t i = 0; i < a.size(); ++i) m = std::max(m, std::abs(a[i] - b[i]));
  return m;
}

void check_close(const std::vector<double>& got, const std::vector<double>& want, double atol, double rtol,
                 const std::string& what) {
  INFO(what);
  REQUIRE(got.size() == want.size());
  // A zero atol is an exact relative check (compare() divides by the allowance, so keep it above 0).
  const Comparison cmp = compare(got, want, std::max(atol, std::numeric_limits<double>::denorm_min()), rtol);
  const auto w = static_cast<std::size_t>(std::max<std::int64_t>(cmp.worst, 0));
  INFO(fmt::format("max abs err {:.3g} (atol {:g}, rtol {:g}); worst element {} of {}", cmp.max_abs_err, atol, rtol,
                   cmp.worst, got.size())
       << (got.empty() ? "" : fmt::format(": got {:.17g}, want {:.17g}", got[w], want[w])));
  CHECK(cmp.max_share <= 1.0);
}

void check_close(const Tensor& got, const Tensor& want, double atol, double rtol, const std::string& what) {
  INFO(what);
  REQUIRE(got.shape() == want.shape());
  REQUIRE(got.dtype() == want.dtype());
  check_close(values(got), values(want), atol, rtol, what);
}

void skip_test_case(const std::string& reason) {
  if (const char* code = std::getenv("DEFINE_TEST_SKIP_CODE"); code && *code) {
    std::fprintf(stdout, "SKIPPED: %s\n", reason.c_str());
    std::fflush(stdout);
    std::fflush(stderr);
    // _Exit: no static destructors or leak check while the test's objects are still alive.
    std::_Exit(std::atoi(code));
  }
  WARN("skipped: " << reason);
}

std::string read_all(const std::filesystem::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

std::filesystem::path scratch_path(const std::string& name) {
  static const std::filesystem::path root = [] {
    std::error_code ec;
    const std::filesystem::path exe = std::filesystem::read_symlink("/proc/self/exe", ec);
    const std::string key = ec ? std::to_string(::getpid()) : exe.string();
    return std::filesystem::temp_directory_path() / fmt::format("define-tests-{:016x}", std::hash<std::string>{}(key));
  }();
  std::filesystem::create_directories(root);
  return root / name;
}

TempDir::TempDir() {
  static int counter = 0;
  path_ = std::filesystem::temp_directory_path() /
          ("define-test-" + std::to_string(::getpid()) + "-" + std::to_string(counter++));
  std::filesystem::remove_all(path_);
  std::filesystem::create_directories(path_);
}

TempDir::~TempDir() {
  std::error_code ec;
  std::filesystem::remove_all(path_, ec);
}

std::filesystem::path TempDir::write(const std::string& name, const std::string& text) const {
  const std::filesystem::path p = path_ / name;
  std::ofstream out(p, std::ios::binary);
  out << text;
  return p;
}

}  // namespace define::test
