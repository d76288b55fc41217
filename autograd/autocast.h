// Mixed precision's op policy, in the spirit of PyTorch's autocast: inside a Scope (the training
// loop opens one around each step's forward when train.precision is fp16 or bf16), the ops below
// cast their inputs as this table says, and nowhere else does anything change. Parameters stay
// float32 (the master weights); a weight is cast once between two backward passes however many
// GEMMs read it (an LSTM's recurrent weight every step, a tied embedding twice), and its 16-bit
// copy's gradient flows back through the cast into the float32 gradient the optimizer sees.
//
//   GEMM inputs, cast to 16 bits (float accumulation in the kernels): linear / matmul / bmm,
//     scaled_dot_product_attention (q, k, v) and relative_attention (q, k, v, r, u, w), the LSTM
//     layer's input, h0 and gate weights and biases, grouped_linear (DeFINE / DExTra), and
//     linear_cross_entropy's x and weight (the tied output layer; its softmax runs in float);
//   float32 inputs: softmax, log_softmax, cross_entropy, nll_loss, the adaptive softmax's loss
//     and log-probabilities (the cluster logits come from linear layers, in 16 bits, and are
//     widened here), the LSTM's cell state c0 (so the cell state stays float32);
//   computed in float whatever their inputs: layer-norm statistics (mean and rstd are float32),
//     reductions, gradient norms and embedding-gradient accumulation (the kernels widen);
//   element-wise ops, dropout, split-mix and concatenation: run in their inputs' dtype, 16 bits
//     in and out with float arithmetic inside; a 16-bit input beside a wider float one is promoted
//     to the wider (float16 with bfloat16 gives float32), as PyTorch's type promotion does. float32
//     beside float64 stays an error ("dtypes float32 and float64 do not match"): that mix is a bug.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "core/tensor.h"

namespace define::autocast {

// The 16-bit dtype of the innermost open Scope on this thread, or nullopt.
std::optional<DType> lower_dtype();

// Opens a mixed-precision region with the given 16-bit dtype (nullopt: an fp32 region, e.g. an
// evaluation inside a training step). Nests; the previous state comes back at destruction, and
// leaving the outermost region drops the cached weight casts.
class Scope {
 public:
  explicit Scope(std::optional<DType> dtype);
  ~Scope();
  Scope(const Scope&) = delete;
  Scope& operator=(const Scope&) = delete;

 private:
  std::optional<DType> previous_;
};

// A GEMM input: inside a Scope, a floating tensor in the scope's 16-bit dtype (cached for leaves
// that require a gradient, i.e. parameters, until the next backward pass); t itself otherwise
// (undefined and integer tensors pass).
Tensor gemm_input(const Tensor& t);
// A float32-policy input: a 16-bit t widened to float32 (differentiably), anything else as it is.
// Applies in and outside a Scope: those ops have no 16-bit path worth having.
Tensor float_input(const Tensor& t);
// a and b in one float dtype when one of them is 16-bit: the wider of the two (see above);
// anything else passes unchanged (and meets the ops' own dtype checks).
std::pair<Tensor, Tensor> promote(const Tensor& a, const Tensor& b);
// The same for a list: when one of ts is 16-bit, every float tensor in the widest of their dtypes.
std::vector<Tensor> promote_all(const std::vector<Tensor>& ts);

// How many tensors gemm_input has cast to 16 bits in this process (cache hits not counted): lets
// tests see that a mixed-precision run really fed its GEMMs 16-bit inputs.
std::uint64_t lowered_casts();

// Forgets the cached weight casts (the autograd engine calls it at the start of every backward
// pass: the next forward casts the possibly updated weights again).
void clear_cache();

}  // namespace define::autocast
