#include "kernels/elementwise.h"

#include "core/factory.h"
#include "kernels/backend.h"
#include "kernels/copy.h"
#include "kernels/float16_compute.h"
#include "kernels/cpu/elementwise.h"
#include "kernels/ref/elementwise.h"

namespace define::kernels {

const char* op_name(UnaryOp op) {
  switch (op) {
    case UnaryOp::Neg: return "neg";
    case UnaryOp::Exp: return "exp";
    case UnaryOp::Log: return "log";
    case UnaryOp::Sqrt: return "sqrt";
    case UnaryOp::Abs: return "abs";
    case UnaryOp::Tanh: return "tanh";
    case UnaryOp::Sigmoid: return "sigmoid";
    case UnaryOp::Relu: return "relu";
    case UnaryOp::Gelu: return "gelu";
    case UnaryOp::Silu: return "silu";
    case UnaryOp::AddScalar: return "add";
    case UnaryOp::MulScalar: return "mul";
    case UnaryOp::RSubScalar: return "sub";
    case UnaryOp::RDivScalar: return "div";
    case UnaryOp::PowScalar: return "pow";
    case UnaryOp::Clamp: return "clamp";
    case UnaryOp::EqScalar: return "eq";
    case UnaryOp::NeScalar: return "ne";
    case UnaryOp::LtScalar: return "lt";
    case UnaryOp::LeScalar: return "le";
    case UnaryOp::GtScalar: return "gt";
    case UnaryOp::GeScalar: return "ge";
  }
  return "unary";
}

const char* op_name(BinaryOp op) {
  switch (op) {
    case BinaryOp::Add: return "add";
    case BinaryOp::Sub: return "sub";
    case BinaryOp::Mul: return "mul";
    case BinaryOp::Div: return "div";
    case BinaryOp::Maximum: return "maximum";
    case BinaryOp::Minimum: return "minimum";
    case BinaryOp::Pow: return "pow";
    case BinaryOp::AddScaled: return "add_";
    case BinaryOp::Eq: return "eq";
    case BinaryOp::Ne: return "ne";
    case BinaryOp::Lt: return "lt";
    case BinaryOp::Le: return "le";
    case BinaryOp::Gt: return "gt";
    case BinaryOp::Ge: return "ge";
    case BinaryOp::MaxWeight: return "maximum backward";
    case BinaryOp::ReluBackward: return "relu backward";
    case BinaryOp::GeluBackward: return "gelu backward";
    case BinaryOp::SiluBackward: return "silu backward";
    case BinaryOp::SigmoidBackward: return "sigmoid backward";
    case BinaryOp::TanhBackward: return "tanh backward";
    case BinaryOp::SqrtBackward: return "sqrt backward";
    case BinaryOp::AbsBackward: return "abs backward";
    case BinaryOp::ClampBackward: return "clamp backward";
    case BinaryOp::PowScalarBackward: return "pow backward";
  }
  return "binary";
}

bool is_comparison(UnaryOp op) {
  switch (op) {
    case UnaryOp::EqScalar: case UnaryOp::NeScalar: case UnaryOp::LtScalar:
    case UnaryOp::LeScalar: case UnaryOp::GtScalar: case UnaryOp::GeScalar: return true;
    default: return false;
  }
}

bool is_comparison(BinaryOp op) {
  switch (op) {
    case BinaryOp::Eq: case BinaryOp::Ne: case BinaryOp::Lt:
    case BinaryOp::Le: case BinaryOp::Gt: case BinaryOp::Ge: return true;
    default: return false;
  }
}

namespace {

// Integer tensors are accepted by comparisons only; the 16-bit float types by nothing yet.
void check_value_dtype(const char* name, const Tensor& t, bool integers_ok) {
  if (integers_ok && is_integral(t.dtype())) return;
  check_floating(name, t);
}

void check_any_dtype(const char* name, const Tensor& t) {
  if (!is_integral(t.dtype())) check_floating(name, t);
}

// out's shape must be exactly the broadcast of the inputs: in-place ops never resize.
void check_out_shape(const char* name, const Tensor& out, const Shape& want) {
  if (out.shape() != want)
    fail(name, "result of shape {} cannot be written into a tensor of shape {}", shape_str(want),
         shape_str(out.shape()));
}

}  // namespace

void unary_into(UnaryOp op, const Tensor& out, const Tensor& x, double p0, double p1, const char* name) {
  if (!name) name = op_name(op);
  check_same_device(name, {out, x});
  check_same_dtype(name, {out, x});
  check_value_dtype(name, x, is_comparison(op));
  check_out_shape(name, out, x.shape());
  if (out.numel() == 0) return;
  if (any_float16({x}) && backend_for(x) == Backend::Cpu) {  // no 16-bit kernels on the fast CPU path
    copy_into(out, unary(op, widen(x, x), p0, p1, name));
    return;
  }
  DEFINE_BACKEND_CALL(name, x, unary, x, out, op, p0, p1);
}

Tensor unary(UnaryOp op, const Tensor& x, double p0, double p1, const char* name) {
  Tensor out = empty(x.shape(), {x.dtype(), x.device()});
  unary_into(op, out, x, p0, p1, name);
  return out;
}

void binary_into(BinaryOp op, const Tensor& out, const Tensor& a, const Tensor& b, double p0, double p1,
                 const char* name) {
  if (!name) name = op_name(op);
  check_same_device(name, {a, b, out});
  check_same_dtype(name, {a, b});
  check_same_dtype(name, {a, out});
  check_value_dtype(name, a, is_comparison(op));
  check_out_shape(name, out, broadcast_shapes(a.shape(), b.shape(), name));
  if (out.numel() == 0) return;
  if (any_float16({a}) && backend_for(a) == Backend::Cpu) {
    copy_into(out, binary(op, widen(a, a), widen(b, a), p0, p1, name));
    return;
  }
  DEFINE_BACKEND_CALL(name, a, binary, a, b, out, op, p0, p1);
}

Tensor binary(BinaryOp op, const Tensor& a, const Tensor& b, double p0, double p1, const char* name) {
  if (!name) name = op_name(op);
  check_same_device(name, {a, b});
  check_same_dtype(name, {a, b});
  Tensor out = empty(broadcast_shapes(a.shape(), b.shape(), name), {a.dtype(), a.device()});
  binary_into(op, out, a, b, p0, p1, name);
  return out;
}

Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b) {
  check_same_device("where", {cond, a, b});
  check_same_dtype("where", {a, b});
  check_any_dtype("where", cond);
  check_any_dtype("where", a);
  const Shape shape = broadcast_shapes(broadcast_shapes(cond.shape(), a.shape(), "where"), b.shape(), "where");
  Tensor out = empty(shape, {a.dtype(), a.device()});
  if (out.numel() == 0) return out;
  DEFINE_BACKEND_CALL("where", a, where, cond, a, b, out);
  return out;
}

void masked_fill_into(const Tensor& out, const Tensor& x, const Tensor& mask, double value, const char* name) {
  if (!name) name = "masked_fill";
  check_same_device(name, {out, x, mask});
  check_same_dtype(name, {out, x});
  check_any_dtype(name, x);
  check_any_dtype(name, mask);
  bool fits = mask.dim() <= x.dim();
  for (std::int64_t i = 1; fits && i <= mask.dim(); ++i) {
    const std::int64_t m = mask.shape()[mask.dim() - i];
    fits = m == 1 || m == x.shape()[x.dim() - i];
  }
  if (!fits)
    fail(name, "mask of shape {} cannot be broadcast to the tensor's shape {}", shape_str(mask.shape()),
         shape_str(x.shape()));
  check_out_shape(name, out, x.shape());
  if (out.numel() == 0) return;
  DEFINE_BACKEND_CALL(name, x, masked_fill, x, mask, out, value);
}

Tensor masked_fill(const Tensor& x, const Tensor& mask, double value) {
  Tensor out = empty(x.shape(), {x.dtype(), x.device()});
  masked_fill_into(out, x, mask, value);
  return out;
}

}  // namespace define::kernels
