#include "autograd/reduce.h"

#include "autograd/function.h"
#include "kernels/elementwise.h"
#include "kernels/reduce.h"

namespace define {
namespace {

// Which dims of an n-d tensor a dims list reduces (empty = all); the kernels validated the list.
std::vector<bool> reduced_mask(std::int64_t ndim, const std::vector<std::int64_t>& dims) {
  std::vector<bool> mask(static_cast<std::size_t>(ndim), dims.empty());
  for (std::int64_t d : dims)
    if (ndim > 0) mask[normalize_dim(d, ndim, "sum")] = true;
  return mask;
}

// The upstream gradient of a reduction seen with the reduced dims put back as size 1 (stride 0),
// so that it broadcasts against the input's shape.
Tensor with_reduced_dims(const Tensor& g, const std::vector<bool>& mask, bool keepdim) {
  if (keepdim) return g;
  Shape shape;
  Strides strides;
  std::size_t next = 0;
  for (bool reduced : mask) {
    if (reduced) {
      shape.push_back(1);
      strides.push_back(0);
    } else {
      shape.push_back(g.shape()[next]);
      strides.push_back(g.strides()[next]);
      ++next;
    }
  }
  return g.as_strided(shape, strides, g.offset());
}

Tensor sum_or_mean(const char* name, const Tensor& x, const std::vector<std::int64_t>& dims, bool keepdim,
                   bool average) {
  Tensor y = average ? kernels::mean(x, dims, keepdim) : kernels::sum(x, dims, keepdim);
  if (needs_grad({x})) {
    const Shape in = x.shape();
    const std::vector<bool> mask = reduced_mask(x.dim(), dims);
    const double scale = average ? static_cast<double>(y.numel()) / static_cast<double>(x.numel()) : 1.0;
    // d sum / dx = 1 for every element: the gradient is g broadcast back over the reduced dims
    // (times 1/count for mean).
    record(name, {x}, {y}, [=](const BackwardArgs& a) {
      Tensor gx = kernels::broadcast_to(with_reduced_dims(a.grad(), mask, keepdim), in);
      if (scale != 1.0) kernels::unary_into(kernels::UnaryOp::MulScalar, gx, gx, scale);
      return std::vector<Tensor>{gx};
    });
  }
  return y;
}

}  // namespace

Tensor sum(const Tensor& x) { return sum_or_mean("sum", x, {}, false, false); }
Tensor sum(const Tensor& x, const std::vector<std::int64_t>& dims, bool keepdim) {
  return sum_or_mean("sum", x, dims, keepdim, false);
}
Tensor mean(const Tensor& x) { return sum_or_mean("mean", x, {}, false, true); }
Tensor mean(const Tensor& x, const std::vector<std::int64_t>& dims, bool keepdim) {
  return sum_or_mean("mean", x, dims, keepdim, true);
}

Tensor max(const Tensor& x, std::int64_t dim, bool keepdim) {
  auto [values, indices] = kernels::max(x, dim, keepdim);
  if (needs_grad({x})) {
    // The gradient of each line's max goes to the element that produced it (the first one on
    // ties); indices are internal to this node, so they need no version check.
    const Shape in = x.shape();
    // A copy, not the structured binding: clang before 16 cannot capture bindings in a lambda.
    const Tensor indices_kept = indices;
    record("max", {x}, {values}, [=](const BackwardArgs& a) {
      return std::vector<Tensor>{kernels::max_backward(a.grad(), indices_kept, in, dim, keepdim)};
    });
  }
  return values;
}

// Not differentiable: integer output.
Tensor argmax(const Tensor& x, std::int64_t dim, bool keepdim) { return kernels::argmax(x, dim, keepdim); }

Tensor sum_to(const Tensor& x, const Shape& shape) {
  Tensor y = kernels::sum_to(x, shape);
  if (y.impl() == x.impl()) return x;  // nothing to reduce: no node
  if (needs_grad({x})) {
    // Adjoint of broadcasting: g broadcast back to x's shape.
    const Shape in = x.shape();
    record("sum_to", {x}, {y}, [in](const BackwardArgs& a) {
      return std::vector<Tensor>{kernels::broadcast_to(a.grad(), in)};
    });
  }
  return y;
}

}  // namespace define
