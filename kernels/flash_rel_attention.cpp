// Entry points of the fused relative-attention family: checks (shared with the unfused family,
// kernels/rel_attention_common.h), output allocation, the empty cases, 16-bit widening and dispatch.
// The backends see contiguous tensors of one float dtype with B * H * Tq > 0 and write every gradient
// asked for (kernels/contracts/flash_rel_attention.inc).
#include "kernels/flash_rel_attention.h"

#include <initializer_list>

#include "core/factory.h"
#include "kernels/backend.h"
#include "kernels/copy.h"
#include "kernels/cpu/flash_rel_attention.h"
#include "kernels/elementwise.h"
#include "kernels/float16_compute.h"
#include "kernels/reduce.h"
#include "kernels/ref/flash_rel_attention.h"
#include "kernels/rel_attention_common.h"

namespace define::kernels {
using namespace rel_attention_common;
namespace {

Tensor empty_like_of(const Shape& shape, const Tensor& like) { return empty(shape, {like.dtype(), like.device()}); }

}  // namespace

FlashAttentionOutput flash_rel_attention_forward(const Tensor& q_in, const Tensor& k_in, const Tensor& v_in,
                                                 const Tensor& r_in, const Tensor& u_in, const Tensor& w_in,
                                                 const RelAttentionParams& params) {
  const char* op = "flash_rel_attention";
  // Inputs of one 16-bit dtype go to the GPUs' backend as they are (a step of generation reads the
  // 16-bit memory without a widened copy); the CPU backends, and mixed dtypes, get an exact upcast,
  // out rounded once, lse float32.
  const bool gpu_float16 = !q_in.device().is_cpu() && is_float16(q_in.dtype()) && [&] {
    for (const Tensor* t : {&k_in, &v_in, &r_in, &u_in, &w_in})
      if (!t->defined() || t->dtype() != q_in.dtype()) return false;
    return true;
  }();
  if (any_float16({q_in, k_in, v_in, r_in, u_in, w_in}) && !gpu_float16) {
    const Tensor& like = q_in;
    const FlashAttentionOutput o =
        flash_rel_attention_forward(widen(q_in, like), widen(k_in, like), widen(v_in, like), widen(r_in, like),
                                    widen(u_in, like), widen(w_in, like), params);
    return {narrow(o.out, q_in.dtype()), narrow(o.lse, statistics_dtype(q_in.dtype()))};
  }
  check_inputs(op, q_in, k_in, v_in, r_in, u_in, w_in);
  check_params(op, params);
  const std::int64_t b = q_in.size(0), h = q_in.size(1), tq = q_in.size(2);
  FlashAttentionOutput o{empty_like_of({b, h, tq, v_in.size(3)}, q_in),
                         empty({b, h, tq}, {statistics_dtype(q_in.dtype()), q_in.device()})};
  if (b * h * tq == 0) return o;
  const Tensor q = contiguous(q_in), k = contiguous(k_in), v = contiguous(v_in), r = contiguous(r_in),
               u = contiguous(u_in), w = contiguous(w_in);
  DEFINE_BACKEND_CALL(op, q, flash_rel_attention_forward, q, k, v, r, u, w, o.out, o.lse, params.window, params.dropout,
                      params.seed, params.offset, params.scale);
  return o;
}

RelAttentionGrads flash_rel_attention_backward(const Tensor& grad_out_in, const Tensor& q_in, const Tensor& k_in,
                                               const Tensor& v_in, const Tensor& r_in, const Tensor& u_in,
                                               const Tensor& w_in, const Tensor& out_in, const Tensor& lse_in,
                                               const RelAttentionParams& params, const RelAttentionNeeds& needs) {
  const char* op = "flash_rel_attention_backward";
  // As the forward: one 16-bit dtype throughout goes to the GPUs' backend as it is (the tensor-core
  // kernels where the device has them); otherwise an exact upcast, gradients rounded once.
  const bool gpu_float16 = !q_in.device().is_cpu() && is_float16(q_in.dtype()) && [&] {
    for (const Tensor* t : {&grad_out_in, &k_in, &v_in, &r_in, &u_in, &w_in, &out_in})
      if (!t->defined() || t->dtype() != q_in.dtype()) return false;
    return lse_in.defined() && lse_in.dtype() == DType::Float32;
  }();
  if (any_float16({grad_out_in, q_in, k_in, v_in, r_in, u_in, w_in, out_in}) && !gpu_float16) {
    const Tensor& like = q_in;
    const RelAttentionGrads g = flash_rel_attention_backward(
        widen(grad_out_in, like), widen(q_in, like), widen(k_in, like), widen(v_in, like), widen(r_in, like),
        widen(u_in, like), widen(w_in, like), widen(out_in, like), widen(lse_in, like), params, needs);
    return {narrow(g.grad_q, q_in.dtype()), narrow(g.grad_k, k_in.dtype()), narrow(g.grad_v, v_in.dtype()),
            narrow(g.grad_r, r_in.dtype()), narrow(g.grad_u, u_in.dtype()), narrow(g.grad_w, w_in.dtype())};
  }
  check_inputs(op, q_in, k_in, v_in, r_in, u_in, w_in);
  check_params(op, params);
  const std::int64_t b = q_in.size(0), h = q_in.size(1), tq = q_in.size(2), dv = v_in.size(3);
  for (const Tensor* t : {&grad_out_in, &out_in, &lse_in})
    if (!t->defined()) fail(op, "grad_out, out and lse must all be defined tensors");
  if (grad_out_in.shape() != Shape{b, h, tq, dv} || out_in.shape() != Shape{b, h, tq, dv})
    fail(op, "grad_out {} and out {} must be [B, H, Tq, dv] = [{},{},{},{}]", shape_str(grad_out_in.shape()),
         shape_str(out_in.shape()), b, h, tq, dv);
  if (lse_in.shape() != Shape{b, h, tq})
    fail(op, "lse {} must be [B, H, Tq] = [{},{},{}]", shape_str(lse_in.shape()), b, h, tq);
  check_same_device(op, {q_in, grad_out_in, out_in, lse_in});
  check_same_dtype(op, {q_in, grad_out_in, out_in});
  if (lse_in.dtype() != statistics_dtype(q_in.dtype()))
    fail(op, "lse is {}, the forward gives {} for {} inputs", dtype_name(lse_in.dtype()),
         dtype_name(statistics_dtype(q_in.dtype())), dtype_name(q_in.dtype()));

  RelAttentionGrads g;
  if (needs.q) g.grad_q = empty_like_of(q_in.shape(), q_in);
  if (needs.k) g.grad_k = empty_like_of(k_in.shape(), q_in);
  if (needs.v) g.grad_v = empty_like_of(v_in.shape(), q_in);
  if (needs.r) g.grad_r = empty_like_of(r_in.shape(), q_in);
  if (needs.u) g.grad_u = empty_like_of(u_in.shape(), q_in);
  if (needs.w) g.grad_w = empty_like_of(w_in.shape(), q_in);
  const std::initializer_list<const Tensor*> grads{&g.grad_q, &g.grad_k, &g.grad_v, &g.grad_r, &g.grad_u, &g.grad_w};
  if (b * h * tq == 0) {  // no query: every gradient is zero
    for (const Tensor* t : grads)
      if (t->defined() && t->numel() > 0) fill(*t, 0.0);
  } else if (needs.q || needs.k || needs.v || needs.r || needs.u || needs.w) {
    const Tensor q = contiguous(q_in), k = contiguous(k_in), v = contiguous(v_in), r = contiguous(r_in),
                 u = contiguous(u_in), w = contiguous(w_in);
    const Tensor grad_out = contiguous(grad_out_in), out = contiguous(out_in), lse = contiguous(lse_in);
    DEFINE_BACKEND_CALL(op, q, flash_rel_attention_backward, grad_out, q, k, v, r, u, w, out, lse, g.grad_q, g.grad_k,
                        g.grad_v, g.grad_r, g.grad_u, g.grad_w, params.window, params.dropout, params.seed,
                        params.offset, params.scale);
  }
  return g;
}

}  // namespace define::kernels
