// Shared by the optimizer tests (optim_test.cpp, optim_schedule_test.cpp, optim_state_test.cpp):
// float64 parameters from literal values, scripted gradients, and the three-step gradient script
// of a two-element parameter the trajectories are checked on. `using namespace
// define::test::optim_test` also brings in values() and check_close() of tests/support/common.h.
#pragma once

// GCC 12 flags designated initializers that leave fields at their defaults (-Wextra), which is
// exactly how option structs are meant to be used in these tests.
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

#include <vector>

#include "autograd/ops.h"
#include "nn/optim/optim.h"
#include "support/common.h"

namespace define::test::optim_test {

using test::check_close;
using test::values;
using Vec = std::vector<double>;

// A float64 CPU leaf requiring grad, holding `v`.
inline Tensor param(const Vec& v) { return from_vector(v).set_requires_grad(); }
// Sets p's gradient to `g` (same length as p).
inline void set_grad(const Tensor& p, const Vec& g) { p.set_grad(from_vector(g)); }

// Scripted gradients for three steps of a two-element parameter.
inline const std::vector<Vec> kGrads = {{0.5, -1.0}, {0.25, 2.0}, {-0.75, 0.1}};
inline const Vec kStart = {1.0, -2.0};

}  // namespace define::test::optim_test
