#include "autograd/embedding.h"

#include "autograd/function.h"
#include "kernels/embedding.h"

namespace define {

Tensor embedding(const Tensor& weight, const Tensor& indices, std::int64_t padding_idx) {
  const char* op = "embedding";
  if (!weight.defined() || !indices.defined()) fail(op, "got an undefined tensor");
  if (weight.dim() == 2 && padding_idx >= weight.shape()[0])
    fail(op, "padding_idx {} out of range for {} rows", padding_idx, weight.shape()[0]);
  Tensor y = kernels::embedding(weight, indices);  // checks shapes, dtypes and every index
  const std::int64_t rows = weight.shape()[0];
  if (needs_grad({weight})) {
    record(op, {weight}, {y}, [op, rows, padding_idx, keep_idx = SavedTensor(indices)](const BackwardArgs& a) {
      // dL/dweight[v] = sum of dL/dy[p] over the positions p with indices[p] == v (summed in a
      // fixed order by the kernel, so the result is deterministic); row padding_idx stays 0.
      // indices: not differentiable (not an input of this node). When the table already has a
      // dense gradient waiting (tied to an output layer), the rows are added into it in place.
      if (const Tensor& into = a.pending(0); into.defined()) {
        kernels::embedding_backward_into(into, a.grad(), keep_idx.get(op), padding_idx);
        return std::vector<Tensor>{Tensor()};
      }
      return std::vector<Tensor>{kernels::embedding_backward(a.grad(), keep_idx.get(op), rows, padding_idx)};
    });
  }
  return y;
}

}  // namespace define
