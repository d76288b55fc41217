#include "kernels/index.h"

#include "core/factory.h"
#include "kernels/backend.h"
#include "kernels/copy.h"
#include "kernels/cpu/index.h"
#include "kernels/ref/index.h"

namespace define::kernels {
namespace {

template <typename I>
void scan_indices(const I* p, std::int64_t n, std::int64_t limit, const char* op, const std::string& what) {
  // A branch-free pass first (vectorises); the offender is looked up only on failure.
  bool bad = false;
  for (std::int64_t i = 0; i < n; ++i) bad |= (p[i] < 0) | (static_cast<std::int64_t>(p[i]) >= limit);
  if (!bad) return;
  for (std::int64_t i = 0; i < n; ++i)
    if (p[i] < 0 || static_cast<std::int64_t>(p[i]) >= limit) fail(op, "index {} out of range for {}", p[i], what);
}

int checked_dim(const char* op, const Tensor& x, std::int64_t dim) {
  if (x.dim() == 0) fail(op, "expected a tensor with at least 1 dim, got a 0-d tensor");
  return normalize_dim(dim, x.dim(), op);
}

// index.size(d) <= other.size(d) for every d (except skip_dim when >= 0).
void check_index_fits(const char* op, const Tensor& index, const Tensor& other, const char* other_name,
                      int skip_dim) {
  for (int d = 0; d < index.dim(); ++d) {
    if (d == skip_dim || index.shape()[d] <= other.shape()[d]) continue;
    if (skip_dim >= 0)
      fail(op, "index shape {} exceeds {} shape {} outside dim {}", shape_str(index.shape()), other_name,
           shape_str(other.shape()), skip_dim);
    fail(op, "index shape {} exceeds {} shape {}", shape_str(index.shape()), other_name, shape_str(other.shape()));
  }
}

std::string dim_what(const Tensor& x, int d) { return fmt::format("dim {} of size {}", d, x.shape()[d]); }

void check_index_select_args(const char* op, const Tensor& x, int d, const Tensor& index) {
  check_same_device(op, {x, index});
  check_index(op, index);
  if (index.dim() != 1) fail(op, "index must be 1-d, got {}", shape_str(index.shape()));
  check_index_range(op, index, x.shape()[d], dim_what(x, d));
}

}  // namespace

void check_index_range(const char* op, const Tensor& index, std::int64_t limit, const std::string& what) {
  check_index(op, index);
  // Device indices are checked by the kernels that read them (kernels/cuda/index_error.h): reading
  // them here would block the host on the device at every call.
  if (index.numel() == 0 || !index.device().is_cpu()) return;
  const Tensor c = contiguous(index);
  DEFINE_DISPATCH_INDEX(c.dtype(), op, [&] { scan_indices(c.data<scalar_t>(), c.numel(), limit, op, what); });
}

Tensor gather(const Tensor& x, std::int64_t dim, const Tensor& index) {
  const char* op = "gather";
  const int d = checked_dim(op, x, dim);
  check_same_device(op, {x, index});
  check_index(op, index);
  if (index.dim() != x.dim())
    fail(op, "index {} and x {} must have the same number of dims", shape_str(index.shape()), shape_str(x.shape()));
  check_index_fits(op, index, x, "x", d);
  check_index_range(op, index, x.shape()[d], dim_what(x, d));
  Tensor out = empty(index.shape(), {x.dtype(), x.device()});
  if (out.numel() == 0) return out;
  DEFINE_BACKEND_CALL(op, x, gather, x, index, out, d);
  return out;
}

Tensor scatter_add(const Tensor& x, std::int64_t dim, const Tensor& index, const Tensor& src) {
  const char* op = "scatter_add";
  const int d = checked_dim(op, x, dim);
  check_same_device(op, {x, index, src});
  check_same_dtype(op, {x, src});
  check_index(op, index);
  if (index.dim() != x.dim() || src.dim() != x.dim())
    fail(op, "x {}, index {} and src {} must have the same number of dims", shape_str(x.shape()),
         shape_str(index.shape()), shape_str(src.shape()));
  check_index_fits(op, index, src, "src", -1);
  check_index_fits(op, index, x, "x", d);
  check_index_range(op, index, x.shape()[d], dim_what(x, d));
  Tensor out = cast(x, x.dtype());  // fresh contiguous copy that src is added into
  if (index.numel() == 0) return out;
  DEFINE_BACKEND_CALL(op, x, scatter_add, index, src, out, d);
  return out;
}

Tensor index_select(const Tensor& x, std::int64_t dim, const Tensor& index) {
  const char* op = "index_select";
  const int d = checked_dim(op, x, dim);
  check_index_select_args(op, x, d, index);
  Shape shape = x.shape();
  shape[d] = index.numel();
  Tensor out = empty(shape, {x.dtype(), x.device()});
  if (out.numel() == 0) return out;
  DEFINE_BACKEND_CALL(op, x, index_select, x, index, out, d);
  return out;
}

Tensor index_add(const Tensor& x, std::int64_t dim, const Tensor& index, const Tensor& src) {
  const char* op = "index_add";
  const int d = checked_dim(op, x, dim);
  check_index_select_args(op, x, d, index);
  check_same_device(op, {x, src});
  check_same_dtype(op, {x, src});
  Shape expected = x.shape();
  expected[d] = index.numel();
  if (src.shape() != expected)
    fail(op, "src shape {} does not match {} (x {} with {} indices along dim {})", shape_str(src.shape()),
         shape_str(expected), shape_str(x.shape()), index.numel(), d);
  Tensor out = cast(x, x.dtype());
  if (src.numel() == 0) return out;
  DEFINE_BACKEND_CALL(op, x, index_add, index, src, out, d);
  return out;
}

Tensor concat(const std::vector<Tensor>& ts, std::int64_t dim, const char* op) {
  if (ts.empty()) fail(op, "expected at least one tensor");
  for (const Tensor& t : ts)
    if (!t.defined()) fail(op, "got an undefined tensor");
  const Tensor& first = ts[0];
  const int d = checked_dim(op, first, dim);
  std::int64_t total = 0;
  for (const Tensor& t : ts) {
    check_same_device(op, {first, t});
    check_same_dtype(op, {first, t});
    bool same = t.dim() == first.dim();
    for (int i = 0; same && i < t.dim(); ++i) same = i == d || t.shape()[i] == first.shape()[i];
    if (!same)
      fail(op, "shapes {} and {} differ outside dim {}", shape_str(first.shape()), shape_str(t.shape()), d);
    total += t.shape()[d];
  }
  Shape shape = first.shape();
  shape[d] = total;
  Tensor out = empty(shape, {first.dtype(), first.device()});
  // Each input lands in its slab of out; the copy kernels do the (strided) work on any device.
  std::int64_t start = 0;
  for (const Tensor& t : ts) {
    if (t.numel() > 0) copy_into(out.as_strided(t.shape(), out.strides(), start * out.strides()[d]), t);
    start += t.shape()[d];
  }
  return out;
}

}  // namespace define::kernels
