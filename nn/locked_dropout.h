// LockedDropout (variational dropout, Gal & Ghahramani 2016; AWD-LSTM): for input [T, B, ...],
// one mask of shape [1, B, ...] is drawn per forward and shared by every time step, so a unit
// dropped for a sequence stays dropped for all of it (per-step masks would let a recurrent layer
// average the noise away). Kept units are scaled by 1 / (1 - p); identity in eval mode.
#pragma once

#include "nn/module.h"

namespace define::nn {

// The same as a function: x [T, B, ...] with one mask over dim 0 drawn from gen (x itself unless
// training and p > 0).
Tensor locked_dropout(const Tensor& x, double p, bool training, Generator& gen);

class LockedDropout : public Module {
 public:
  explicit LockedDropout(double p = 0.5);
  // x: [T, B, H] (time first; any trailing dims after B are masked per element too).
  Tensor forward(const Tensor& x) const;
  double p() const { return p_; }

 private:
  double p_;
};

}  // namespace define::nn
