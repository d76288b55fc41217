#include "core/factory.h"

#include <cmath>
#include <numbers>

#include "core/philox.h"

namespace define {
namespace {

void check_shape(const Shape& shape, const char* op) {
  for (auto d : shape)
    if (d < 0) fail(op, "negative dimension in shape {}", shape_str(shape));
}

// Fills a new tensor from a host-side generator function f(i) -> double.
template <typename F>
Tensor fill_from_host(const Shape& shape, TensorOptions opt, const char* op, F f) {
  Tensor out = empty(shape, opt);
  const std::int64_t n = out.numel();
  DEFINE_DISPATCH_ALL(opt.dtype, op, [&] {
    std::vector<scalar_t> host(static_cast<std::size_t>(n));
    for (std::int64_t i = 0; i < n; ++i) host[i] = static_cast<scalar_t>(f(i));
    device_interface(opt.device.type)
        .copy_from_host(out.raw_data(), host.data(), host.size() * sizeof(scalar_t), opt.device.index);
  });
  return out;
}

}  // namespace

Tensor empty(const Shape& shape, TensorOptions opt) {
  check_shape(shape, "empty");
  const std::size_t nbytes = static_cast<std::size_t>(numel_of(shape)) * dtype_size(opt.dtype);
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = std::make_shared<Storage>(nbytes, opt.device);
  impl->shape = shape;
  impl->strides = contiguous_strides(shape);
  impl->dtype = opt.dtype;
  return Tensor(std::move(impl));
}

Tensor zeros(const Shape& shape, TensorOptions opt) {
  Tensor t = empty(shape, opt);
  device_interface(opt.device.type).memset_zero(t.raw_data(), t.storage()->nbytes(), opt.device.index);
  return t;
}

Tensor full(const Shape& shape, double value, TensorOptions opt) {
  return fill_from_host(shape, opt, "full", [&](std::int64_t) { return value; });
}

Tensor ones(const Shape& shape, TensorOptions opt) { return full(shape, 1.0, opt); }
Tensor scalar_tensor(double value, TensorOptions opt) { return full({}, value, opt); }

Tensor arange(std::int64_t n, TensorOptions opt) {
  return fill_from_host({n}, opt, "arange", [](std::int64_t i) { return static_cast<double>(i); });
}

Tensor empty_like(const Tensor& t) { return empty(t.shape(), {t.dtype(), t.device()}); }
Tensor zeros_like(const Tensor& t) { return zeros(t.shape(), {t.dtype(), t.device()}); }
Tensor ones_like(const Tensor& t) { return ones(t.shape(), {t.dtype(), t.device()}); }

template <typename T>
Tensor from_vector(const std::vector<T>& values, const Shape& shape, Device device) {
  if (static_cast<std::int64_t>(values.size()) != numel_of(shape))
    fail("from_vector", "{} values do not fill shape {} ({} elements)", values.size(), shape_str(shape),
         numel_of(shape));
  Tensor out = empty(shape, {dtype_of_v<T>, device});
  device_interface(device.type).copy_from_host(out.raw_data(), values.data(), values.size() * sizeof(T), device.index);
  return out;
}
template Tensor from_vector<float>(const std::vector<float>&, const Shape&, Device);
template Tensor from_vector<double>(const std::vector<double>&, const Shape&, Device);
template Tensor from_vector<std::int32_t>(const std::vector<std::int32_t>&, const Shape&, Device);
template Tensor from_vector<std::int64_t>(const std::vector<std::int64_t>&, const Shape&, Device);

Tensor rand_uniform(const Shape& shape, double lo, double hi, TensorOptions opt, Generator& gen) {
  check_shape(shape, "rand_uniform");
  const std::uint64_t n = static_cast<std::uint64_t>(numel_of(shape));
  const GeneratorState st{gen.state().seed, gen.reserve(n)};
  return fill_from_host(shape, opt, "rand_uniform", [&](std::int64_t i) {
    return lo + (hi - lo) * philox::u32_to_unit_double(philox::random_u32(st.seed, st.offset, i));
  });
}

Tensor rand_normal(const Shape& shape, double mean, double stddev, TensorOptions opt, Generator& gen) {
  check_shape(shape, "rand_normal");
  const std::uint64_t n = static_cast<std::uint64_t>(numel_of(shape));
  const std::uint64_t pairs = (n + 1) / 2;
  const GeneratorState st{gen.state().seed, gen.reserve(2 * pairs)};
  return fill_from_host(shape, opt, "rand_normal", [&](std::int64_t i) {
    // Element 2k and 2k+1 are the cosine and sine halves of Box-Muller on words 2k, 2k+1.
    const std::uint64_t k = static_cast<std::uint64_t>(i) / 2;
    const double u1 = 1.0 - philox::u32_to_unit_double(philox::random_u32(st.seed, st.offset, 2 * k));
    const double u2 = philox::u32_to_unit_double(philox::random_u32(st.seed, st.offset, 2 * k + 1));
    const double r = std::sqrt(-2.0 * std::log(u1));
    const double a = 2.0 * std::numbers::pi * u2;
    return mean + stddev * r * ((i & 1) ? std::sin(a) : std::cos(a));
  });
}

Tensor rand_int(const Shape& shape, std::int64_t high, TensorOptions opt, Generator& gen) {
  check_shape(shape, "rand_int");
  if (high <= 0) fail("rand_int", "upper bound must be positive, got {}", high);
  const std::uint64_t n = static_cast<std::uint64_t>(numel_of(shape));
  const GeneratorState st{gen.state().seed, gen.reserve(n)};
  return fill_from_host(shape, opt, "rand_int", [&](std::int64_t i) {
    return static_cast<double>(philox::random_u32(st.seed, st.offset, i) % static_cast<std::uint64_t>(high));
  });
}

Tensor copy_to_device(const Tensor& t, Device device) {
  Tensor out = empty(t.shape(), {t.dtype(), device});
  const std::size_t nbytes = static_cast<std::size_t>(t.numel()) * dtype_size(t.dtype());
  if (nbytes == 0) return out;
  const Device src = t.device();
  if (src.is_cpu() && device.is_cpu()) {
    copy_strided_host(out.raw_data(), t.raw_data(), t.shape(), t.strides(), dtype_size(t.dtype()));
  } else {
    if (!t.is_contiguous())
      fail("copy_to_device", "non-contiguous {} tensor {} must be made contiguous first", src.str(),
           shape_str(t.shape()));
    if (src.is_cpu())
      device_interface(device.type).copy_from_host(out.raw_data(), t.raw_data(), nbytes, device.index);
    else if (device.is_cpu())
      device_interface(src.type).copy_to_host(out.raw_data(), t.raw_data(), nbytes, src.index);
    else if (src.type == device.type)
      device_interface(device.type).copy_device(out.raw_data(), device.index, t.raw_data(), src.index, nbytes);
    else  // e.g. a GPU and the emulated device: through the host
      out = copy_to_device(copy_to_device(t, Device::cpu()), device);
  }
  return out;
}

}  // namespace define
