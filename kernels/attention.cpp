// Entry points of the attention family: checks, the canonical mask, output allocation, the GEMMs
// and dispatch of the fused row kernels. The backends see contiguous [B, H, Tq, Tk] tensors and a
// padding mask that is undefined or a contiguous int32 [B, Tk] of 0/1 on the scores' device.
#include "kernels/attention.h"

#include <cmath>

#include "core/factory.h"
#include "kernels/attention_checks.h"
#include "kernels/backend.h"
#include "kernels/copy.h"
#include "kernels/cpu/attention.h"
#include "kernels/elementwise.h"
#include "kernels/float16_compute.h"
#include "kernels/matmul.h"
#include "kernels/ref/attention.h"

namespace define::kernels {
namespace attention_checks {

void check_dropout(const char* op, double p) {
  if (!(p >= 0.0 && p <= 1.0)) fail(op, "dropout {} is outside [0, 1]", p);
}

void check_masking(const char* op, std::int64_t batch, std::int64_t keys, const AttentionMasking& m) {
  check_dropout(op, m.dropout);
  const Tensor& pad = m.key_padding_mask;
  if (pad.defined() && (pad.dim() != 2 || pad.size(0) != batch || pad.size(1) != keys))
    fail(op, "key_padding_mask {} must be [B, Tk] = [{},{}]", shape_str(pad.shape()), batch, keys);
}

Tensor canonical_padding(const Tensor& pad, Device device) {
  if (!pad.defined()) return pad;
  Tensor m = pad.device() == device ? pad : copy_to_device(pad, device);
  if (m.dtype() != DType::Int32) m = cast(unary(UnaryOp::NeScalar, m, 0.0), DType::Int32);
  return contiguous(m);
}

void check_qkv(const char* op, const Tensor& q, const Tensor& k, const Tensor& v) {
  for (const Tensor* t : {&q, &k, &v})
    if (!t->defined()) fail(op, "q, k and v must all be defined tensors");
  if (q.dim() != 4 || k.dim() != 4 || v.dim() != 4)
    fail(op, "q {}, k {}, v {} must all be 4-d [B, H, T, d]", shape_str(q.shape()), shape_str(k.shape()),
         shape_str(v.shape()));
  const bool batch_ok =
      q.size(0) == k.size(0) && q.size(1) == k.size(1) && k.size(0) == v.size(0) && k.size(1) == v.size(1);
  if (!batch_ok || q.size(3) != k.size(3) || k.size(2) != v.size(2))
    fail(op, "shapes do not match: q {} [B, H, Tq, d], k {} [B, H, Tk, d], v {} [B, H, Tk, dv]", shape_str(q.shape()),
         shape_str(k.shape()), shape_str(v.shape()));
  check_same_device(op, {q, k, v});
  check_floating(op, q);
  check_same_dtype(op, {q, k, v});
}

void check_scale(const char* op, double scale) {
  if (!std::isfinite(scale)) fail(op, "scale {} is not finite", scale);
}

}  // namespace attention_checks

using namespace attention_checks;

namespace {

void check_scores(const char* op, const char* what, const Tensor& t) {
  check_floating(op, t);
  if (t.dim() != 4) fail(op, "{} {} must be 4-d [B, H, Tq, Tk]", what, shape_str(t.shape()));
}

// Runs the forward row kernel on contiguous scores, writing P into `probs` (which may be the
// scores themselves) and D into a fresh tensor when dropout is on. 16-bit scores reach it on the
// GPUs only, whose kernel reads and writes them directly (the CPU paths widen the whole op).
AttentionProbs softmax_rows(const char* op, const Tensor& scores, const Tensor& probs, const AttentionMasking& m) {
  (void)op;  // only the no-GPU build's CUDA arm reads it (to name the op in its error)
  AttentionProbs r{probs, probs};
  if (m.dropout > 0.0) r.dropped = empty(scores.shape(), {scores.dtype(), scores.device()});
  if (scores.numel() == 0) return r;
  const Tensor pad = canonical_padding(m.key_padding_mask, scores.device());
  const Tensor dropped = m.dropout > 0.0 ? r.dropped : Tensor();
  DEFINE_BACKEND_CALL(op, scores, attention_softmax, scores, probs, dropped, pad, m.causal, m.dropout, m.seed,
                      m.offset);
  return r;
}

// Runs the backward row kernel; grad_scores may be grad_dropped itself.
AttentionSoftmaxGrad softmax_rows_backward(const char* op, const Tensor& probs, const Tensor& grad_dropped,
                                           const Tensor& grad_scores, const AttentionMasking& m, double scale) {
  (void)op;  // as above
  AttentionSoftmaxGrad r{grad_scores, probs};
  if (m.dropout > 0.0) r.dropped = empty(probs.shape(), {probs.dtype(), probs.device()});
  if (probs.numel() == 0) return r;
  const Tensor dropped = m.dropout > 0.0 ? r.dropped : Tensor();
  DEFINE_BACKEND_CALL(op, probs, attention_softmax_backward, probs, grad_dropped, grad_scores, dropped, m.causal,
                      m.dropout, m.seed, m.offset, scale);
  return r;
}

}  // namespace

AttentionProbs attention_softmax(const Tensor& scores_in, const AttentionMasking& masking) {
  const char* op = "attention_softmax";
  if (any_float16({scores_in}) && !has_float16_kernels(scores_in)) {
    AttentionProbs r = attention_softmax(widen(scores_in, scores_in), masking);
    return {narrow(r.probs, scores_in.dtype()), narrow(r.dropped, scores_in.dtype())};
  }
  check_scores(op, "scores", scores_in);
  check_masking(op, scores_in.size(0), scores_in.size(3), masking);
  const Tensor scores = contiguous(scores_in);
  return softmax_rows(op, scores, empty(scores.shape(), {scores.dtype(), scores.device()}), masking);
}

AttentionSoftmaxGrad attention_softmax_backward(const Tensor& probs_in, const Tensor& grad_dropped_in,
                                                const AttentionMasking& masking, double scale) {
  const char* op = "attention_softmax_backward";
  if (any_float16({probs_in, grad_dropped_in}) && !has_float16_kernels(probs_in)) {
    AttentionSoftmaxGrad r =
        attention_softmax_backward(widen(probs_in, probs_in), widen(grad_dropped_in, probs_in), masking, scale);
    return {narrow(r.grad_scores, probs_in.dtype()), narrow(r.dropped, probs_in.dtype())};
  }
  check_scores(op, "probs", probs_in);
  check_dropout(op, masking.dropout);
  check_scale(op, scale);
  if (grad_dropped_in.shape() != probs_in.shape())
    fail(op, "grad {} does not match probs {}", shape_str(grad_dropped_in.shape()), shape_str(probs_in.shape()));
  check_same_device(op, {probs_in, grad_dropped_in});
  check_same_dtype(op, {probs_in, grad_dropped_in});
  const Tensor probs = contiguous(probs_in), grad_dropped = contiguous(grad_dropped_in);
  return softmax_rows_backward(op, probs, grad_dropped, empty(probs.shape(), {probs.dtype(), probs.device()}), masking,
                               scale);
}

AttentionOutput attention_forward(const Tensor& q, const Tensor& k, const Tensor& v, const AttentionMasking& masking,
                                  double scale, bool keep_probs) {
  const char* op = "attention";
  // The GPUs run the whole op in 16 bits: the GEMMs accumulate in float, the row kernel computes
  // in float. The CPU paths widen the whole op. Either way the probabilities kept for backward
  // are 16-bit.
  if (any_float16({q, k, v}) && !has_float16_kernels(q)) {
    AttentionOutput r = attention_forward(widen(q, q), widen(k, q), widen(v, q), masking, scale, keep_probs);
    return {narrow(r.out, q.dtype()), narrow(r.probs, q.dtype())};
  }
  check_qkv(op, q, k, v);
  check_scale(op, scale);
  const std::int64_t b = q.size(0), h = q.size(1), tq = q.size(2), tk = k.size(2);
  check_masking(op, b, tk, masking);
  Tensor scores = empty({b, h, tq, tk}, {q.dtype(), q.device()});
  gemm(q, k, scores, false, true, scale, 0.0);
  // P overwrites the scores in place: the scores are not needed once their row is normalised.
  const AttentionProbs p = softmax_rows(op, scores, scores, masking);
  AttentionOutput r{empty({b, h, tq, v.size(3)}, {q.dtype(), q.device()}), keep_probs ? p.probs : Tensor()};
  gemm(p.dropped, v, r.out, false, false, 1.0, 0.0);  // Tk == 0 writes zeros (beta == 0 overwrites)
  return r;
}

AttentionGrads attention_backward(const Tensor& grad_out, const Tensor& q, const Tensor& k, const Tensor& v,
                                  const Tensor& probs, const AttentionMasking& masking, double scale, bool need_q,
                                  bool need_k, bool need_v) {
  const char* op = "attention_backward";
  if (any_float16({grad_out, q, k, v, probs}) && !has_float16_kernels(q)) {
    AttentionGrads r = attention_backward(widen(grad_out, q), widen(q, q), widen(k, q), widen(v, q), widen(probs, q),
                                          masking, scale, need_q, need_k, need_v);
    return {narrow(r.grad_q, q.dtype()), narrow(r.grad_k, k.dtype()), narrow(r.grad_v, v.dtype())};
  }
  check_qkv(op, q, k, v);
  check_scale(op, scale);
  check_dropout(op, masking.dropout);
  const std::int64_t b = q.size(0), h = q.size(1), tq = q.size(2), tk = k.size(2);
  if (probs.shape() != Shape{b, h, tq, tk})
    fail(op, "probs {} must be [B, H, Tq, Tk] = [{},{},{},{}]", shape_str(probs.shape()), b, h, tq, tk);
  if (grad_out.shape() != Shape{b, h, tq, v.size(3)})
    fail(op, "grad_out {} must be [B, H, Tq, dv] = [{},{},{},{}]", shape_str(grad_out.shape()), b, h, tq, v.size(3));
  check_same_device(op, {q, probs, grad_out});
  check_same_dtype(op, {q, probs, grad_out});

  AttentionGrads g;
  const Tensor p = contiguous(probs);
  Tensor grad_dropped = empty(p.shape(), {p.dtype(), p.device()});
  gemm(grad_out, v, grad_dropped, false, true, 1.0, 0.0);  // dD = dO v^T
  // dS overwrites dD in place; D comes back rebuilt from P for dv.
  const AttentionSoftmaxGrad s = softmax_rows_backward(op, p, grad_dropped, grad_dropped, masking, scale);
  if (need_v) {
    g.grad_v = empty(v.shape(), {v.dtype(), v.device()});
    gemm(s.dropped, grad_out, g.grad_v, true, false, 1.0, 0.0);  // dv = D^T dO
  }
  if (need_q) {
    g.grad_q = empty(q.shape(), {q.dtype(), q.device()});
    gemm(s.grad_scores, k, g.grad_q, false, false, 1.0, 0.0);  // dq = dS k
  }
  if (need_k) {
    g.grad_k = empty(k.shape(), {k.dtype(), k.device()});
    gemm(s.grad_scores, q, g.grad_k, true, false, 1.0, 0.0);  // dk = dS^T q
  }
  return g;
}

}  // namespace define::kernels
