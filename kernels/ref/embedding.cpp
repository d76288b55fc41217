// Reference embedding kernels: row copies by index, and a backward that adds every position's
// gradient row into a double buffer in position order.
#include "kernels/ref/embedding.h"

#include <vector>

namespace define::kernels::ref {

void embedding(const Tensor& weight, const Tensor& indices, const Tensor& out) {
  const std::int64_t n = out.shape()[0], width = out.shape()[1];
  const std::int64_t rs = weight.strides()[0], cs = weight.strides()[1];
  DEFINE_DISPATCH_FLOAT(weight.dtype(), "embedding", [&] {
    using T = scalar_t;
    const T* pw = weight.data<T>();
    T* po = out.data<T>();
    DEFINE_DISPATCH_INDEX(indices.dtype(), "embedding", [&] {
      const scalar_t* pi = indices.data<scalar_t>();
      for (std::int64_t p = 0; p < n; ++p)
        for (std::int64_t k = 0; k < width; ++k) po[p * width + k] = pw[static_cast<std::int64_t>(pi[p]) * rs + k * cs];
    });
  });
}

void embedding_backward(const Tensor& grad_out, const Tensor& indices, const Tensor& grad_weight,
                        std::int64_t padding_idx, bool accumulate) {
  const std::int64_t n = grad_out.shape()[0], width = grad_out.shape()[1];
  DEFINE_DISPATCH_FLOAT(grad_out.dtype(), "embedding_backward", [&] {
    using T = scalar_t;
    const T* pg = grad_out.data<T>();
    T* pw = grad_weight.data<T>();
    std::vector<double> acc(static_cast<std::size_t>(grad_weight.numel()), 0.0);
    if (accumulate) acc.assign(pw, pw + grad_weight.numel());
    DEFINE_DISPATCH_INDEX(indices.dtype(), "embedding_backward", [&] {
      const scalar_t* pi = indices.data<scalar_t>();
      for (std::int64_t p = 0; p < n; ++p) {
        const auto v = static_cast<std::int64_t>(pi[p]);
        if (v == padding_idx) continue;  // the padding row never learns
        for (std::int64_t k = 0; k < width; ++k) acc[static_cast<std::size_t>(v * width + k)] += pg[p * width + k];
      }
    });
    for (std::size_t i = 0; i < acc.size(); ++i) pw[i] = static_cast<T>(acc[i]);
  });
}

}  // namespace define::kernels::ref
