#include "kernels/matmul.h"

#include "core/factory.h"
#include "kernels/backend.h"
#include "kernels/copy.h"
#include "kernels/float16_compute.h"
#include "kernels/cpu/matmul.h"
#include "kernels/ref/matmul.h"

namespace define::kernels {
namespace {

Shape batch_dims(const Tensor& t) { return Shape(t.shape().begin(), t.shape().end() - 2); }

// op(t)'s logical [rows, cols].
std::int64_t op_rows(const Tensor& t, bool trans) { return t.shape()[t.dim() - (trans ? 1 : 2)]; }
std::int64_t op_cols(const Tensor& t, bool trans) { return t.shape()[t.dim() - (trans ? 2 : 1)]; }

// Whether `from` broadcasts to exactly `to` (numpy rules, aligned from the right).
bool broadcasts_to(const Shape& from, const Shape& to) {
  if (from.size() > to.size()) return false;
  const std::size_t lead = to.size() - from.size();
  for (std::size_t i = 0; i < from.size(); ++i)
    if (from[i] != 1 && from[i] != to[lead + i]) return false;
  return true;
}

void check_gemm_args(const Tensor& a, const Tensor& b, const Tensor& out, bool trans_a, bool trans_b) {
  const char* op = "gemm";
  check_same_device(op, {a, b, out});
  check_floating(op, a);
  check_same_dtype(op, {a, b, out});
  for (const Tensor* t : {&a, &b, &out})
    if (t->dim() < 2) fail(op, "operands need at least 2 dims, got {}", shape_str(t->shape()));
  const std::int64_t m = op_rows(a, trans_a), k = op_cols(a, trans_a);
  const std::int64_t kb = op_rows(b, trans_b), n = op_cols(b, trans_b);
  if (k != kb || op_rows(out, false) != m || op_cols(out, false) != n)
    fail(op, "op(a) [{},{}] times op(b) [{},{}] does not give out {}", m, k, kb, n, shape_str(out.shape()));
  const Shape out_batch = batch_dims(out);
  for (const Tensor* t : {&a, &b})
    if (!broadcasts_to(batch_dims(*t), out_batch))
      fail(op, "batch dims of {} do not broadcast to out {}", shape_str(t->shape()), shape_str(out.shape()));
}

}  // namespace

BatchedMatrix batched_matrix(const Tensor& t, bool trans, const Shape& batch_shape) {
  const std::int64_t nd = t.dim();
  BatchedMatrix m;
  m.rows = op_rows(t, trans);
  m.cols = op_cols(t, trans);
  m.row_stride = t.strides()[nd - (trans ? 1 : 2)];
  m.col_stride = t.strides()[nd - (trans ? 2 : 1)];
  const Shape own_batch(t.shape().begin(), t.shape().end() - 2);
  const Strides own_strides(t.strides().begin(), t.strides().end() - 2);
  const Strides st = broadcast_strides(own_batch, own_strides, batch_shape);
  const std::int64_t count = numel_of(batch_shape);
  m.batch_offsets.resize(static_cast<std::size_t>(count));
  // Odometer over the batch dims, last dim fastest (row-major batch order).
  std::vector<std::int64_t> idx(batch_shape.size(), 0);
  std::int64_t off = 0;
  for (std::int64_t b = 0; b < count; ++b) {
    m.batch_offsets[static_cast<std::size_t>(b)] = off;
    for (std::size_t d = batch_shape.size(); d-- > 0;) {
      off += st[d];
      if (++idx[d] < batch_shape[d]) break;
      off -= st[d] * batch_shape[d];
      idx[d] = 0;
    }
  }
  return m;
}

void gemm(const Tensor& a, const Tensor& b, const Tensor& out, bool trans_a, bool trans_b, double alpha,
          double beta) {
  check_gemm_args(a, b, out, trans_a, trans_b);
  if (out.numel() == 0) return;
  if (any_float16({out}) && !has_float16_kernels(out)) {
    // The CPU paths have no 16-bit GEMM: widened operands, one rounding of the result. (The GPUs
    // run cublasGemmEx or the tiled kernel on the 16-bit operands directly.)
    const Tensor c = beta == 0.0 ? empty(out.shape(), {float16_compute_dtype(out), out.device()}) : widen(out, out);
    gemm(widen(a, out), widen(b, out), c, trans_a, trans_b, alpha, beta);
    copy_into(out, c);
    return;
  }
  DEFINE_BACKEND_CALL("gemm", out, gemm, a, b, out, trans_a, trans_b, alpha, beta);
}

Tensor matmul(const Tensor& a, const Tensor& b, bool trans_a, bool trans_b) {
  for (const Tensor* t : {&a, &b})
    if (t->dim() < 2) fail("gemm", "operands need at least 2 dims, got {}", shape_str(t->shape()));
  Shape shape = broadcast_shapes(batch_dims(a), batch_dims(b), "gemm");
  shape.push_back(op_rows(a, trans_a));
  shape.push_back(op_cols(b, trans_b));
  Tensor out = empty(shape, {a.dtype(), a.device()});
  gemm(a, b, out, trans_a, trans_b, 1.0, 0.0);
  return out;
}

Tensor column_sum(const Tensor& x) {
  if (any_float16({x}) && !has_float16_kernels(x)) return narrow(column_sum(widen(x, x)), x.dtype());
  check_floating("column_sum", x);
  check_dim("column_sum", x, 2);
  Tensor out = empty({x.shape()[1]}, {x.dtype(), x.device()});
  if (out.numel() == 0) return out;
  DEFINE_BACKEND_CALL("column_sum", x, column_sum, x, out);
  return out;
}

}  // namespace define::kernels
