// Shared by the optimizer tests (optim_test.cpp, optim_schedule_test.cpp, optim_state_test.cpp):
// float64 parameters from literal values, scripted gradients, and the three-step gradient script
// of a two-element parameter the trajectories are checked on.
#pragma once

#include <vector>

#include "autograd/ops.h"

namespace define::test::optim_test {

using Vec = std::vector<double>;

// A float64 CPU leaf requiring grad, holding `v`.
inline Tensor param(const Vec& v) { return from_vector(v).set_requires_grad(); }
// Sets p's gradient to `g` (same length as p).
inline void set_grad(const Tensor& p, const Vec& g) { p.set_grad(from_vector(g)); }

// Scripted gradients for three steps of a two-element parameter.
inline const std::vector<Vec> kGrads = {{0.5, -1.0}, {0.25, 2.0}, {-0.75, 0.1}};
inline const Vec kStart = {1.0, -2.0};

}  // namespace define::test::optim_test
