// Reference copy kernels: one element at a time through double, in row-major order.
#include "kernels/ref/copy.h"
#include "kernels/strided_loop.h"

namespace define::kernels::ref {
namespace {

template <typename D, typename S, typename Op>
void loop(const Tensor& dst, const Tensor& src, Op op) {
  D* d = static_cast<D*>(dst.raw_data());
  const S* s = static_cast<const S*>(src.raw_data());
  const Strides sb = broadcast_strides(src.shape(), src.strides(), dst.shape());
  strided_loop2(dst.shape(), dst.strides(), sb, [&](std::int64_t od, std::int64_t os) {
    d[od] = static_cast<D>(op(static_cast<double>(d[od]), static_cast<double>(s[os])));
  });
}

}  // namespace

void copy_into(const Tensor& dst, const Tensor& src) {
  DEFINE_DISPATCH_ALL(dst.dtype(), "copy", [&] {
    using D = scalar_t;
    DEFINE_DISPATCH_ALL(src.dtype(), "copy", [&] {
      loop<D, scalar_t>(dst, src, [](double, double s) { return s; });
    });
  });
}

void accumulate_into(const Tensor& dst, const Tensor& src) {
  DEFINE_DISPATCH_ALL(dst.dtype(), "accumulate", [&] {
    loop<scalar_t, scalar_t>(dst, src, [](double d, double s) { return d + s; });
  });
}

void fill(const Tensor& dst, double value) {
  DEFINE_DISPATCH_ALL(dst.dtype(), "fill", [&] {
    auto* d = dst.data<scalar_t>();
    strided_loop2(dst.shape(), dst.strides(), dst.strides(),
                  [&](std::int64_t o, std::int64_t) { d[o] = static_cast<scalar_t>(value); });
  });
}

}  // namespace define::kernels::ref
