#include "nn/optim/clip.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

#include "autograd/grad_mode.h"
#include "core/factory.h"
#include "kernels/copy.h"
#include "kernels/elementwise.h"
#include "kernels/reduce.h"

namespace define::optim {

using kernels::BinaryOp;
using kernels::UnaryOp;

namespace {

void check_norm_type(const char* op, double p) {
  if (!(p > 0)) fail(op, "norm_type must be > 0 or infinity (got {})", p);
}

// ||g||_p^p for finite p, max |g| for p = inf, as a 0-d float64 tensor on g's device (no sync).
Tensor partial_norm(const Tensor& g, double p) {
  Tensor part;
  if (std::isinf(p)) {
    Tensor a = kernels::contiguous(kernels::unary(UnaryOp::Abs, g));
    part = kernels::max(a.as_strided({a.numel()}, {1}, a.offset()), 0, false).first;
  } else if (p == 2) {
    part = kernels::sum_of_squares(g);  // one read of g, no g * g the size of the model
  } else if (p == 1) {
    part = kernels::sum(kernels::unary(UnaryOp::Abs, g), {}, false);
  } else {
    part = kernels::sum(kernels::unary(UnaryOp::PowScalar, kernels::unary(UnaryOp::Abs, g), p), {}, false);
  }
  return kernels::cast(part, DType::Float64);
}

double finish(double acc, double p) { return std::isinf(p) || p == 1 ? acc : std::pow(acc, 1.0 / p); }

// The partial norms added up on each device (in float64), one 0-d tensor per device.
std::vector<std::pair<Device, Tensor>> device_partials(const NamedParameters& params, double p) {
  std::vector<std::pair<Device, Tensor>> acc;
  for (const auto& np : params) {
    Tensor g = np.second.grad();
    if (!g.defined() || g.numel() == 0) continue;
    Tensor part = partial_norm(g, p);
    auto it = acc.begin();
    while (it != acc.end() && it->first != g.device()) ++it;
    if (it == acc.end()) {
      acc.emplace_back(g.device(), part);
    } else {
      // Maximum propagates NaN from either side, like the sum does.
      kernels::binary_into(std::isinf(p) ? BinaryOp::Maximum : BinaryOp::Add, it->second, it->second, part);
    }
  }
  return acc;
}

// Reads one number per device, so a model on a GPU costs one synchronisation, not one per
// parameter.
double total_norm(const NamedParameters& params, double p) {
  const std::vector<std::pair<Device, Tensor>> acc = device_partials(params, p);
  double total = 0;
  for (const auto& [dev, t] : acc) {
    (void)dev;
    const double v = t.item_double();
    if (std::isinf(p)) total = (std::isnan(v) || std::isnan(total)) ? NAN : std::max(total, v);
    else total += v;
  }
  return finish(total, p);
}

// The total norm as a 0-d float64 tensor on the gradients' one device (zero on the CPU when no
// parameter has a gradient), computed there without a copy to the host.
Tensor total_norm_on_device(const char* op, const NamedParameters& params, double p) {
  const std::vector<std::pair<Device, Tensor>> acc = device_partials(params, p);
  if (acc.empty()) return scalar_tensor(0.0, {.dtype = DType::Float64});
  if (acc.size() > 1) fail(op, "the gradients live on {} and {}: one device only", acc[0].first.str(), acc[1].first.str());
  const Tensor& total = acc[0].second;
  return std::isinf(p) || p == 1 ? total : kernels::unary(UnaryOp::PowScalar, total, 1.0 / p);
}

// For the error message: the first parameter whose own gradient norm is not finite.
std::string first_nonfinite(const NamedParameters& params, double p) {
  for (const auto& np : params) {
    Tensor g = np.second.grad();
    if (!g.defined() || g.numel() == 0) continue;
    if (!std::isfinite(partial_norm(g, p).item_double())) return np.first;
  }
  return "";  // every part finite: the sum overflowed
}

}  // namespace

std::string first_nonfinite_gradient(const NamedParameters& params) {
  NoGradGuard no_grad;
  return first_nonfinite(params, 2.0);
}

double grad_norm(const NamedParameters& params, double norm_type) {
  check_norm_type("grad_norm", norm_type);
  NoGradGuard no_grad;
  return total_norm(params, norm_type);
}

double grad_norm(const std::vector<Tensor>& params, double norm_type) {
  return grad_norm(name_parameters(params), norm_type);
}

namespace {

// Every gradient multiplied by factor, in place.
void scale_gradients(const NamedParameters& params, double factor) {
  for (const auto& np : params) {
    Tensor g = np.second.grad();
    if (!g.defined()) continue;
    kernels::unary_into(UnaryOp::MulScalar, g, g, factor);
    g.bump_version();
  }
}

}  // namespace

double clip_grad_norm(const NamedParameters& params, double max_norm, double norm_type, NonFinite on_nonfinite) {
  check_norm_type("clip_grad_norm", norm_type);
  if (!(max_norm >= 0) || std::isinf(max_norm))
    fail("clip_grad_norm", "max_norm must be finite and >= 0 (got {})", max_norm);
  NoGradGuard no_grad;
  const double total = total_norm(params, norm_type);
  if (!std::isfinite(total)) {
    if (on_nonfinite == NonFinite::Skip) return total;
    const std::string who = first_nonfinite(params, norm_type);
    if (who.empty())
      fail("clip_grad_norm", "the total gradient norm overflowed to {} (every gradient is finite)", total);
    fail("clip_grad_norm", "the total gradient norm is {}: the gradient of '{}' contains NaN or inf", total, who);
  }
  // torch.nn.utils.clip_grad_norm_'s coefficient; the 1e-6 guards max_norm / 0.
  const double coef = max_norm / (total + 1e-6);
  if (coef < 1) scale_gradients(params, coef);
  return total;
}

double unscale_clip_grad_norm(const NamedParameters& params, double loss_scale, double max_norm, double norm_type) {
  check_norm_type("unscale_clip_grad_norm", norm_type);
  if (!(loss_scale > 0) || !std::isfinite(loss_scale))
    fail("unscale_clip_grad_norm", "loss_scale must be positive and finite (got {})", loss_scale);
  if (!(max_norm >= 0) || std::isinf(max_norm))
    fail("unscale_clip_grad_norm", "max_norm must be finite and >= 0 (got {})", max_norm);
  NoGradGuard no_grad;
  const double total = total_norm(params, norm_type) / loss_scale;
  if (!std::isfinite(total)) return total;
  const double clip = max_norm > 0 ? std::min(1.0, max_norm / (total + 1e-6)) : 1.0;
  const double factor = clip / loss_scale;
  if (factor != 1.0) scale_gradients(params, factor);
  return total;
}

Tensor grad_norm_on_device(const NamedParameters& params, double norm_type) {
  check_norm_type("grad_norm", norm_type);
  NoGradGuard no_grad;
  return total_norm_on_device("grad_norm", params, norm_type);
}

Tensor clip_grad_norm_on_device(const NamedParameters& params, double max_norm, double norm_type) {
  const char* op = "clip_grad_norm";
  check_norm_type(op, norm_type);
  if (!(max_norm >= 0) || std::isinf(max_norm)) fail(op, "max_norm must be finite and >= 0 (got {})", max_norm);
  NoGradGuard no_grad;
  const Tensor total = total_norm_on_device(op, params, norm_type);
  // scale = min(max_norm / (total + 1e-6), 1) as clip_grad_norm's coefficient, and 1 (gradients
  // untouched) when the total is not finite: the NonFinite::Skip behaviour, decided on the device.
  const Tensor coef = kernels::unary(UnaryOp::RDivScalar, kernels::unary(UnaryOp::AddScalar, total, 1e-6), max_norm);
  const Tensor not_finite = kernels::unary(UnaryOp::GeScalar, total, std::numeric_limits<double>::infinity());
  const Tensor nan = kernels::binary(BinaryOp::Ne, total, total);
  const Tensor keep = kernels::binary(BinaryOp::Maximum, not_finite, nan);
  const Tensor scale = kernels::masked_fill(kernels::unary(UnaryOp::Clamp, coef, 0.0, 1.0), keep, 1.0);
  Tensor scale_as_grad;  // scale in each gradient dtype, cast once per dtype
  for (const auto& np : params) {
    Tensor g = np.second.grad();
    if (!g.defined() || g.numel() == 0) continue;
    if (!scale_as_grad.defined() || scale_as_grad.dtype() != g.dtype()) scale_as_grad = kernels::cast(scale, g.dtype());
    // Multiplying by exactly 1 leaves a gradient bit for bit as it was.
    kernels::binary_into(BinaryOp::Mul, g, g, scale_as_grad);
    g.bump_version();
  }
  return total;
}

double clip_grad_norm(const std::vector<Tensor>& params, double max_norm, double norm_type, NonFinite on_nonfinite) {
  return clip_grad_norm(name_parameters(params), max_norm, norm_type, on_nonfinite);
}

void clip_grad_value(const NamedParameters& params, double clip_value) {
  if (!(clip_value >= 0) || std::isinf(clip_value))
    fail("clip_grad_value", "clip_value must be finite and >= 0 (got {})", clip_value);
  NoGradGuard no_grad;
  for (const auto& np : params) {
    Tensor g = np.second.grad();
    if (!g.defined()) continue;
    kernels::unary_into(UnaryOp::Clamp, g, g, -clip_value, clip_value);
    g.bump_version();
  }
}

void clip_grad_value(const std::vector<Tensor>& params, double clip_value) {
  clip_grad_value(name_parameters(params), clip_value);
}

}  // namespace define::optim
