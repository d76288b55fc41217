// The op harness's own comparison: what every kernel and op test leans on must be able to fail,
// including on a result of the wrong length.
#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include "harness/op_harness.h"

using define::test::compare;

TEST_CASE("harness: compare() measures errors against atol + rtol * |ref| and refuses other lengths and NaN",
          "[harness_self_test]") {
  const std::vector<double> ref{1.0, -2.0, 4.0};
  const auto same = compare(ref, ref, 1e-6, 1e-6);
  CHECK(same.max_share == 0.0);
  CHECK_FALSE(same.size_mismatch);
  // Element 2 off by 4e-6: allowed 1e-6 + 1e-6 * 4 = 5e-6, so 80% of the allowance.
  const auto close = compare({1.0, -2.0, 4.000004}, ref, 1e-6, 1e-6);
  CHECK(close.worst == 2);
  CHECK(close.max_share == Approx(0.8).epsilon(1e-6));
  CHECK(close.max_abs_err == Approx(4e-6).epsilon(1e-6));
  // A non-finite result where the reference is finite is infinitely wrong.
  CHECK(std::isinf(compare({1.0, NAN, 4.0}, ref, 1e-6, 1e-6).max_share));
  CHECK(std::isinf(compare({1.0, -2.0, INFINITY}, ref, 1e-6, 1e-6).max_share));
  // A NaN result does not pass by matching a NaN reference (an all-NaN output or Jacobian of a
  // broken op and its broken oracle), nor does any other non-finite reference value...
  const auto both_nan = compare({NAN, NAN}, {NAN, NAN}, 1e-6, 1e-6);
  CHECK(std::isinf(both_nan.max_share));
  CHECK(both_nan.nonfinite_ref == 2);
  CHECK(std::isinf(compare({INFINITY}, {INFINITY}, 1e-6, 1e-6).max_share));
  // ... unless the case expects non-finite values, and then only the same kind matches.
  CHECK(compare({1.0, NAN, -INFINITY}, {1.0, NAN, -INFINITY}, 1e-6, 1e-6, true).max_share == 0.0);
  CHECK(std::isinf(compare({1.0, 2.0, -INFINITY}, {1.0, NAN, -INFINITY}, 1e-6, 1e-6, true).max_share));
  CHECK(std::isinf(compare({1.0, NAN, INFINITY}, {1.0, NAN, -INFINITY}, 1e-6, 1e-6, true).max_share));
  CHECK(std::isinf(compare({1.0, NAN, 4.0}, {1.0, NAN, -INFINITY}, 1e-6, 1e-6, true).max_share));
  // A truncated (or padded) result fails whatever its elements.
  for (const std::vector<double>& wrong_length : {std::vector<double>{1.0, -2.0}, std::vector<double>{1.0, -2.0, 4.0, 0.0},
                                                  std::vector<double>{}}) {
    const auto c = compare(wrong_length, ref, 1e-6, 1e-6);
    CHECK(c.size_mismatch);
    CHECK_FALSE(c.max_share <= 1.0);
  }
}
