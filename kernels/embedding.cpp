#include "kernels/embedding.h"

#include <algorithm>

#include "core/factory.h"
#include "kernels/backend.h"
#include "kernels/float16_compute.h"
#include "kernels/copy.h"
#include "kernels/cpu/embedding.h"
#include "kernels/index.h"
#include "kernels/ref/embedding.h"

namespace define::kernels {
namespace {

// Indices as a contiguous 1-d tensor of N values.
Tensor flat_indices(const Tensor& indices) {
  const Tensor c = contiguous(indices);
  return c.as_strided({c.numel()}, {1}, c.offset());
}

// The checks both backward entry points make; returns grad_out as contiguous [N, D].
Tensor checked_backward_rows(const char* op, const Tensor& grad_out, const Tensor& indices, std::int64_t num_rows) {
  check_same_device(op, {grad_out, indices});
  check_floating(op, grad_out);
  check_index(op, indices);
  if (grad_out.dim() != indices.dim() + 1 ||
      !std::equal(indices.shape().begin(), indices.shape().end(), grad_out.shape().begin()))
    fail(op, "grad_out {} does not match indices {} plus one trailing dim", shape_str(grad_out.shape()),
         shape_str(indices.shape()));
  check_index_range(op, indices, num_rows, fmt::format("{} rows", num_rows));
  const std::int64_t width = grad_out.shape().back();
  const Tensor g = contiguous(grad_out);
  return g.as_strided({indices.numel(), width}, {width, 1}, g.offset());
}

}  // namespace

Tensor embedding(const Tensor& weight, const Tensor& indices) {
  const char* op = "embedding";
  if (any_float16({weight})) return narrow(embedding(widen(weight, weight), indices), weight.dtype());
  check_same_device(op, {weight, indices});
  check_floating(op, weight);
  if (weight.dim() != 2) fail(op, "weight must be 2-d [rows, dim], got {}", shape_str(weight.shape()));
  check_index(op, indices);
  const std::int64_t rows = weight.shape()[0], width = weight.shape()[1];
  check_index_range(op, indices, rows, fmt::format("{} rows", rows));
  Shape shape = indices.shape();
  shape.push_back(width);
  Tensor out = empty(shape, {weight.dtype(), weight.device()});
  if (out.numel() == 0) return out;
  const Tensor out2d = out.as_strided({indices.numel(), width}, {width, 1}, 0);
  DEFINE_BACKEND_CALL(op, weight, embedding, weight, flat_indices(indices), out2d);
  return out;
}


Tensor embedding_backward(const Tensor& grad_out, const Tensor& indices, std::int64_t num_rows,
                          std::int64_t padding_idx) {
  const char* op = "embedding_backward";
  // Rows add up in float; the result is rounded once.
  if (any_float16({grad_out}))
    return narrow(embedding_backward(widen(grad_out, grad_out), indices, num_rows, padding_idx), grad_out.dtype());
  const Tensor g2d = checked_backward_rows(op, grad_out, indices, num_rows);
  Tensor grad_weight = empty({num_rows, g2d.shape()[1]}, {grad_out.dtype(), grad_out.device()});
  if (grad_weight.numel() == 0) return grad_weight;
  DEFINE_BACKEND_CALL(op, grad_out, embedding_backward, g2d, flat_indices(indices), grad_weight, padding_idx, false);
  return grad_weight;
}

void embedding_backward_into(const Tensor& grad_weight, const Tensor& grad_out, const Tensor& indices,
                             std::int64_t padding_idx) {
  const char* op = "embedding_backward_into";
  if (!grad_weight.defined() || grad_weight.dim() != 2 || !grad_weight.is_contiguous())
    fail(op, "grad_weight must be a contiguous 2-d [rows, dim] tensor, got {}",
         grad_weight.defined() ? shape_str(grad_weight.shape()) : "an undefined tensor");
  check_same_device(op, {grad_weight, grad_out});
  if (any_float16({grad_out}) && !any_float16({grad_weight})) {
    // A 16-bit gradient into a float32 (master) gradient: widened exactly, added in float32.
    embedding_backward_into(grad_weight, cast(grad_out, grad_weight.dtype()), indices, padding_idx);
    return;
  }
  if (any_float16({grad_weight})) {
    const Tensor wide = widen(grad_weight, grad_weight);
    embedding_backward_into(wide, widen(grad_out, grad_weight), indices, padding_idx);
    copy_into(grad_weight, wide);
    grad_weight.bump_version();
    return;
  }
  check_same_dtype(op, {grad_weight, grad_out});
  const Tensor g2d = checked_backward_rows(op, grad_out, indices, grad_weight.shape()[0]);
  if (g2d.shape()[1] != grad_weight.shape()[1])
    fail(op, "grad_out rows of width {} do not match grad_weight {}", g2d.shape()[1], shape_str(grad_weight.shape()));
  if (grad_weight.numel() == 0 || g2d.numel() == 0) return;
  DEFINE_BACKEND_CALL(op, grad_out, embedding_backward, g2d, flat_indices(indices), grad_weight, padding_idx, true);
  grad_weight.bump_version();
}

}  // namespace define::kernels
