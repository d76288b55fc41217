#include "core/tensor.h"

#include <cstring>
#include <sstream>

#include <fmt/format.h>

namespace define {

std::int64_t Tensor::size(std::int64_t d) const {
  return shape()[normalize_dim(d, dim(), "Tensor::size")];
}

std::int64_t Tensor::stride(std::int64_t d) const {
  return strides()[normalize_dim(d, dim(), "Tensor::stride")];
}

void* Tensor::raw_data() const {
  const TensorImpl& t = checked();
  return static_cast<char*>(t.storage->data()) + t.offset * static_cast<std::int64_t>(dtype_size(t.dtype));
}

bool Tensor::is_exclusive() const {
  if (!impl_ || impl_.use_count() != 1 || impl_->autograd) return false;
  const TensorImpl& t = *impl_;
  return t.storage.use_count() == 1 && t.offset == 0 && is_contiguous() &&
         t.storage->nbytes() == static_cast<std::size_t>(numel()) * dtype_size(t.dtype);
}

bool Tensor::requires_grad() const { return impl_ && impl_->autograd && impl_->autograd->requires_grad; }

Tensor& Tensor::set_requires_grad(bool on) {
  if (on && !is_floating(dtype()))
    fail("requires_grad", "only floating-point tensors can require gradients, got {}", dtype_name(dtype()));
  if (on && !is_leaf())
    fail("requires_grad", "can only be set on leaf tensors; use detach() first");
  autograd_meta().requires_grad = on;
  return *this;
}

bool Tensor::is_leaf() const { return !impl_ || !impl_->autograd || !impl_->autograd->grad_fn; }

Tensor Tensor::grad() const {
  if (!impl_ || !impl_->autograd || !impl_->autograd->grad) return Tensor();
  return Tensor(impl_->autograd->grad);
}

void Tensor::set_grad(const Tensor& g) const {
  if (g.defined() && (g.shape() != shape() || g.dtype() != dtype()))
    fail("set_grad", "gradient {} {} does not match tensor {} {}", shape_str(g.shape()),
         dtype_name(g.dtype()), shape_str(shape()), dtype_name(dtype()));
  autograd_meta().grad = g.impl_ptr();
}

std::shared_ptr<Node> Tensor::grad_fn() const {
  return impl_ && impl_->autograd ? impl_->autograd->grad_fn : nullptr;
}

AutogradMeta& Tensor::autograd_meta() const {
  TensorImpl& t = const_cast<TensorImpl&>(checked());
  if (!t.autograd) t.autograd = std::make_shared<AutogradMeta>();
  return *t.autograd;
}

Tensor Tensor::as_strided(const Shape& sh, const Strides& st, std::int64_t off) const {
  const TensorImpl& t = checked();
  if (sh.size() != st.size())
    fail("as_strided", "shape {} and strides {} have different ranks", shape_str(sh), shape_str(st));
  // Bounds check: the furthest element reached must lie inside the storage.
  if (numel_of(sh) > 0) {
    std::int64_t lo = off, hi = off;
    for (std::size_t i = 0; i < sh.size(); ++i) {
      if (sh[i] < 0) fail("as_strided", "negative size in {}", shape_str(sh));
      const std::int64_t span = (sh[i] - 1) * st[i];
      (span < 0 ? lo : hi) += span;
    }
    const std::int64_t cap = static_cast<std::int64_t>(t.storage->nbytes() / dtype_size(t.dtype));
    if (lo < 0 || hi >= cap)
      fail("as_strided", "view {} with strides {} at offset {} exceeds storage of {} elements",
           shape_str(sh), shape_str(st), off, cap);
  }
  auto impl = std::make_shared<TensorImpl>();
  impl->storage = t.storage;
  impl->shape = sh;
  impl->strides = st;
  impl->offset = off;
  impl->dtype = t.dtype;
  return Tensor(std::move(impl));
}

void copy_strided_host(void* dst, const void* src, const Shape& shape, const Strides& st,
                       std::size_t es) {
  const std::int64_t n = numel_of(shape);
  if (n == 0) return;
  if (is_contiguous(shape, st)) {
    std::memcpy(dst, src, static_cast<std::size_t>(n) * es);
    return;
  }
  const int nd = static_cast<int>(shape.size());
  std::vector<std::int64_t> idx(nd, 0);
  char* d = static_cast<char*>(dst);
  const char* s = static_cast<const char*>(src);
  std::int64_t src_off = 0;
  for (std::int64_t i = 0; i < n; ++i) {
    std::memcpy(d + i * es, s + src_off * static_cast<std::int64_t>(es), es);
    for (int k = nd - 1; k >= 0; --k) {  // odometer increment
      src_off += st[k];
      if (++idx[k] < shape[k]) break;
      src_off -= st[k] * shape[k];
      idx[k] = 0;
    }
  }
}

template <typename T>
std::vector<T> Tensor::to_vector() const {
  if (dtype_of_v<T> != dtype())
    fail("to_vector", "requested {} but the tensor is {}", dtype_name(dtype_of_v<T>), dtype_name(dtype()));
  std::vector<T> out(static_cast<std::size_t>(numel()));
  if (out.empty()) return out;
  if (device().is_cpu()) {
    copy_strided_host(out.data(), raw_data(), shape(), strides(), sizeof(T));
    return out;
  }
  // Device tensor: bring the whole reachable span over, then gather on the host.
  if (!is_contiguous())
    fail("to_vector", "non-contiguous {} tensors must be made contiguous first", device().str());
  device_interface(device().type).copy_to_host(out.data(), raw_data(), out.size() * sizeof(T), device().index);
  return out;
}

template <typename T>
T Tensor::item() const {
  if (numel() != 1) fail("item", "tensor of shape {} has {} elements, expected 1", shape_str(shape()), numel());
  return to_vector<T>()[0];
}

double Tensor::item_double() const {
  double v = 0;
  DEFINE_DISPATCH_ALL(dtype(), "item", [&] { v = static_cast<double>(item<scalar_t>()); });
  return v;
}

template std::vector<float> Tensor::to_vector<float>() const;
template std::vector<double> Tensor::to_vector<double>() const;
template std::vector<std::int32_t> Tensor::to_vector<std::int32_t>() const;
template std::vector<std::int64_t> Tensor::to_vector<std::int64_t>() const;
template float Tensor::item<float>() const;
template double Tensor::item<double>() const;
template std::int32_t Tensor::item<std::int32_t>() const;
template std::int64_t Tensor::item<std::int64_t>() const;
template std::vector<Half> Tensor::to_vector<Half>() const;
template std::vector<BFloat16> Tensor::to_vector<BFloat16>() const;
template Half Tensor::item<Half>() const;
template BFloat16 Tensor::item<BFloat16>() const;

std::string Tensor::str() const {
  if (!defined()) return "Tensor(undefined)";
  std::string s = fmt::format("Tensor({} {} {}", shape_str(shape()), dtype_name(dtype()), device().str());
  if (numel() <= 16 && (device().is_cpu() || is_contiguous())) {
    DEFINE_DISPATCH_ALL(dtype(), "str", [&] {
      if constexpr (is_float16_v<scalar_t>) {
        // The value a 16-bit element holds, printed as the float it widens to exactly.
        std::vector<float> widened;
        for (scalar_t v : to_vector<scalar_t>()) widened.push_back(static_cast<float>(v));
        s += fmt::format(" [{}]", fmt::join(widened, ", "));
      } else {
        s += fmt::format(" [{}]", fmt::join(to_vector<scalar_t>(), ", "));
      }
    });
  }
  return s + ")";
}

}  // namespace define
