// The op harness's own comparison: what every kernel and op test leans on must be able to fail,
// including on a result of the wrong length.
#include <catch2/catch.hpp>

#include <cmath>
#include <vector>

#include "harness/op_harness.h"

using define::test::compare;

TEST_CASE("harness: compare() measures errors against atol + rtol * |ref| and refuses other lengths", "[harness_self_test]") {
  const std::vector<double> ref{1.0, -2.0, 4.0};
  const auto same = compare(ref, ref, 1e-6, 1e-6);
  CHECK(same.max_share == 0.0);
  CHECK_FALSE(same.size_mismatch);
  // Element 2 off by 4e-6: allowed 1e-6 + 1e-6 * 4 = 5e-6, so 80% of the allowance.
  const auto close = compare({1.0, -2.0, 4.000004}, ref, 1e-6, 1e-6);
  CHECK(close.worst == 2);
  CHECK(close.max_share == Approx(0.8).epsilon(1e-6));
  CHECK(close.max_abs_err == Approx(4e-6).epsilon(1e-6));
  // A NaN is infinitely wrong unless the reference has one there too.
  CHECK(std::isinf(compare({1.0, NAN, 4.0}, ref, 1e-6, 1e-6).max_share));
  CHECK(compare({NAN}, {NAN}, 1e-6, 1e-6).max_share == 0.0);
  // A truncated (or padded) result fails whatever its elements.
  for (const std::vector<double>& wrong_length : {std::vector<double>{1.0, -2.0}, std::vector<double>{1.0, -2.0, 4.0, 0.0},
                                                  std::vector<double>{}}) {
    const auto c = compare(wrong_length, ref, 1e-6, 1e-6);
    CHECK(c.size_mismatch);
    CHECK_FALSE(c.max_share <= 1.0);
  }
}
