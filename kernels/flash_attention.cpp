// Entry points of the flash-attention family: checks, the canonical padding mask, output allocation,
// the empty cases, 16-bit widening and dispatch. The backends see contiguous tensors of one float
// dtype, B * H * Tq > 0 and Tk > 0, and a padding mask that is undefined or a contiguous int32
// [B, Tk] of 0/1 on the tensors' device (kernels/contracts/flash_attention.inc).
#include "kernels/flash_attention.h"

#include <cmath>
#include <limits>

#include "core/factory.h"
#include "kernels/attention_checks.h"
#include "kernels/backend.h"
#include "kernels/copy.h"
#include "kernels/cpu/flash_attention.h"
#include "kernels/elementwise.h"
#include "kernels/float16_compute.h"
#include "kernels/ref/flash_attention.h"

namespace define::kernels {
using namespace attention_checks;
namespace {

Tensor empty_like_of(const Shape& shape, const Tensor& like) { return empty(shape, {like.dtype(), like.device()}); }

}  // namespace

FlashAttentionOutput flash_attention_forward(const Tensor& q_in, const Tensor& k_in, const Tensor& v_in,
                                             const AttentionMasking& masking, double scale) {
  const char* op = "flash_attention";
  // 16-bit inputs of one dtype go to the GPUs' backend as they are (tensor cores where the device has
  // them); the CPU backends, and mixed dtypes, get an exact upcast, out rounded once, lse float32.
  const bool gpu_float16 = !q_in.device().is_cpu() && q_in.defined() && k_in.defined() && v_in.defined() &&
                           is_float16(q_in.dtype()) && k_in.dtype() == q_in.dtype() && v_in.dtype() == q_in.dtype();
  if (any_float16({q_in, k_in, v_in}) && !gpu_float16) {
    const FlashAttentionOutput r =
        flash_attention_forward(widen(q_in, q_in), widen(k_in, q_in), widen(v_in, q_in), masking, scale);
    return {narrow(r.out, q_in.dtype()), narrow(r.lse, statistics_dtype(q_in.dtype()))};
  }
  check_qkv(op, q_in, k_in, v_in);
  check_scale(op, scale);
  const std::int64_t b = q_in.size(0), h = q_in.size(1), tq = q_in.size(2), tk = k_in.size(2);
  check_masking(op, b, tk, masking);
  const Tensor q = contiguous(q_in), k = contiguous(k_in), v = contiguous(v_in);
  FlashAttentionOutput r{empty_like_of({b, h, tq, v.size(3)}, q),
                         empty({b, h, tq}, {statistics_dtype(q.dtype()), q.device()})};
  if (b * h * tq == 0) return r;
  if (tk == 0) {  // no key at all: every row is fully masked
    fill(r.out, 0.0);
    fill(r.lse, -std::numeric_limits<double>::infinity());
    return r;
  }
  const Tensor pad = canonical_padding(masking.key_padding_mask, q.device());
  DEFINE_BACKEND_CALL(op, q, flash_attention_forward, q, k, v, r.out, r.lse, pad, masking.causal, masking.dropout,
                      masking.seed, masking.offset, scale);
  return r;
}

AttentionGrads flash_attention_backward(const Tensor& grad_out_in, const Tensor& q_in, const Tensor& k_in,
                                        const Tensor& v_in, const Tensor& out_in, const Tensor& lse_in,
                                        const AttentionMasking& masking, double scale, bool need_q, bool need_k,
                                        bool need_v) {
  const char* op = "flash_attention_backward";
  // As the forward: 16-bit tensors of one dtype go to the GPUs' backend as they are.
  const bool gpu_float16 = !q_in.device().is_cpu() && q_in.defined() && is_float16(q_in.dtype()) && [&] {
    for (const Tensor* t : {&grad_out_in, &k_in, &v_in, &out_in})
      if (!t->defined() || t->dtype() != q_in.dtype()) return false;
    return lse_in.defined() && lse_in.dtype() == DType::Float32;
  }();
  if (any_float16({grad_out_in, q_in, k_in, v_in, out_in}) && !gpu_float16) {
    const Tensor& like = q_in;
    const AttentionGrads r =
        flash_attention_backward(widen(grad_out_in, like), widen(q_in, like), widen(k_in, like), widen(v_in, like),
                                 widen(out_in, like), widen(lse_in, like), masking, scale, need_q, need_k, need_v);
    return {narrow(r.grad_q, q_in.dtype()), narrow(r.grad_k, k_in.dtype()), narrow(r.grad_v, v_in.dtype())};
  }
  check_qkv(op, q_in, k_in, v_in);
  check_scale(op, scale);
  const std::int64_t b = q_in.size(0), h = q_in.size(1), tq = q_in.size(2), tk = k_in.size(2), dv = v_in.size(3);
  check_masking(op, b, tk, masking);
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

  AttentionGrads g;
  if (need_q) g.grad_q = empty_like_of(q_in.shape(), q_in);
  if (need_k) g.grad_k = empty_like_of(k_in.shape(), q_in);
  if (need_v) g.grad_v = empty_like_of(v_in.shape(), q_in);
  if (!need_q && !need_k && !need_v) return g;
  if (b * h * tq == 0 || tk == 0) {  // nothing attends to anything: every gradient is zero
    for (const Tensor* t : {&g.grad_q, &g.grad_k, &g.grad_v})
      if (t->defined() && t->numel() > 0) fill(*t, 0.0);
    return g;
  }
  const Tensor q = contiguous(q_in), k = contiguous(k_in), v = contiguous(v_in);
  const Tensor grad_out = contiguous(grad_out_in), out = contiguous(out_in), lse = contiguous(lse_in);
  const Tensor pad = canonical_padding(masking.key_padding_mask, q.device());
  DEFINE_BACKEND_CALL(op, q, flash_attention_backward, grad_out, q, k, v, out, lse, g.grad_q, g.grad_k, g.grad_v, pad,
                      masking.causal, masking.dropout, masking.seed, masking.offset, scale);
  return g;
}

}  // namespace define::kernels
