#include "nn/dropout.h"

#include "autograd/dropout.h"

namespace define::nn {

void check_dropout_probability(const char* layer, double p) {
  if (!(p >= 0.0 && p <= 1.0)) fail(layer, "dropout probability {} is outside [0, 1]", p);
}

Dropout::Dropout(double p) : Module("Dropout"), p_(p) { check_dropout_probability("Dropout", p); }

Tensor Dropout::forward(const Tensor& x) const { return dropout(x, p_, is_training(), generator()); }

}  // namespace define::nn
