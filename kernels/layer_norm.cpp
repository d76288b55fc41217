// Entry points of the layer-norm family: checks, contiguous inputs, output allocation, dispatch.
#include "kernels/layer_norm.h"

#include <cmath>

#include "core/factory.h"
#include "kernels/backend.h"
#include "kernels/float16_compute.h"
#include "kernels/copy.h"
#include "kernels/cpu/layer_norm.h"
#include "kernels/ref/layer_norm.h"

namespace define::kernels {
namespace {

void check_affine(const char* op, const char* what, const Tensor& p, const Tensor& x) {
  if (!p.defined()) return;
  check_same_device(op, {x, p});
  if (!(is_float16(x.dtype()) && p.dtype() == DType::Float32)) check_same_dtype(op, {x, p});
  const std::int64_t d = x.shape().back();
  if (p.shape() != Shape{d})
    fail(op, "{} of shape {} does not match the normalized size {} (input {})", what, shape_str(p.shape()), d,
         shape_str(x.shape()));
}

Shape row_shape(const Shape& x) { return Shape(x.begin(), x.end() - 1); }

Tensor maybe_contiguous(const Tensor& t) { return t.defined() ? contiguous(t) : t; }

}  // namespace

LayerNormOutputs layer_norm(const Tensor& x_in, const Tensor& weight, const Tensor& bias, double eps) {
  const char* op = "layer_norm";
  if (any_float16({x_in, weight, bias}) && !takes_float16(x_in, {}, {weight, bias})) {
    // Statistics in float (mean and rstd stay float32), y in x's dtype.
    LayerNormOutputs r = layer_norm(widen(x_in, x_in), widen(weight, x_in), widen(bias, x_in), eps);
    return {narrow(r.y, x_in.dtype()), narrow(r.mean, DType::Float32), narrow(r.rstd, DType::Float32)};
  }
  check_floating(op, x_in);
  if (x_in.dim() == 0) fail(op, "expected a tensor with at least 1 dim, got a 0-d tensor");
  check_affine(op, "weight", weight, x_in);
  check_affine(op, "bias", bias, x_in);
  if (!(eps >= 0.0) || !std::isfinite(eps)) fail(op, "eps must be finite and >= 0, got {}", eps);
  Tensor x = contiguous(x_in);
  const TensorOptions opt{x.dtype(), x.device()};
  const TensorOptions stats{statistics_dtype(x.dtype()), x.device()};  // float32 for 16-bit x
  LayerNormOutputs out{empty(x.shape(), opt), zeros(row_shape(x.shape()), stats), zeros(row_shape(x.shape()), stats)};
  if (x.numel() > 0)
    DEFINE_BACKEND_CALL(op, x, layer_norm, x, maybe_contiguous(weight), maybe_contiguous(bias), out.y, out.mean,
                        out.rstd, eps);
  return out;
}

LayerNormGrads layer_norm_backward(const Tensor& dy_in, const Tensor& x_in, const Tensor& weight, const Tensor& mean,
                                   const Tensor& rstd, bool need_dx, bool need_dweight, bool need_dbias) {
  const char* op = "layer_norm_backward";
  if (any_float16({dy_in, x_in, weight}) && !(takes_float16(x_in, {dy_in}, {weight}) &&
                                              mean.dtype() == DType::Float32 && rstd.dtype() == DType::Float32)) {
    // dx in x's dtype; the parameter gradients in the parameters' dtype (float32 master weights).
    LayerNormGrads r = layer_norm_backward(widen(dy_in, x_in), widen(x_in, x_in), widen(weight, x_in),
                                           widen(mean, x_in), widen(rstd, x_in), need_dx, need_dweight, need_dbias);
    const DType param = weight.defined() ? weight.dtype() : x_in.dtype();
    return {narrow(r.dx, x_in.dtype()), narrow(r.dweight, param), narrow(r.dbias, param)};
  }
  check_floating(op, x_in);
  check_same_device(op, {dy_in, x_in, mean, rstd});
  check_same_dtype(op, {dy_in, x_in});
  check_same_dtype(op, {mean, rstd});
  if (mean.dtype() != statistics_dtype(x_in.dtype()))
    fail(op, "saved statistics of dtype {} do not match input of dtype {} (expected {})", dtype_name(mean.dtype()),
         dtype_name(x_in.dtype()), dtype_name(statistics_dtype(x_in.dtype())));
  if (x_in.dim() == 0) fail(op, "expected a tensor with at least 1 dim, got a 0-d tensor");
  if (dy_in.shape() != x_in.shape())
    fail(op, "gradient of shape {} does not match input of shape {}", shape_str(dy_in.shape()), shape_str(x_in.shape()));
  if (mean.shape() != row_shape(x_in.shape()) || rstd.shape() != mean.shape())
    fail(op, "saved statistics {} do not match input {}", shape_str(mean.shape()), shape_str(x_in.shape()));
  check_affine(op, "weight", weight, x_in);
  Tensor x = contiguous(x_in), dy = contiguous(dy_in);
  const TensorOptions opt{x.dtype(), x.device()};
  const Shape param{x.shape().back()};
  const TensorOptions param_opt{weight.defined() ? weight.dtype() : x.dtype(), x.device()};
  LayerNormGrads g;
  if (need_dx) g.dx = empty(x.shape(), opt);
  // Zero-filled: with no rows the parameter gradients are empty sums.
  if (need_dweight) g.dweight = zeros(param, param_opt);
  if (need_dbias) g.dbias = zeros(param, param_opt);
  if (x.numel() > 0 && (need_dx || need_dweight || need_dbias))
    DEFINE_BACKEND_CALL(op, x, layer_norm_backward, dy, x, maybe_contiguous(weight), contiguous(mean),
                        contiguous(rstd), g.dx, g.dweight, g.dbias);
  return g;
}

}  // namespace define::kernels
