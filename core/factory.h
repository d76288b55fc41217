// Tensor constructors. All of them produce contiguous tensors with no autograd history.
// Values are produced on the host and uploaded for device tensors; the random ones use the
// Philox stream, so a tensor drawn on the CPU and on a CUDA device with the same generator
// state is identical.
#pragma once

#include <cstdint>
#include <initializer_list>
#include <vector>

#include "core/generator.h"
#include "core/tensor.h"

namespace define {

struct TensorOptions {
  DType dtype = DType::Float32;
  Device device = Device::cpu();
};

Tensor empty(const Shape& shape, TensorOptions opt = {});
Tensor zeros(const Shape& shape, TensorOptions opt = {});
Tensor ones(const Shape& shape, TensorOptions opt = {});
Tensor full(const Shape& shape, double value, TensorOptions opt = {});
Tensor scalar_tensor(double value, TensorOptions opt = {});
Tensor arange(std::int64_t n, TensorOptions opt = {});
Tensor empty_like(const Tensor& t);
Tensor zeros_like(const Tensor& t);
Tensor ones_like(const Tensor& t);

// Copies host data into a new tensor of the given shape (element count must match).
template <typename T>
Tensor from_vector(const std::vector<T>& values, const Shape& shape, Device device = Device::cpu());
template <typename T>
Tensor from_vector(const std::vector<T>& values) {
  return from_vector(values, Shape{static_cast<std::int64_t>(values.size())});
}

// Uniform on [lo, hi) and normal(mean, std) from the Philox stream (Box-Muller on pairs).
Tensor rand_uniform(const Shape& shape, double lo, double hi, TensorOptions opt = {},
                    Generator& gen = default_generator());
Tensor rand_normal(const Shape& shape, double mean, double stddev, TensorOptions opt = {},
                   Generator& gen = default_generator());
// Integers uniform on [0, high) (for token ids and index tests).
Tensor rand_int(const Shape& shape, std::int64_t high, TensorOptions opt = {.dtype = DType::Int64},
                Generator& gen = default_generator());

// Copy of a tensor onto another device (or a contiguous copy on the same device). Raw: no
// autograd; autograd/views.h has the differentiable to_device().
Tensor copy_to_device(const Tensor& t, Device device);

}  // namespace define
