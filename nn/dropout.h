// Dropout: each element zeroed with probability p in training, the rest scaled by 1 / (1 - p);
// identity in eval mode. The mask comes from the module's generator() (Philox), so a seeded
// generator reproduces it on any device.
#pragma once

#include "nn/module.h"

namespace define::nn {

class Dropout : public Module {
 public:
  explicit Dropout(double p = 0.5);
  Tensor forward(const Tensor& x) const;
  double p() const { return p_; }

 private:
  double p_;
};

// Throws "<layer>: dropout probability 1.5 is outside [0, 1]" (shared by the dropout layers).
void check_dropout_probability(const char* layer, double p);

}  // namespace define::nn
