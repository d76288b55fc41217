// Reference split-mix: the spec's two steps kept apart, per row,
//   1. z = shuffle(y):  z[f] = y[(f mod s) * (q / s) + floor(f / s)]   (z = y when s = 1);
//   2. out = [x^1, z^1, ..., x^g, z^g]                                   (chunks of p/g and q/g).
// Backward runs the two steps in reverse: the chunks of dout go back to dx and dz, then dz is
// scattered through the shuffle into dy. Deliberately a different formulation from the fast paths
// (which gather every element through one combined index map), so it checks them.
#include "kernels/ref/split_mix.h"

#include <vector>

#include "core/dtype.h"

namespace define::kernels::ref {
namespace {

// Element (row, col) of a 2-d tensor with any strides.
template <typename T>
T& at(const Tensor& t, std::int64_t row, std::int64_t col) {
  return t.data<T>()[row * t.strides()[0] + col * t.strides()[1]];
}

// Position in y of element f of the shuffled row z.
std::int64_t shuffle_source(std::int64_t f, std::int64_t q, std::int64_t s) {
  return (f % s) * (q / s) + f / s;
}

template <typename T>
void forward_typed(const Tensor& x, const Tensor& y, const Tensor& out, std::int64_t g, std::int64_t s) {
  const std::int64_t rows = x.shape()[0], p = x.shape()[1], q = y.shape()[1];
  const std::int64_t pc = p / g, qc = q / g;
  std::vector<T> z(static_cast<std::size_t>(q));
  for (std::int64_t t = 0; t < rows; ++t) {
    for (std::int64_t f = 0; f < q; ++f) z[f] = at<T>(y, t, shuffle_source(f, q, s));
    std::int64_t col = 0;
    for (std::int64_t c = 0; c < g; ++c) {
      for (std::int64_t k = 0; k < pc; ++k) at<T>(out, t, col++) = at<T>(x, t, c * pc + k);
      for (std::int64_t k = 0; k < qc; ++k) at<T>(out, t, col++) = z[c * qc + k];
    }
  }
}

template <typename T>
void backward_typed(const Tensor& grad_out, const Tensor& grad_x, const Tensor& grad_y, std::int64_t g,
                    std::int64_t s) {
  const std::int64_t rows = grad_out.shape()[0], p = grad_x.shape()[1], q = grad_y.shape()[1];
  const std::int64_t pc = p / g, qc = q / g;
  std::vector<T> dz(static_cast<std::size_t>(q));
  for (std::int64_t t = 0; t < rows; ++t) {
    std::int64_t col = 0;
    for (std::int64_t c = 0; c < g; ++c) {
      for (std::int64_t k = 0; k < pc; ++k) at<T>(grad_x, t, c * pc + k) = at<T>(grad_out, t, col++);
      for (std::int64_t k = 0; k < qc; ++k) dz[c * qc + k] = at<T>(grad_out, t, col++);
    }
    for (std::int64_t f = 0; f < q; ++f) at<T>(grad_y, t, shuffle_source(f, q, s)) = dz[f];
  }
}

}  // namespace

void split_mix(const Tensor& x, const Tensor& y, const Tensor& out, std::int64_t groups, std::int64_t shuffle_groups) {
  DEFINE_DISPATCH_ALL(x.dtype(), "split_mix", [&] { forward_typed<scalar_t>(x, y, out, groups, shuffle_groups); });
}

void split_mix_backward(const Tensor& grad_out, const Tensor& grad_x, const Tensor& grad_y, std::int64_t groups,
                        std::int64_t shuffle_groups) {
  DEFINE_DISPATCH_ALL(grad_out.dtype(), "split_mix_backward",
                      [&] { backward_typed<scalar_t>(grad_out, grad_x, grad_y, groups, shuffle_groups); });
}

}  // namespace define::kernels::ref
