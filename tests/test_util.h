// Helpers shared by the tests outside the op harness (tests/nn, tests/models, tests/data,
// tests/cli, ...): tensor values as doubles, element-wise comparisons that fail on a truncated
// result, the message of a thrown Error, whole-file reads and scratch folders. One spelling per
// helper; the tests/nn helpers (randomised parameters, gradient checks) build on these in
// nn/nn_test_util.h.
#pragma once

#include <filesystem>
#include <string>
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

// Checks |got[i] - want[i]| <= atol + rtol * |want[i]| for every element (NaN only where want has
// NaN), after REQUIRE-ing equal lengths (a truncated or padded result fails); a failure names the
// worst element. atol may be 0.
void check_close(const std::vector<double>& got, const std::vector<double>& want, double atol, double rtol);
// The same for two tensors, after REQUIRE-ing equal shapes.
void check_close(const Tensor& got, const Tensor& want, double atol, double rtol);

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

// The whole file as bytes ("" when it cannot be read).
std::string read_all(const std::filesystem::path& p);

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
