// Helpers shared by the nn and model tests, on top of tests/support/common.h (values, comparisons):
// randomised parameters, random float64 leaves, the (name, tensor) lists a gradient check takes,
// and a float64 gradient check of a module's forward with respect to its parameters and inputs.
#pragma once

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "autograd/ops.h"
#include "nn/module.h"
#include "support/common.h"

namespace define::test {

using NamedTensors = std::vector<std::pair<std::string, Tensor>>;

// Every parameter of `m` replaced by U(-0.5, 0.5) noise, LayerNorm weights (names ending in
// "norm.weight") by U(0.5, 1.5), so zero biases and unit norms cannot hide a wrong gradient or a
// missing term.
void randomise(nn::Module& m, Generator& gen);

// A float64 CPU tensor of U(-1, 1) noise that requires grad: an input for check_gradients.
Tensor random_leaf(const Shape& shape, Generator& gen);

// `inputs` followed by every named parameter of `m`: the `wrt` list of check_gradients.
NamedTensors with_parameters(const nn::Module& m, NamedTensors inputs = {});

// Checks the gradient of L = sum(f() * u) (u a fixed random tensor) with respect to each named
// float64 CPU leaf in `wrt` (parameters or inputs; all requiring grad): backward against central
// differences, element by element. f must be deterministic: a stochastic layer resets its
// generator's state inside f, so every evaluation sees the same mask.
// `sample` > 0 checks at most that many elements of each leaf (its first, its last and a seeded
// draw of the rest): for whole models, whose every layer has an exhaustive check of its own, so
// what remains to check is the wiring between layers, which any element of every tensor sees.
void check_gradients(const std::function<Tensor()>& f, const NamedTensors& wrt, double eps = 1e-6,
                     double atol = 1e-7, double rtol = 1e-5, std::int64_t sample = 0);

}  // namespace define::test
