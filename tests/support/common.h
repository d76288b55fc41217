// Helpers shared by the tests outside the op harness (tests/nn, tests/models, tests/data,
// tests/cli, ...): tensor values as doubles, element-wise comparisons that fail on a truncated
// result, the message of a thrown Error, whole-file reads and scratch folders. One spelling per
// helper; the tests/nn helpers (randomised parameters, gradient checks) build on these in
// support/gradients.h.
#pragma once

#include <filesystem>
#include <string>
#include <type_traits>
#include <vector>

#include "autograd/ops.h"
#include "core/error.h"

namespace define::test {

// A tensor's elements as doubles, row-major (any dtype, any device).
std::vector<double> values(const Tensor& t);
// Int64 token ids of the given shape, row-major.
Tensor tokens(const std::vector<std::int64_t>& ids, Shape shape);
// Largest |element| (0 for an empty tensor).
double max_abs(const Tensor& t);
// Largest |a[i] - b[i]|; REQUIREs equal lengths first.
double max_diff(const std::vector<double>& a, const std::vector<double>& b);

// Checks |got[i] - want[i]| <= atol + rtol * |want[i]| for every element (a NaN or inf on either
// side fails), after REQUIRE-ing equal lengths (a truncated or padded result fails); a failure
// names `what` and the worst element. atol may be 0. The one comparison of the tests outside the op
// harness (which uses the same compare(), harness/op_harness.h).
void check_close(const std::vector<double>& got, const std::vector<double>& want, double atol, double rtol,
                 const std::string& what = "");
// The same for two tensors, after REQUIRE-ing equal shapes and dtypes.
void check_close(const Tensor& got, const Tensor& want, double atol, double rtol, const std::string& what = "");
// The same for host values of another arithmetic type (e.g. a kernel's float results).
template <typename T>
  requires(std::is_arithmetic_v<T> && !std::is_same_v<T, double>)
void check_close(const std::vector<T>& got, const std::vector<T>& want, double atol, double rtol,
                 const std::string& what = "") {
  check_close(std::vector<double>(got.begin(), got.end()), std::vector<double>(want.begin(), want.end()), atol, rtol,
              what);
}

// The message of the define::Error that f() throws ("" when it throws none).
template <typename F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// Ends the running test case as skipped, saying why: for a test that cannot run here (no data set,
// no library, a kernel without the interface it reads). Under ctest every test case runs in a
// process of its own with DEFINE_TEST_SKIP_CODE set (tests/CMakeLists.txt): the process exits with
// that code, which ctest reports as "Skipped", never as "Passed". Run by hand with several test
// cases in one process, it warns and returns from the test case. Only at test-case level: a skip
// inside a SECTION would hide the other sections' results.
#define DEFINE_SKIP_TEST(reason)               \
  do {                                         \
    ::define::test::skip_test_case(reason);    \
    return;                                    \
  } while (false)
void skip_test_case(const std::string& reason);

// The whole file as bytes ("" when it cannot be read).
std::string read_all(const std::filesystem::path& p);

// temp_directory_path() / "define-tests-<tag>" / name, the tag a hash of the running test
// executable's path, its parent folder created: suites of two build trees (the release and asan
// presets, a CI clone) may run at once without sharing scratch folders, and a suite's next run
// reuses, and clears, its own. For the tests' named scratch folders; TempDir is for anonymous ones.
std::filesystem::path scratch_path(const std::string& name);

// A fresh folder under the system temp dir (unique to the process and the object), removed with
// everything in it at the end of the test.
class TempDir {
 public:
  TempDir();
  ~TempDir();
  TempDir(const TempDir&) = delete;
  TempDir& operator=(const TempDir&) = delete;

  const std::filesystem::path& path() const { return path_; }
  // Writes `text` (bytes as given) to path() / name and returns that path.
  std::filesystem::path write(const std::string& name, const std::string& text) const;

 private:
  std::filesystem::path path_;
};

}  // namespace define::test
