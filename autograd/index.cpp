#include "autograd/index.h"

#include <algorithm>

#include "autograd/autocast.h"
#include "autograd/function.h"
#include "core/factory.h"
#include "kernels/copy.h"
#include "kernels/index.h"

namespace define {
namespace {

// The slab of t that starts at `start` along dim and has the given shape, as a view.
Tensor slab(const Tensor& t, const Shape& shape, int dim, std::int64_t start) {
  return t.as_strided(shape, t.strides(), t.offset() + start * t.strides()[dim]);
}

int checked_dim(const char* op, const Tensor& x, std::int64_t dim) {
  if (!x.defined()) fail(op, "got an undefined tensor");
  if (x.dim() == 0) fail(op, "expected a tensor with at least 1 dim, got a 0-d tensor");
  return normalize_dim(dim, x.dim(), op);
}

void check_defined(const char* op, std::initializer_list<Tensor> ts) {
  for (const Tensor& t : ts)
    if (!t.defined()) fail(op, "got an undefined tensor");
}

}  // namespace

Tensor concat(const std::vector<Tensor>& ts_in, std::int64_t dim) {
  const char* op = "concat";
  const std::vector<Tensor> ts = autocast::promote_all(ts_in);  // one float dtype (autograd/autocast.h)
  Tensor y = kernels::concat(ts, dim, op);  // checks count, dtypes, devices and shapes
  if (needs_grad(ts)) {
    const int d = normalize_dim(dim, ts[0].dim(), op);
    std::vector<Shape> shapes;
    for (const Tensor& t : ts) shapes.push_back(t.shape());
    record(op, ts, {y}, [d, shapes](const BackwardArgs& a) {
      // Each input's gradient is its own slab of dL/dy along dim (a view, no copy).
      std::vector<Tensor> grads(shapes.size());
      std::int64_t start = 0;
      for (std::size_t i = 0; i < shapes.size(); ++i) {
        if (a.needs(i)) grads[i] = slab(a.grad(), shapes[i], d, start);
        start += shapes[i][d];
      }
      return grads;
    });
  }
  return y;
}

Tensor stack(const std::vector<Tensor>& ts, std::int64_t dim) {
  const char* op = "stack";
  if (ts.empty()) fail(op, "expected at least one tensor");
  for (const Tensor& t : ts) check_defined(op, {t});
  const Shape shape = ts[0].shape();
  for (const Tensor& t : ts)
    if (t.shape() != shape) fail(op, "shapes {} and {} differ (stack needs equal shapes)", shape_str(shape), shape_str(t.shape()));
  const int d = normalize_dim(dim, ts[0].dim() + 1, op);
  // Each input viewed with a new size-1 dim at d, then joined along it.
  std::vector<Tensor> lifted;
  for (const Tensor& t : ts) {
    Shape sh = t.shape();
    Strides st = t.strides();
    sh.insert(sh.begin() + d, 1);
    st.insert(st.begin() + d, 1);  // any stride does for a size-1 dim
    lifted.push_back(t.as_strided(sh, st, t.offset()));
  }
  Tensor y = kernels::concat(lifted, d, op);  // checks dtypes and devices
  if (needs_grad(ts)) {
    record(op, ts, {y}, [d, shape, n = ts.size()](const BackwardArgs& a) {
      // Input i's gradient is dL/dy at position i along the new dim (a view, no copy).
      const Tensor& g = a.grad();
      Strides st = g.strides();
      st.erase(st.begin() + d);
      std::vector<Tensor> grads(n);
      for (std::size_t i = 0; i < n; ++i)
        if (a.needs(i)) grads[i] = g.as_strided(shape, st, g.offset() + static_cast<std::int64_t>(i) * g.strides()[d]);
      return grads;
    });
  }
  return y;
}

std::vector<Tensor> split(const Tensor& x, const std::vector<std::int64_t>& sizes, std::int64_t dim) {
  const char* op = "split";
  const int d = checked_dim(op, x, dim);
  std::int64_t total = 0;
  for (std::int64_t s : sizes) {
    if (s < 0) fail(op, "negative size {} in {}", s, shape_str(sizes));
    total += s;
  }
  if (total != x.shape()[d])
    fail(op, "sizes {} sum to {} but dim {} of {} has size {}", shape_str(sizes), total, d, shape_str(x.shape()),
         x.shape()[d]);
  std::vector<Tensor> parts;
  std::int64_t start = 0;
  for (std::int64_t s : sizes) {
    Shape sh = x.shape();
    sh[d] = s;
    parts.push_back(slab(x, sh, d, start));
    start += s;
  }
  if (needs_grad({x}) && !parts.empty()) {
    // One node for all pieces: dL/dx is the pieces' gradients joined along dim (the engine
    // hands zeros for pieces that received none).
    record(op, {x}, parts, [d](const BackwardArgs& a) {
      return std::vector<Tensor>{kernels::concat(a.grad_outputs, d, "split")};
    });
  }
  return parts;
}

std::vector<Tensor> chunk(const Tensor& x, std::int64_t chunks, std::int64_t dim) {
  const char* op = "chunk";
  if (chunks <= 0) fail(op, "chunks must be positive, got {}", chunks);
  const int d = checked_dim(op, x, dim);
  const std::int64_t n = x.shape()[d];
  if (n == 0) return split(x, std::vector<std::int64_t>(static_cast<std::size_t>(chunks), 0), d);
  const std::int64_t piece = (n + chunks - 1) / chunks;
  std::vector<std::int64_t> sizes;
  for (std::int64_t s = 0; s < n; s += piece) sizes.push_back(std::min(piece, n - s));
  return split(x, sizes, d);
}

Tensor gather(const Tensor& x, std::int64_t dim, const Tensor& index) {
  const char* op = "gather";
  check_defined(op, {x, index});
  Tensor y = kernels::gather(x, dim, index);  // checks dims, shapes and every index
  if (needs_grad({x})) {
    const int d = normalize_dim(dim, x.dim(), op);
    record(op, {x}, {y},
           [op, d, shape = x.shape(), dt = x.dtype(), dev = x.device(), keep = SavedTensor(index)](const BackwardArgs& a) {
             // dL/dx: dL/dy added back where each element was read from (repeats add up).
             // index: not differentiable (not an input of this node).
             return std::vector<Tensor>{kernels::scatter_add(zeros(shape, {dt, dev}), d, keep.get(op), a.grad())};
           });
  }
  return y;
}

Tensor index_select(const Tensor& x, std::int64_t dim, const Tensor& index) {
  const char* op = "index_select";
  check_defined(op, {x, index});
  Tensor y = kernels::index_select(x, dim, index);
  if (needs_grad({x})) {
    const int d = normalize_dim(dim, x.dim(), op);
    record(op, {x}, {y},
           [op, d, shape = x.shape(), dt = x.dtype(), dev = x.device(), keep = SavedTensor(index)](const BackwardArgs& a) {
             // dL/dx: slice j of dL/dy added into slice index[j] of x (repeats add up).
             // index: not differentiable (not an input of this node).
             return std::vector<Tensor>{kernels::index_add(zeros(shape, {dt, dev}), d, keep.get(op), a.grad())};
           });
  }
  return y;
}

Tensor scatter_add(const Tensor& x, std::int64_t dim, const Tensor& index, const Tensor& src) {
  const char* op = "scatter_add";
  check_defined(op, {x, index, src});
  Tensor y = kernels::scatter_add(x, dim, index, src);
  if (needs_grad({x, src})) {
    const int d = normalize_dim(dim, x.dim(), op);
    record(op, {x, src}, {y}, [op, d, src_shape = src.shape(), keep = SavedTensor(index)](const BackwardArgs& a) {
      // dL/dx = dL/dy: x passes through unchanged.
      // dL/dsrc[p] = dL/dy[p with p[dim] = index[p]]: a gather, zero where src was not used
      // (src may be larger than index). index: not differentiable (not an input of this node).
      Tensor gx = a.needs(0) ? a.grad() : Tensor();
      Tensor gsrc;
      if (a.needs(1)) {
        Tensor picked = kernels::gather(a.grad(), d, keep.get(op));
        if (picked.shape() == src_shape) {
          gsrc = picked;
        } else {
          gsrc = zeros(src_shape, {picked.dtype(), picked.device()});
          kernels::copy_into(gsrc.as_strided(picked.shape(), gsrc.strides(), 0), picked);
        }
      }
      return std::vector<Tensor>{gx, gsrc};
    });
  }
  return y;
}

}  // namespace define
