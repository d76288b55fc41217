#include "nn/init.h"

#include <cmath>

#include "core/factory.h"

namespace define::nn::init {

namespace {
thread_local bool shapes_only = false;
}  // namespace

ShapesOnlyGuard::ShapesOnlyGuard() : previous_(shapes_only) { shapes_only = true; }
ShapesOnlyGuard::~ShapesOnlyGuard() { shapes_only = previous_; }

Tensor uniform(const Shape& shape, double lo, double hi, Generator& gen) {
  if (shapes_only) return zeros(shape);
  return rand_uniform(shape, lo, hi, {}, gen);
}

Tensor normal(const Shape& shape, double mean, double std, Generator& gen) {
  if (!(std >= 0)) fail("init::normal", "std must be >= 0, got {}", std);
  if (shapes_only) return zeros(shape);
  return rand_normal(shape, mean, std, {}, gen);
}

Tensor xavier_uniform(const Shape& shape, std::int64_t fan_in, std::int64_t fan_out, Generator& gen, double gain) {
  if (fan_in <= 0 || fan_out <= 0)
    fail("init::xavier_uniform", "fans must be positive, got fan_in {} and fan_out {}", fan_in, fan_out);
  const double a = gain * std::sqrt(6.0 / static_cast<double>(fan_in + fan_out));
  return uniform(shape, -a, a, gen);
}

Tensor kaiming_uniform(const Shape& shape, std::int64_t fan_in, Generator& gen, double gain) {
  if (fan_in <= 0) fail("init::kaiming_uniform", "fan_in must be positive, got {}", fan_in);
  const double b = gain * std::sqrt(3.0 / static_cast<double>(fan_in));
  return uniform(shape, -b, b, gen);
}

}  // namespace define::nn::init
