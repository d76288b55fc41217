// split_mix and channel_shuffle with their backward beside them. Both are permutations, so the
// backward saves no tensor: it needs only the widths and group counts to invert the map.
#include "autograd/split_mix.h"

#include "autograd/autocast.h"
#include "autograd/function.h"
#include "kernels/split_mix.h"

namespace define {

Tensor split_mix(const Tensor& x_in, const Tensor& y_in, std::int64_t groups, std::int64_t shuffle_groups) {
  const auto promoted = autocast::promote(x_in, y_in);  // float16 + float32 -> float32
  const Tensor &x = promoted.first, &y = promoted.second;
  Tensor out = kernels::split_mix(x, y, groups, shuffle_groups);  // checks shapes, groups, dtypes, devices
  if (needs_grad({x, y})) {
    const std::int64_t p = x.shape().back();
    record("split_mix", {x, y}, {out}, [p, groups, shuffle_groups](const BackwardArgs& a) {
      kernels::SplitMixGrads g = kernels::split_mix_backward(a.grad(), p, groups, shuffle_groups);
      return std::vector<Tensor>{a.needs(0) ? g.grad_x : Tensor(), a.needs(1) ? g.grad_y : Tensor()};
    });
  }
  return out;
}

Tensor channel_shuffle(const Tensor& y, std::int64_t shuffle_groups) {
  Tensor out = kernels::channel_shuffle(y, shuffle_groups);
  if (needs_grad({y})) {
    record("channel_shuffle", {y}, {out}, [shuffle_groups](const BackwardArgs& a) {
      return std::vector<Tensor>{kernels::channel_shuffle_backward(a.grad(), shuffle_groups)};
    });
  }
  return out;
}

}  // namespace define
