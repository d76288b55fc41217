// Helpers shared by the nn tests: values as doubles and a float64 gradient check of a module's
// forward with respect to its parameters and inputs.
#pragma once

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "autograd/ops.h"

namespace define::test {

std::vector<double> values(const Tensor& t);
// Largest |element| (0 for an empty tensor).
double max_abs(const Tensor& t);

// Checks the gradient of L = sum(f() * u) (u a fixed random tensor) with respect to each named
// float64 CPU leaf in `wrt` (parameters or inputs; all requiring grad): backward against central
// differences, element by element. f must be deterministic: a stochastic layer resets its
// generator's state inside f, so every evaluation sees the same mask.
void check_gradients(const std::function<Tensor()>& f, const std::vector<std::pair<std::string, Tensor>>& wrt,
                     double eps = 1e-6, double atol = 1e-7, double rtol = 1e-5);

}  // namespace define::test
