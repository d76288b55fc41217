// Entry points of the LSTM family: argument checks, buffer allocation, the GEMMs over all steps
// (input projection; dx, dw_ih, dw_hh; db) through kernels::gemm / column_sum, and the backend
// call for the recurrence in between (all T steps in one call, so a backend can keep state across
// steps: the CPU path packs w_hh once per call). Backends see contiguous buffers: gates
// [T, B, 4H], hs and cs [T+1, B, H], w_hh [4H, H], biases [4H] or undefined, dy [T, B, H].
//
// Mixed precision: on the GPUs a 16-bit layer (x, h0, weights and biases in one 16-bit dtype, as
// autocast gives it) runs natively, its GEMMs in 16 bits with float accumulation and its cell in
// float, with the cell state (cs, c_n, dc) in c0's dtype: float32 under autocast. Anything else
// with a 16-bit tensor in it, and every 16-bit layer on the CPU paths, is widened.
#include "kernels/lstm.h"

#include "core/factory.h"
#include "kernels/backend.h"
#include "kernels/float16_compute.h"
#include "kernels/copy.h"
#include "kernels/cpu/lstm.h"
#include "kernels/matmul.h"
#include "kernels/ref/lstm.h"

namespace define::kernels {
namespace {

constexpr const char* kOp = "lstm_layer";

struct LstmShape {
  std::int64_t T = 0, B = 0, I = 0, H = 0;
};

// Step t of a contiguous [steps, rows, width] buffer as a contiguous [rows, width] view.
Tensor step_of(const Tensor& buffer, std::int64_t t) {
  const std::int64_t rows = buffer.shape()[1], width = buffer.shape()[2];
  return buffer.as_strided({rows, width}, {width, 1}, buffer.offset() + t * rows * width);
}

// Steps [first, first + count) of a contiguous [steps, rows, width] buffer as [count * rows, width].
Tensor steps_as_rows(const Tensor& buffer, std::int64_t first, std::int64_t count) {
  const std::int64_t rows = buffer.shape()[1], width = buffer.shape()[2];
  return buffer.as_strided({count * rows, width}, {width, 1}, buffer.offset() + first * rows * width);
}

// x [T, B, I] as a 2-d [T*B, I] operand for one GEMM over all steps: a view when the two leading
// dims collapse into one row stride (any contiguous or time-sliced input), else a contiguous copy.
Tensor input_rows(const Tensor& x) {
  const std::int64_t T = x.shape()[0], B = x.shape()[1], I = x.shape()[2];
  const Strides& st = x.strides();
  std::int64_t row_stride = 0;
  if (B == 1) row_stride = st[0];
  else if (T == 1 || st[0] == st[1] * B) row_stride = st[1];
  else {
    const Tensor c = contiguous(x);
    return c.as_strided({T * B, I}, {I, 1}, c.offset());
  }
  return x.as_strided({T * B, I}, {row_stride, st[2]}, x.offset());
}

Tensor contiguous_or_none(const Tensor& t) { return t.defined() ? contiguous(t) : t; }

void check_shape(const char* what, const Tensor& t, const Shape& expected, const char* because) {
  if (t.shape() != expected)
    fail(kOp, "{} {} must be {} {}", what, shape_str(t.shape()), shape_str(expected), because);
}

LstmShape check_forward_args(const Tensor& x, const Tensor& h0, const Tensor& c0, const Tensor& w_ih,
                             const Tensor& w_hh, const Tensor& b_ih, const Tensor& b_hh) {
  const char* names[] = {"x", "h0", "c0", "w_ih", "w_hh"};
  const Tensor* required[] = {&x, &h0, &c0, &w_ih, &w_hh};
  for (int k = 0; k < 5; ++k)
    if (!required[k]->defined()) fail(kOp, "{} is an undefined tensor", names[k]);
  check_floating(kOp, x);
  check_same_device(kOp, {x, h0, c0, w_ih, w_hh, b_ih, b_hh});
  check_same_dtype(kOp, {x, h0, w_ih, w_hh, b_ih, b_hh});
  if (!(is_float16(x.dtype()) && c0.dtype() == DType::Float32)) check_same_dtype(kOp, {x, c0});
  if (x.dim() != 3) fail(kOp, "x must be 3-d [T, B, input_size] (time-major), got {}", shape_str(x.shape()));
  if (h0.dim() != 2) fail(kOp, "h0 must be 2-d [B, hidden_size], got {}", shape_str(h0.shape()));
  LstmShape s{x.shape()[0], x.shape()[1], x.shape()[2], h0.shape()[1]};
  if (s.H < 1) fail(kOp, "hidden size must be at least 1, got h0 {}", shape_str(h0.shape()));
  if (h0.shape()[0] != s.B)
    fail(kOp, "h0 {} does not match the batch of x {} (expected [{},{}])", shape_str(h0.shape()),
         shape_str(x.shape()), s.B, s.H);
  check_shape("c0", c0, {s.B, s.H}, "(the shape of h0)");
  check_shape("w_hh", w_hh, {4 * s.H, s.H}, "= [4*H, H] for hidden size H from h0");
  check_shape("w_ih", w_ih, {4 * s.H, s.I}, "= [4*H, input_size] for x and h0");
  if (b_ih.defined()) check_shape("b_ih", b_ih, {4 * s.H}, "= [4*H]");
  if (b_hh.defined()) check_shape("b_hh", b_hh, {4 * s.H}, "= [4*H]");
  return s;
}

// A fresh contiguous copy of t, or zeros of `shape` when t is undefined.
Tensor fresh_copy_or_zeros(const Tensor& t, const Shape& shape, TensorOptions opt) {
  if (!t.defined()) return zeros(shape, opt);
  Tensor out = empty(shape, opt);
  copy_into(out, t);
  return out;
}

}  // namespace

LstmForward lstm_forward(const Tensor& x, const Tensor& h0, const Tensor& c0, const Tensor& w_ih, const Tensor& w_hh,
                         const Tensor& b_ih, const Tensor& b_hh) {
  if (any_float16({x, h0, c0, w_ih, w_hh, b_ih, b_hh}) && !takes_float16(x, {h0, w_ih, w_hh, b_ih, b_hh}, {c0})) {
    // Widened; each result comes back in its input's dtype (y, hs and gates in x's, h_n in h0's,
    // c_n and cs in c0's: a float32 c0 keeps the cell state in float).
    const LstmForward w = lstm_forward(widen(x, x), widen(h0, x), widen(c0, x), widen(w_ih, x), widen(w_hh, x),
                                       widen(b_ih, x), widen(b_hh, x));
    LstmForward f;
    f.hs = narrow(w.hs, x.dtype());
    f.cs = narrow(w.cs, c0.dtype());
    f.gates = narrow(w.gates, x.dtype());
    f.y = f.hs.as_strided(w.y.shape(), w.y.strides(), f.hs.offset() + (w.y.offset() - w.hs.offset()));
    f.h_n = narrow(w.h_n, h0.dtype());
    f.c_n = narrow(w.c_n, c0.dtype());
    return f;
  }
  const LstmShape s = check_forward_args(x, h0, c0, w_ih, w_hh, b_ih, b_hh);
  const TensorOptions opt{x.dtype(), x.device()};
  const TensorOptions state_opt{c0.dtype(), x.device()};
  LstmForward f;
  f.hs = empty({s.T + 1, s.B, s.H}, opt);
  f.cs = empty({s.T + 1, s.B, s.H}, state_opt);
  f.gates = empty({s.T, s.B, 4 * s.H}, opt);
  copy_into(step_of(f.hs, 0), h0);
  copy_into(step_of(f.cs, 0), c0);
  if (s.T > 0 && s.B > 0) {
    // The input projection of every step at once: gates = x w_ih^T (biases come in the cell).
    gemm(input_rows(x), w_ih, steps_as_rows(f.gates, 0, s.T), false, true, 1.0, 0.0);
    DEFINE_BACKEND_CALL(kOp, x, lstm_forward_steps, contiguous(w_hh), contiguous_or_none(b_ih),
                        contiguous_or_none(b_hh), f.hs, f.cs, f.gates);
  }
  f.y = f.hs.as_strided({s.T, s.B, s.H}, {s.B * s.H, s.H, 1}, f.hs.offset() + s.B * s.H);
  f.h_n = fresh_copy_or_zeros(step_of(f.hs, s.T), {s.B, s.H}, opt);
  f.c_n = fresh_copy_or_zeros(step_of(f.cs, s.T), {s.B, s.H}, state_opt);
  return f;
}

LstmGrads lstm_backward(const Tensor& dy, const Tensor& dh_n, const Tensor& dc_n, const Tensor& x, const Tensor& w_ih,
                        const Tensor& w_hh, const LstmForward& f, const LstmNeeds& needs) {
  const char* op = "lstm_layer_backward";
  if (!dy.defined() || !w_hh.defined() || !f.hs.defined() || !f.cs.defined() || !f.gates.defined())
    fail(op, "dy, w_hh and the forward's saved buffers must be defined");
  if (any_float16({dy, dh_n, dc_n, x, w_ih, w_hh, f.hs, f.cs, f.gates}) &&
      !takes_float16(dy, {dh_n, x, w_ih, w_hh, f.hs, f.gates}, {f.cs, dc_n})) {
    const Tensor& like = f.hs;
    LstmForward wf;
    wf.hs = widen(f.hs, like);
    wf.cs = widen(f.cs, like);
    wf.gates = widen(f.gates, like);
    if (f.y.defined())
      wf.y = wf.hs.as_strided(f.y.shape(), f.y.strides(), wf.hs.offset() + (f.y.offset() - f.hs.offset()));
    wf.h_n = widen(f.h_n, like);
    wf.c_n = widen(f.c_n, like);
    const LstmGrads g = lstm_backward(widen(dy, like), widen(dh_n, like), widen(dc_n, like), widen(x, like),
                                      widen(w_ih, like), widen(w_hh, like), wf, needs);
    const DType x_dtype = x.defined() ? x.dtype() : f.hs.dtype();
    const DType w_dtype = w_hh.dtype();
    return {narrow(g.dx, x_dtype),           narrow(g.dh0, f.h_n.defined() ? f.h_n.dtype() : f.hs.dtype()),
            narrow(g.dc0, f.cs.dtype()),     narrow(g.dw_ih, w_ih.defined() ? w_ih.dtype() : w_dtype),
            narrow(g.dw_hh, w_dtype),        narrow(g.dbias, w_dtype)};
  }
  if ((needs.x && !w_ih.defined()) || (needs.w_ih && !x.defined()))
    fail(op, "dx needs w_ih and dw_ih needs x; got an undefined tensor");
  check_same_device(op, {dy, dh_n, dc_n, x, w_ih, w_hh, f.hs});
  check_same_dtype(op, {dy, dh_n, x, w_ih, w_hh, f.hs, f.gates});
  check_same_dtype(op, {f.cs, dc_n});
  if (!(is_float16(dy.dtype()) && f.cs.dtype() == DType::Float32)) check_same_dtype(op, {dy, f.cs});
  const std::int64_t T = f.gates.shape()[0], B = f.gates.shape()[1], H = f.hs.shape()[2];
  if (dy.shape() != Shape{T, B, H})
    fail(op, "dy {} does not match the output [{},{},{}]", shape_str(dy.shape()), T, B, H);
  for (const Tensor* t : {&dh_n, &dc_n})
    if (t->defined() && t->shape() != Shape{B, H})
      fail(op, "state gradient {} does not match [{},{}]", shape_str(t->shape()), B, H);
  if (w_hh.shape() != Shape{4 * H, H}) fail(op, "w_hh {} does not match [{},{}]", shape_str(w_hh.shape()), 4 * H, H);
  const TensorOptions opt{dy.dtype(), dy.device()};

  // dh holds dL/dh_t from the later steps (dh_n at first), dc holds dL/dc_t: both are updated in
  // place step by step and end as dL/dh_0 and dL/dc_0.
  Tensor dh = fresh_copy_or_zeros(dh_n, {B, H}, opt);
  Tensor dc = fresh_copy_or_zeros(dc_n, {B, H}, {f.cs.dtype(), dy.device()});  // in the cell state's dtype
  const Tensor dgates = empty({T, B, 4 * H}, opt);
  if (T > 0 && B > 0)
    DEFINE_BACKEND_CALL(op, dy, lstm_backward_steps, contiguous(dy), contiguous(w_hh), f.hs, f.cs, f.gates, dh, dc,
                        dgates, needs.h0);

  LstmGrads g;
  if (needs.h0) g.dh0 = dh;
  if (needs.c0) g.dc0 = dc;
  // The weight and input gradients, each ONE GEMM over all T*B rows of dgates [T*B, 4H].
  const Tensor dgates_rows = steps_as_rows(dgates, 0, T);
  if (needs.x) {
    const std::int64_t I = w_ih.shape()[1];
    g.dx = empty({T, B, I}, opt);
    gemm(dgates_rows, w_ih, steps_as_rows(g.dx, 0, T), false, false, 1.0, 0.0);
  }
  if (needs.w_ih) {
    g.dw_ih = empty({4 * H, x.shape()[2]}, opt);
    gemm(dgates_rows, input_rows(x), g.dw_ih, true, false, 1.0, 0.0);
  }
  if (needs.w_hh) {  // sum_t dgates_t^T h_{t-1}: hs[0 .. T-1] are the h_{t-1} of all steps
    g.dw_hh = empty({4 * H, H}, opt);
    gemm(dgates_rows, steps_as_rows(f.hs, 0, T), g.dw_hh, true, false, 1.0, 0.0);
  }
  if (needs.bias) g.dbias = column_sum(dgates_rows);
  return g;
}

}  // namespace define::kernels
