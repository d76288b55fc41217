// Parameter initialisers. Each returns a fresh float32 CPU tensor drawn from `gen` (the Philox
// stream), so a model built twice from generators with the same seed has identical weights; move
// the model with Module::to() afterwards. Fans are passed explicitly because layers disagree on
// which dims they are: Linear's weight [out, in] has fan_in = in, while a group linear
// transformation's [groups, in/g, out/g] has fan_in = in/g per group.
#pragma once

#include <cstdint>

#include "core/generator.h"
#include "core/tensor.h"

namespace define::nn::init {

// While one is alive on this thread, the initialisers below return zeros instead of drawing
// from the generator: for building a model only to count or list its parameters (`define
// params`), where drawing 150 M values would be most of the time. Never for a model that trains.
class ShapesOnlyGuard {
 public:
  ShapesOnlyGuard();
  ~ShapesOnlyGuard();
  ShapesOnlyGuard(const ShapesOnlyGuard&) = delete;
  ShapesOnlyGuard& operator=(const ShapesOnlyGuard&) = delete;

 private:
  bool previous_;
};

// U(lo, hi).
Tensor uniform(const Shape& shape, double lo, double hi, Generator& gen);
// N(mean, std).
Tensor normal(const Shape& shape, double mean, double std, Generator& gen);
// Glorot & Bengio (2010): U(-a, a) with a = gain * sqrt(6 / (fan_in + fan_out)), which keeps
// activation and gradient variance roughly constant through linear layers. The default for
// Linear, following fairseq / DeLighT.
Tensor xavier_uniform(const Shape& shape, std::int64_t fan_in, std::int64_t fan_out, Generator& gen,
                      double gain = 1.0);
// He et al. (2015) style: U(-b, b) with b = gain * sqrt(3 / fan_in). gain = sqrt(2) suits ReLU;
// gain = 1 / sqrt(3) gives b = 1 / sqrt(fan_in), PyTorch's nn.Linear default
// (kaiming_uniform_ with a = sqrt(5)).
Tensor kaiming_uniform(const Shape& shape, std::int64_t fan_in, Generator& gen, double gain);

}  // namespace define::nn::init
