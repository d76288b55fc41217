#include "nn/lstm.h"

#include <cmath>
#include <string>
#include <utility>

#include "autograd/dropout.h"
#include "autograd/elementwise.h"
#include "autograd/engine.h"
#include "autograd/lstm.h"
#include "nn/dropout.h"
#include "nn/init.h"

namespace define::nn {
namespace {

std::vector<std::int64_t> repeated(std::int64_t hidden_size, std::int64_t num_layers) {
  if (num_layers < 1) fail("LSTM", "num_layers must be at least 1, got {}", num_layers);
  return std::vector<std::int64_t>(static_cast<std::size_t>(num_layers), hidden_size);
}

void check_state_tensor(const char* which, std::size_t layer, const Tensor& t, std::int64_t batch,
                        std::int64_t hidden) {
  if (!t.defined()) fail("LSTM", "state {}[{}] is an undefined tensor", which, layer);
  if (t.shape() != Shape{batch, hidden})
    fail("LSTM", "state {}[{}] {} does not match [batch, hidden] = [{},{}]", which, layer, shape_str(t.shape()), batch,
         hidden);
}

}  // namespace

LSTM::LSTM(std::int64_t input_size, std::int64_t hidden_size, std::int64_t num_layers, LSTMOptions opt,
           Generator& gen)
    : LSTM(input_size, repeated(hidden_size, num_layers), opt, gen) {}

LSTM::LSTM(std::int64_t input_size, std::vector<std::int64_t> hidden_sizes, LSTMOptions opt, Generator& gen)
    : Module("LSTM"), input_size_(input_size), hidden_(std::move(hidden_sizes)), opt_(opt) {
  if (input_size_ <= 0) fail("LSTM", "input_size must be positive, got {}", input_size_);
  if (hidden_.empty()) fail("LSTM", "needs at least one layer (no hidden sizes given)");
  check_dropout_probability("LSTM", opt_.dropout);
  std::int64_t in = input_size_;
  for (std::size_t k = 0; k < hidden_.size(); ++k) {
    const std::int64_t H = hidden_[k];
    if (H <= 0) fail("LSTM", "hidden size of layer {} must be positive, got {}", k, H);
    const double bound = 1.0 / std::sqrt(static_cast<double>(H));  // PyTorch: U(-1/sqrt(H), 1/sqrt(H))
    const std::string l = "_l" + std::to_string(k);
    Layer layer;
    layer.w_ih = &register_parameter("weight_ih" + l, init::uniform({4 * H, in}, -bound, bound, gen));
    layer.w_hh = &register_parameter("weight_hh" + l, init::uniform({4 * H, H}, -bound, bound, gen));
    if (opt_.bias) {
      layer.b_ih = &register_parameter("bias_ih" + l, init::uniform({4 * H}, -bound, bound, gen));
      layer.b_hh = &register_parameter("bias_hh" + l, init::uniform({4 * H}, -bound, bound, gen));
    }
    layers_.push_back(layer);
    in = H;
  }
}

Tensor LSTM::between_layers(const Tensor& y) const {
  if (!is_training() || opt_.dropout == 0.0) return y;
  if (!opt_.variational) return dropout(y, opt_.dropout, true, generator());
  // One mask [1, B, H] for the whole sequence (as LockedDropout), broadcast over time.
  Shape mask_shape = y.shape();
  mask_shape[0] = 1;
  return mul(y, dropout(ones(mask_shape, {y.dtype(), y.device()}), opt_.dropout, true, generator()));
}

LSTMOutput LSTM::forward(const Tensor& x, const LSTMState& state) const {
  if (!x.defined() || x.dim() != 3 || x.shape()[2] != input_size_)
    fail("LSTM", "expected input [T, B, {}] (time-major), got {}", input_size_,
         x.defined() ? shape_str(x.shape()) : std::string("an undefined tensor"));
  const std::size_t n = layers_.size();
  const std::int64_t batch = x.shape()[1];
  if (!state.empty()) {
    if (state.h.size() != n || state.c.size() != n)
      fail("LSTM", "state has {} h and {} c tensors for {} layers", state.h.size(), state.c.size(), n);
    for (std::size_t k = 0; k < n; ++k) {
      check_state_tensor("h", k, state.h[k], batch, hidden_[k]);
      check_state_tensor("c", k, state.c[k], batch, hidden_[k]);
    }
  }
  LSTMOutput out;
  Tensor y = x;
  for (std::size_t k = 0; k < n; ++k) {
    const Layer& p = layers_[k];
    const Tensor none;
    LstmLayerResult r = lstm_layer(y, state.empty() ? none : state.h[k], state.empty() ? none : state.c[k], *p.w_ih,
                                   *p.w_hh, p.b_ih ? *p.b_ih : none, p.b_hh ? *p.b_hh : none);
    out.state.h.push_back(r.h_n);
    out.state.c.push_back(r.c_n);
    y = k + 1 < n ? between_layers(r.output) : r.output;
  }
  out.output = y;
  return out;
}

LSTMState LSTM::zero_state(std::int64_t batch, TensorOptions opt) const {
  LSTMState s;
  for (std::int64_t H : hidden_) {
    s.h.push_back(zeros({batch, H}, opt));
    s.c.push_back(zeros({batch, H}, opt));
  }
  return s;
}

LSTMState detach(const LSTMState& state) {
  LSTMState out;
  for (const Tensor& h : state.h) out.h.push_back(h.defined() ? define::detach(h) : h);
  for (const Tensor& c : state.c) out.c.push_back(c.defined() ? define::detach(c) : c);
  return out;
}

}  // namespace define::nn
