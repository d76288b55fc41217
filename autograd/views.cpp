#include "autograd/views.h"

#include <algorithm>
#include <numeric>

#include "autograd/function.h"
#include "autograd/reduce.h"
#include "core/factory.h"
#include "kernels/copy.h"

namespace define {
namespace {

// Records `y` as a view-like function of `x` whose backward is `back(grad)`.
template <typename Back>
Tensor record_unary(const char* name, const Tensor& x, Tensor y, Back back) {
  if (needs_grad({x})) {
    record(name, {x}, {y}, [back](const BackwardArgs& a) { return std::vector<Tensor>{back(a.grad())}; });
  }
  return y;
}

Tensor raw_view(const Tensor& x, const Shape& target, const char* op, bool allow_copy) {
  const Shape shape = infer_reshape(x.shape(), target, op);
  Strides st;
  if (compute_view_strides(x.shape(), x.strides(), shape, st)) return x.as_strided(shape, st, x.offset());
  if (!allow_copy)
    fail(op, "a tensor of shape {} with strides {} cannot be viewed as {}; use reshape (which copies)",
         shape_str(x.shape()), shape_str(x.strides()), shape_str(shape));
  Tensor c = kernels::contiguous(x);
  return c.as_strided(shape, contiguous_strides(shape), c.offset());
}

}  // namespace

void check_inplace_allowed(const char* op, const Tensor& t) {
  if (GradMode::enabled() && t.requires_grad())
    fail(op, "in-place operation on a tensor that requires grad; wrap it in NoGradGuard (as optimizers "
             "do) or use the out-of-place op");
}

Tensor reshape(const Tensor& x, const Shape& shape) {
  const Shape in = x.shape();
  return record_unary("reshape", x, raw_view(x, shape, "reshape", true),
                      [in](const Tensor& g) { return reshape(g, in); });
}

Tensor view(const Tensor& x, const Shape& shape) {
  const Shape in = x.shape();
  return record_unary("view", x, raw_view(x, shape, "view", false),
                      [in](const Tensor& g) { return reshape(g, in); });
}

Tensor flatten(const Tensor& x, std::int64_t start_dim, std::int64_t end_dim) {
  if (x.dim() == 0) return reshape(x, {1});
  const int s = normalize_dim(start_dim, x.dim(), "flatten"), e = normalize_dim(end_dim, x.dim(), "flatten");
  if (s > e) fail("flatten", "start_dim {} comes after end_dim {}", start_dim, end_dim);
  Shape out(x.shape().begin(), x.shape().begin() + s);
  std::int64_t mid = 1;
  for (int i = s; i <= e; ++i) mid *= x.shape()[i];
  out.push_back(mid);
  out.insert(out.end(), x.shape().begin() + e + 1, x.shape().end());
  return reshape(x, out);
}

Tensor transpose(const Tensor& x, std::int64_t dim0, std::int64_t dim1) {
  const int a = normalize_dim(dim0, x.dim(), "transpose"), b = normalize_dim(dim1, x.dim(), "transpose");
  Shape sh = x.shape();
  Strides st = x.strides();
  std::swap(sh[a], sh[b]);
  std::swap(st[a], st[b]);
  return record_unary("transpose", x, x.as_strided(sh, st, x.offset()),
                      [a, b](const Tensor& g) { return transpose(g, a, b); });
}

Tensor permute(const Tensor& x, const std::vector<std::int64_t>& dims) {
  const std::int64_t n = x.dim();
  if (static_cast<std::int64_t>(dims.size()) != n)
    fail("permute", "got {} dims for a {}-d tensor", dims.size(), n);
  std::vector<std::int64_t> inverse(n, -1);
  Shape sh(n);
  Strides st(n);
  for (std::int64_t i = 0; i < n; ++i) {
    const int d = normalize_dim(dims[i], n, "permute");
    if (inverse[d] != -1) fail("permute", "dim {} appears twice in the permutation", d);
    inverse[d] = i;
    sh[i] = x.shape()[d];
    st[i] = x.strides()[d];
  }
  return record_unary("permute", x, x.as_strided(sh, st, x.offset()),
                      [inverse](const Tensor& g) { return permute(g, inverse); });
}

Tensor narrow(const Tensor& x, std::int64_t dim, std::int64_t start, std::int64_t length) {
  const int d = normalize_dim(dim, x.dim(), "narrow");
  const std::int64_t size = x.shape()[d];
  if (start < 0) start += size;
  if (start < 0 || length < 0 || start + length > size)
    fail("narrow", "range [{}, {}) is outside dim {} of size {}", start, start + length, d, size);
  Shape sh = x.shape();
  sh[d] = length;
  Tensor y = x.as_strided(sh, x.strides(), x.offset() + start * x.strides()[d]);
  const Shape in = x.shape();
  const DType dt = x.dtype();
  const Device dev = x.device();
  return record_unary("narrow", x, y, [=](const Tensor& g) {
    Tensor gx = zeros(in, {dt, dev});
    Tensor part = gx.as_strided(sh, gx.strides(), start * gx.strides()[d]);
    kernels::copy_into(part, g);
    return gx;
  });
}

Tensor select(const Tensor& x, std::int64_t dim, std::int64_t index) {
  const int d = normalize_dim(dim, x.dim(), "select");
  const std::int64_t size = x.shape()[d];
  if (index < -size || index >= size) fail("select", "index {} out of range for dim {} of size {}", index, d, size);
  if (index < 0) index += size;
  return squeeze(narrow(x, d, index, 1), d);
}

Tensor expand(const Tensor& x, const Shape& shape) {
  if (shape.size() < x.shape().size())
    fail("expand", "target {} has fewer dims than the tensor {}", shape_str(shape), shape_str(x.shape()));
  const std::size_t lead = shape.size() - x.shape().size();
  Shape sh(shape.size());
  Strides st(shape.size(), 0);
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (i < lead) {
      if (shape[i] < 0) fail("expand", "-1 is not allowed for a new leading dim in {}", shape_str(shape));
      sh[i] = shape[i];
      continue;
    }
    const std::int64_t have = x.shape()[i - lead];
    const std::int64_t want = shape[i] == -1 ? have : shape[i];
    if (have != want && have != 1)
      fail("expand", "cannot expand {} to {}: dim {} has size {}", shape_str(x.shape()), shape_str(shape), i, have);
    sh[i] = want;
    st[i] = have == want ? x.strides()[i - lead] : 0;
  }
  const Shape in = x.shape();
  return record_unary("expand", x, x.as_strided(sh, st, x.offset()),
                      [in](const Tensor& g) { return sum_to(g, in); });
}

Tensor squeeze(const Tensor& x) {
  Shape sh;
  for (auto d : x.shape())
    if (d != 1) sh.push_back(d);
  return reshape(x, sh);
}

Tensor squeeze(const Tensor& x, std::int64_t dim) {
  const int d = normalize_dim(dim, x.dim(), "squeeze");
  if (x.shape()[d] != 1) return x;
  Shape sh = x.shape();
  sh.erase(sh.begin() + d);
  return reshape(x, sh);
}

Tensor unsqueeze(const Tensor& x, std::int64_t dim) {
  const int d = normalize_dim(dim, x.dim() + 1, "unsqueeze");
  Shape sh = x.shape();
  sh.insert(sh.begin() + d, 1);
  return reshape(x, sh);
}

Tensor contiguous(const Tensor& x) {
  if (x.is_contiguous()) return x;
  return clone(x);
}

Tensor clone(const Tensor& x) {
  return record_unary("clone", x, kernels::cast(x, x.dtype()), [](const Tensor& g) { return g; });
}

Tensor to_device(const Tensor& x, Device device) {
  if (x.device() == device) return x;
  const Device from = x.device();
  Tensor src = x.device().is_cpu() ? x : kernels::contiguous(x);
  Tensor y = copy_to_device(src, device);
  return record_unary("to_device", x, y, [from](const Tensor& g) { return to_device(g, from); });
}

Tensor to_dtype(const Tensor& x, DType dtype) {
  if (x.dtype() == dtype) return x;
  const DType from = x.dtype();
  Tensor y = kernels::cast(x, dtype);
  if (!is_floating(dtype) || !is_floating(from)) return y;  // integer casts are not differentiable
  return record_unary("to_dtype", x, y, [from](const Tensor& g) { return to_dtype(g, from); });
}

void copy_(const Tensor& dst, const Tensor& src) {
  check_inplace_allowed("copy_", dst);
  kernels::copy_into(dst, src);
  dst.bump_version();
}

}  // namespace define
