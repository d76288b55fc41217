// Activation recomputation (gradient checkpointing): run a block without keeping the activations
// its backward would need, and re-run it in backward to get them back. Memory for a stack of L
// blocks drops from L blocks' activations to L block inputs plus one block's activations, for the
// price of a second forward pass of each block.
#pragma once

#include <functional>
#include <vector>

#include "core/generator.h"
#include "core/tensor.h"

namespace define {

// fn(inputs) with no graph kept inside it: the result's node saves only `inputs`. In backward, fn
// runs again on those inputs with grad mode on, `generator` set back to the state it had when the
// forward started (so dropout draws the same masks; set back afterwards), and its gradients flow
// to `inputs` and to `params`, the leaves fn uses besides its inputs (the block's weights). fn must
// compute the same function both times and read nothing else that requires a gradient. Undefined
// inputs are passed through as they are. Without grad mode, or when nothing needs a gradient, it
// is a plain call of fn.
Tensor recompute(const std::function<Tensor(const std::vector<Tensor>&)>& fn, const std::vector<Tensor>& inputs,
                 const std::vector<Tensor>& params, Generator& generator);

}  // namespace define
