// backward(): runs the recorded graph in reverse and accumulates gradients into leaves' .grad.
#pragma once

#include <vector>

#include "core/tensor.h"

namespace define {

struct BackwardOptions {
  bool retain_graph = false;  // keep closures and saved tensors for another backward
};

// grad_root defaults to ones for a one-element root; a root with more elements needs it given.
void backward(const Tensor& root, const Tensor& grad_root = Tensor(), BackwardOptions opt = {});

// Computes d(outputs)/d(inputs) without touching .grad (used by the gradient checker).
std::vector<Tensor> grad(const Tensor& root, const std::vector<Tensor>& inputs,
                         const Tensor& grad_root = Tensor(), BackwardOptions opt = {});

// Detached alias: same storage, no history, requires_grad false.
Tensor detach(const Tensor& t);

}  // namespace define
