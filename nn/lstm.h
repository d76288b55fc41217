// LSTM: a stack of fused LSTM layers (autograd/lstm.h; one GEMM for the input projection of all
// steps, one fused cell kernel per step), compatible with PyTorch's nn.LSTM: gate order i, f, g, o,
// parameters weight_ih_l<k> [4H_k, in_k], weight_hh_l<k> [4H_k, H_k], bias_ih_l<k> and
// bias_hh_l<k> [4H_k], registered in that order per layer, so state dicts map one to one.
// Parameters per layer: 4 H (in + H) + 8 H with biases (LSTM(400, 1150): 7,139,200).
//
// Layers may have different hidden sizes, which AWD-LSTM needs (400 -> 1150 -> 1150 -> 400):
//   LSTM(400, std::vector<std::int64_t>{1150, 1150, 400})   layer k reads layer k-1's output
//   LSTM(400, 1150, 3)                                      PyTorch's nn.LSTM(400, 1150, 3)
// All parameters sit on this one module, so WeightDrop can name any of them:
//   weight_drop(lstm, {"weight_hh_l0", "weight_hh_l1", "weight_hh_l2"}, 0.5)   (AWD-LSTM's wdrop)
// The layers read their parameters through the module's slots at every call, so a WeightDrop (or
// any ParameterSwap) sees its substitute used by the fused op.
//
// Input and state are time-major: x [T, B, in], per-layer h and c [B, H_k]. forward returns the
// last layer's outputs [T, B, H_last] and the final state of every layer; for truncated BPTT,
// pass detach(previous state) into the next call (the state carries over, the graph does not).
// Initialisation as PyTorch: every parameter of layer k ~ U(-1/sqrt(H_k), 1/sqrt(H_k)).
#pragma once

#include <cstdint>
#include <vector>

#include "core/factory.h"
#include "nn/module.h"

namespace define::nn {

struct LSTMOptions {
  bool bias = true;
  // Dropout on the output of every layer but the last (training only), as nn.LSTM's `dropout`.
  double dropout = 0.0;
  // With variational, that dropout draws one mask per sequence, shared by every time step
  // (LockedDropout; AWD-LSTM's dropouth between its layers) instead of one per element.
  bool variational = false;
};

// Per-layer recurrent state: h[k] and c[k] of layer k, each [B, H_k]. Empty: zeros.
struct LSTMState {
  std::vector<Tensor> h, c;
  bool empty() const { return h.empty() && c.empty(); }
};

struct LSTMOutput {
  Tensor output;      // [T, B, H_last]: the last layer's h_1 .. h_T
  LSTMState state;    // every layer's h_T and c_T
};

class LSTM : public Module {
 public:
  // num_layers layers of hidden_size units (nn.LSTM(input_size, hidden_size, num_layers)).
  LSTM(std::int64_t input_size, std::int64_t hidden_size, std::int64_t num_layers = 1, LSTMOptions opt = {},
       Generator& gen = default_generator());
  // One layer per entry of hidden_sizes.
  LSTM(std::int64_t input_size, std::vector<std::int64_t> hidden_sizes, LSTMOptions opt = {},
       Generator& gen = default_generator());

  // x [T, B, input_size]; state empty (zeros) or one [B, H_k] h and c per layer. Throws
  // "LSTM: ..." naming a mismatching input or state.
  LSTMOutput forward(const Tensor& x, const LSTMState& state = {}) const;

  // Zeros for every layer, [batch, H_k] (dtype and device as given).
  LSTMState zero_state(std::int64_t batch, TensorOptions opt = {}) const;

  std::int64_t input_size() const { return input_size_; }
  std::int64_t num_layers() const { return static_cast<std::int64_t>(hidden_.size()); }
  const std::vector<std::int64_t>& hidden_sizes() const { return hidden_; }
  std::int64_t output_size() const { return hidden_.back(); }
  const LSTMOptions& options() const { return opt_; }

 private:
  struct Layer {
    Tensor* w_ih = nullptr;  // slots owned by Module (read through at every call, never copied)
    Tensor* w_hh = nullptr;
    Tensor* b_ih = nullptr;  // null without biases
    Tensor* b_hh = nullptr;
  };
  Tensor between_layers(const Tensor& y) const;

  std::int64_t input_size_;
  std::vector<std::int64_t> hidden_;
  LSTMOptions opt_;
  std::vector<Layer> layers_;
};

// The same state cut off from the graph that produced it: carry it into the next chunk of a
// sequence without backpropagating into the previous one (truncated BPTT).
LSTMState detach(const LSTMState& state);

}  // namespace define::nn
