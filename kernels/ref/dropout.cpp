// Reference dropout: the contract of kernels/dropout.h written out literally, one Philox call
// (a full 10-round block) per element.
#include "kernels/ref/dropout.h"

#include "core/philox.h"
#include "kernels/dropout.h"

namespace define::kernels::ref {

void dropout_apply(const Tensor& x, const Tensor& y, double p, std::uint64_t seed, std::uint64_t offset) {
  DEFINE_DISPATCH_FLOAT(x.dtype(), "dropout", [&] {
    const scalar_t* xp = x.data<scalar_t>();
    scalar_t* yp = y.data<scalar_t>();
    const scalar_t scale = dropout_scale<scalar_t>(p);
    for (std::int64_t i = 0; i < x.numel(); ++i) {
      const std::uint32_t word = philox::random_u32(seed, offset, static_cast<std::uint64_t>(i));
      const bool keep = philox::u32_to_unit_float(word) >= p;
      yp[i] = keep ? static_cast<scalar_t>(xp[i] * scale) : scalar_t(0);
    }
  });
}

}  // namespace define::kernels::ref
