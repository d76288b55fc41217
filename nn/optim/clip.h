// Gradient clipping (in place, on whatever device the gradients live).
//
// clip_grad_norm scales every gradient by max_norm / (total + 1e-6) when the total norm
// `total` = (sum over gradients of ||g||_p^p)^(1/p) (the max |g| for p = inf) exceeds max_norm,
// and leaves them untouched otherwise. It returns the total norm before clipping, so callers can
// log it. Parameters without a gradient are skipped.
//
// A non-finite total norm (a NaN or inf gradient, or an overflow of the sum) cannot be clipped
// meaningfully: scaling would turn every gradient into NaN. What happens is the caller's choice:
//   NonFinite::Error (default)  throw define::Error naming the first parameter whose gradient
//                               norm is not finite; gradients are left untouched;
//   NonFinite::Skip             leave the gradients untouched and return the non-finite norm,
//                               for a loop that skips the step (check std::isfinite on it).
#pragma once

#include <limits>
#include <string>
#include <vector>

#include "nn/optim/optimizer.h"

namespace define::optim {

enum class NonFinite { Error, Skip };

inline constexpr double kInfNorm = std::numeric_limits<double>::infinity();

// The total gradient norm, without clipping. norm_type > 0 or kInfNorm.
double grad_norm(const NamedParameters& params, double norm_type = 2.0);
double grad_norm(const std::vector<Tensor>& params, double norm_type = 2.0);
template <NamedTensorRange R>
double grad_norm(const R& params, double norm_type = 2.0) {
  return grad_norm(to_named_parameters(params), norm_type);
}

// The name of the first parameter (in the given order) whose gradient holds a NaN or inf; empty
// when every gradient is finite. What a training loop names when it meets a non-finite norm.
std::string first_nonfinite_gradient(const NamedParameters& params);

double clip_grad_norm(const NamedParameters& params, double max_norm, double norm_type = 2.0,
                      NonFinite on_nonfinite = NonFinite::Error);
double clip_grad_norm(const std::vector<Tensor>& params, double max_norm, double norm_type = 2.0,
                      NonFinite on_nonfinite = NonFinite::Error);

template <NamedTensorRange R>
double clip_grad_norm(const R& params, double max_norm, double norm_type = 2.0, NonFinite on_nonfinite = NonFinite::Error) {
  return clip_grad_norm(to_named_parameters(params), max_norm, norm_type, on_nonfinite);
}

// Mixed precision's unscale and clip in one pass (train/precision.h): the gradients hold
// loss_scale times the true gradient. Returns the true total norm (the scaled one / loss_scale)
// and multiplies every gradient by min(1, max_norm / (true + 1e-6)) / loss_scale (max_norm 0: no
// clipping, 1 / loss_scale alone). A non-finite total (an overflow) leaves the gradients as they
// are and is returned, for the loop to skip the step.
double unscale_clip_grad_norm(const NamedParameters& params, double loss_scale, double max_norm,
                              double norm_type = 2.0);

// The same two without waiting for the device: the total norm is returned as a 0-d float64 tensor
// on the gradients' device (which must be one device; a CPU zero when no parameter has a gradient),
// and clip_grad_norm_on_device computes and applies the scale there. A non-finite total leaves the
// gradients untouched (NonFinite::Skip); the caller sees it when it reads the norm. What a training
// loop uses so that a step does not block on a device-to-host copy.
Tensor grad_norm_on_device(const NamedParameters& params, double norm_type = 2.0);
Tensor clip_grad_norm_on_device(const NamedParameters& params, double max_norm, double norm_type = 2.0);

// Clamps every gradient element into [-clip_value, clip_value] (clip_value >= 0). NaN elements
// stay NaN.
void clip_grad_value(const NamedParameters& params, double clip_value);
void clip_grad_value(const std::vector<Tensor>& params, double clip_value);
template <NamedTensorRange R>
void clip_grad_value(const R& params, double clip_value) {
  clip_grad_value(to_named_parameters(params), clip_value);
}

}  // namespace define::optim
