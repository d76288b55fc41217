// Entry points of the relative-attention family: checks, output allocation, the GEMMs and sums,
// and dispatch of the row kernels (kernels/rel_attention.h). The backends see contiguous
// [B, H, Tq, Tk] tensors. The backward softmax is the attention family's row kernel, called with
// causal = true: its horizon i + M + 1 is exactly the last visible key, and the keys a window
// hides have P == 0, hence dS == 0, without being told.
#include "kernels/rel_attention.h"

#include <cmath>

#include <fmt/format.h>

#include "core/factory.h"
#include "kernels/backend.h"
#include "kernels/copy.h"
#include "kernels/cpu/attention.h"
#include "kernels/cpu/rel_attention.h"
#include "kernels/elementwise.h"
#include "kernels/float16_compute.h"
#include "kernels/matmul.h"
#include "kernels/reduce.h"
#include "kernels/ref/attention.h"
#include "kernels/ref/rel_attention.h"
#include "kernels/rel_attention_common.h"

namespace define::kernels {

namespace rel_attention_common {

void check_params(const char* op, const RelAttentionParams& p) {
  if (p.window < 0) fail(op, "window {} is negative (0: no window)", p.window);
  if (!(p.dropout >= 0.0 && p.dropout <= 1.0)) fail(op, "dropout {} is outside [0, 1]", p.dropout);
  if (!std::isfinite(p.scale)) fail(op, "scale {} is not finite", p.scale);
}

void check_inputs(const char* op, const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& r, const Tensor& u,
                  const Tensor& w) {
  for (const Tensor* t : {&q, &k, &v, &r, &u, &w})
    if (!t->defined()) fail(op, "q, k, v, r, u and w must all be defined tensors");
  const auto shapes = [&] {
    return fmt::format(
        "q {} [B, H, Tq, d], k {} [B, H, Tk, d], v {} [B, H, Tk, dv], r {} [H, Tk, d], u {} and w {} [H, d]",
        shape_str(q.shape()), shape_str(k.shape()), shape_str(v.shape()), shape_str(r.shape()), shape_str(u.shape()),
        shape_str(w.shape()));
  };
  if (q.dim() != 4 || k.dim() != 4 || v.dim() != 4 || r.dim() != 3 || u.dim() != 2 || w.dim() != 2)
    fail(op, "ranks do not match: {}", shapes());
  const std::int64_t b = q.size(0), h = q.size(1), d = q.size(3), tk = k.size(2);
  const bool ok = k.size(0) == b && k.size(1) == h && k.size(3) == d && v.size(0) == b && v.size(1) == h &&
                  v.size(2) == tk && r.shape() == Shape{h, tk, d} && u.shape() == Shape{h, d} &&
                  w.shape() == Shape{h, d};
  if (!ok) fail(op, "shapes do not match: {}", shapes());
  if (tk < q.size(2))
    fail(op, "k {} has fewer keys than q {} has queries (Tk >= Tq: the queries are the last Tq keys)",
         shape_str(k.shape()), shape_str(q.shape()));
  check_same_device(op, {q, k, v, r, u, w});
  check_floating(op, q);
  check_same_dtype(op, {q, k, v, r, u, w});
}

// A per-head bias [H, d] as [1, H, 1, d]: a view that broadcasts over B and Tq.
Tensor per_head_bias(const Tensor& x) {
  return x.as_strided({1, x.size(0), 1, x.size(1)}, {0, x.stride(0), 0, x.stride(1)}, x.offset());
}

// Element b of dim 0, as a view.
Tensor batch_element(const Tensor& t, std::int64_t b) {
  return t.as_strided(Shape(t.shape().begin() + 1, t.shape().end()),
                      Strides(t.strides().begin() + 1, t.strides().end()), t.offset() + b * t.stride(0));
}

// out[b] = op(x[b]) @ op(r) for each batch element b: the GEMMs with the
// position embeddings r [H, Tk, d], shared by every batch element. One GEMM batched over H per b
// rather than one over [B, H] with r broadcast (kernels::gemm allows it): the broadcast batch has
// no uniform stride, which kernels::gemm's cuBLAS path runs as B * H single-matrix calls, where
// this is B strided-batched ones. The CPU path and the tiled kernels do the same work either way.
void gemm_per_batch(const Tensor& x, const Tensor& r, const Tensor& out, bool trans_x, bool trans_r) {
  for (std::int64_t b = 0; b < out.size(0); ++b)
    gemm(batch_element(x, b), r, batch_element(out, b), trans_x, trans_r, 1.0, 0.0);
}

void finish_query_grads(const Tensor& grad_qu, const Tensor& grad_qw, const Tensor& grad_q, const Tensor& grad_u,
                        const Tensor& grad_w) {
  if (grad_u.defined()) copy_into(grad_u, sum(grad_qu, {0, 2}, false));
  if (grad_w.defined()) copy_into(grad_w, sum(grad_qw, {0, 2}, false));
  if (!grad_q.defined()) return;
  if (grad_q.dtype() == grad_qu.dtype())
    binary_into(BinaryOp::Add, grad_q, grad_qu, grad_qw);
  else
    copy_into(grad_q, binary(BinaryOp::Add, grad_qu, grad_qw));
}

}  // namespace rel_attention_common

using namespace rel_attention_common;

namespace {

void check_scores(const char* op, const char* what, const Tensor& t) {
  if (!t.defined()) fail(op, "{} must be a defined tensor", what);
  check_floating(op, t);
  if (t.dim() != 4) fail(op, "{} {} must be 4-d [B, H, Tq, Tk]", what, shape_str(t.shape()));
  if (t.size(3) < t.size(2))
    fail(op, "{} {} has Tk < Tq (the queries are the last Tq keys)", what, shape_str(t.shape()));
}

// Runs the forward row kernel on contiguous AC and BD, writing P into `probs` (which may be AC
// itself) and D into a fresh tensor when dropout is on.
AttentionProbs softmax_rows(const char* op, const Tensor& ac, const Tensor& bd, const Tensor& probs,
                            const RelAttentionParams& p) {
  (void)op;  // only the no-GPU build's CUDA arm reads it (to name the op in its error)
  AttentionProbs r{probs, probs};
  if (p.dropout > 0.0) r.dropped = empty(ac.shape(), {ac.dtype(), ac.device()});
  if (ac.numel() == 0) return r;
  const Tensor dropped = p.dropout > 0.0 ? r.dropped : Tensor();
  DEFINE_BACKEND_CALL(op, ac, rel_attention_softmax, ac, bd, probs, dropped, p.window, p.scale, p.dropout, p.seed,
                      p.offset);
  return r;
}

Tensor unshift_rows(const char* op, const Tensor& grad_scores) {
  (void)op;  // as above
  Tensor grad_bd = empty(grad_scores.shape(), {grad_scores.dtype(), grad_scores.device()});
  if (grad_scores.numel() == 0) return grad_bd;
  DEFINE_BACKEND_CALL(op, grad_scores, rel_attention_unshift, grad_scores, grad_bd);
  return grad_bd;
}

}  // namespace

AttentionProbs rel_attention_softmax(const Tensor& ac_in, const Tensor& bd_in, const RelAttentionParams& params) {
  const char* op = "rel_attention_softmax";
  if (any_float16({ac_in, bd_in}) && !has_float16_kernels(ac_in)) {
    AttentionProbs r = rel_attention_softmax(widen(ac_in, ac_in), widen(bd_in, ac_in), params);
    return {narrow(r.probs, ac_in.dtype()), narrow(r.dropped, ac_in.dtype())};
  }
  check_scores(op, "ac", ac_in);
  check_scores(op, "bd", bd_in);
  check_params(op, params);
  if (ac_in.shape() != bd_in.shape())
    fail(op, "ac {} and bd {} must have one shape [B, H, Tq, Tk]", shape_str(ac_in.shape()), shape_str(bd_in.shape()));
  check_same_device(op, {ac_in, bd_in});
  check_same_dtype(op, {ac_in, bd_in});
  const Tensor ac = contiguous(ac_in), bd = contiguous(bd_in);
  return softmax_rows(op, ac, bd, empty(ac.shape(), {ac.dtype(), ac.device()}), params);
}

Tensor rel_attention_unshift(const Tensor& grad_scores) {
  const char* op = "rel_attention_unshift";
  check_scores(op, "grad_scores", grad_scores);
  // A data movement: the GPUs' kernel moves 16-bit scores as they are; the CPU paths widen.
  if (any_float16({grad_scores}) && !has_float16_kernels(grad_scores))
    return narrow(rel_attention_unshift(widen(grad_scores, grad_scores)), grad_scores.dtype());
  return unshift_rows(op, contiguous(grad_scores));
}

RelAttentionOutput rel_attention_forward(const Tensor& q, const Tensor& k, const Tensor& v, const Tensor& r,
                                         const Tensor& u, const Tensor& w, const RelAttentionParams& params,
                                         bool keep_probs) {
  const char* op = "rel_attention";
  // The GPUs run the whole op in 16 bits (GEMMs with float accumulation, the row kernel in float);
  // the CPU paths widen it.
  if (any_float16({q, k, v, r, u, w}) && !has_float16_kernels(q)) {
    RelAttentionOutput o = rel_attention_forward(widen(q, q), widen(k, q), widen(v, q), widen(r, q), widen(u, q),
                                                 widen(w, q), params, keep_probs);
    return {narrow(o.out, q.dtype()), narrow(o.probs, q.dtype())};
  }
  check_inputs(op, q, k, v, r, u, w);
  check_params(op, params);
  const std::int64_t b = q.size(0), h = q.size(1), tq = q.size(2), tk = k.size(2);
  const TensorOptions opt{q.dtype(), q.device()};
  Tensor ac = empty({b, h, tq, tk}, opt);
  gemm(binary(BinaryOp::Add, q, per_head_bias(u)), k, ac, false, true, 1.0, 0.0);  // AC = (q + u) k^T
  Tensor bd = empty({b, h, tq, tk}, opt);
  gemm_per_batch(binary(BinaryOp::Add, q, per_head_bias(w)), r, bd, false, true);  // BD = (q + w) r^T
  // P overwrites AC in place: AC is not needed once its row is normalised.
  const AttentionProbs p = softmax_rows(op, ac, bd, ac, params);
  RelAttentionOutput out{empty({b, h, tq, v.size(3)}, opt), keep_probs ? p.probs : Tensor()};
  gemm(p.dropped, v, out.out, false, false, 1.0, 0.0);
  return out;
}

RelAttentionGrads rel_attention_backward(const Tensor& grad_out, const Tensor& q, const Tensor& k, const Tensor& v,
                                         const Tensor& r, const Tensor& u, const Tensor& w, const Tensor& probs,
                                         const RelAttentionParams& params, const RelAttentionNeeds& needs) {
  const char* op = "rel_attention_backward";
  if (any_float16({grad_out, q, k, v, r, u, w, probs}) && !has_float16_kernels(q)) {
    RelAttentionGrads g = rel_attention_backward(widen(grad_out, q), widen(q, q), widen(k, q), widen(v, q),
                                                 widen(r, q), widen(u, q), widen(w, q), widen(probs, q), params, needs);
    return {narrow(g.grad_q, q.dtype()), narrow(g.grad_k, k.dtype()), narrow(g.grad_v, v.dtype()),
            narrow(g.grad_r, r.dtype()),  narrow(g.grad_u, u.dtype()), narrow(g.grad_w, w.dtype())};
  }
  check_inputs(op, q, k, v, r, u, w);
  check_params(op, params);
  const std::int64_t b = q.size(0), h = q.size(1), tq = q.size(2), tk = k.size(2);
  if (!probs.defined() || probs.shape() != Shape{b, h, tq, tk})
    fail(op, "probs {} must be [B, H, Tq, Tk] = [{},{},{},{}]",
         probs.defined() ? shape_str(probs.shape()) : "undefined", b, h, tq, tk);
  if (!grad_out.defined() || grad_out.shape() != Shape{b, h, tq, v.size(3)})
    fail(op, "grad_out {} must be [B, H, Tq, dv] = [{},{},{},{}]",
         grad_out.defined() ? shape_str(grad_out.shape()) : "undefined", b, h, tq, v.size(3));
  check_same_device(op, {q, probs, grad_out});
  check_same_dtype(op, {q, probs, grad_out});
  const TensorOptions opt{q.dtype(), q.device()};

  RelAttentionGrads g;
  const Tensor p = contiguous(probs);
  Tensor grad_scores = empty(p.shape(), opt);
  gemm(grad_out, v, grad_scores, false, true, 1.0, 0.0);  // dD = dO v^T
  // dS overwrites dD in place (the attention family's backward row kernel, see the top); D comes
  // back rebuilt from P for dv.
  const bool dropping = params.dropout > 0.0;
  const Tensor dropped = dropping ? empty(p.shape(), opt) : Tensor();
  if (p.numel() > 0)
    DEFINE_BACKEND_CALL(op, p, attention_softmax_backward, p, grad_scores, grad_scores, dropped, /*causal=*/true,
                        params.dropout, params.seed, params.offset, params.scale);
  if (needs.v) {
    g.grad_v = empty(v.shape(), opt);
    gemm(dropping ? dropped : p, grad_out, g.grad_v, true, false, 1.0, 0.0);  // dv = D^T dO
  }
  if (needs.k) {
    g.grad_k = empty(k.shape(), opt);
    gemm(grad_scores, binary(BinaryOp::Add, q, per_head_bias(u)), g.grad_k, true, false, 1.0, 0.0);  // dS^T qu
  }
  Tensor grad_qu, grad_qw;
  if (needs.q || needs.u) {
    grad_qu = empty(q.shape(), opt);
    gemm(grad_scores, k, grad_qu, false, false, 1.0, 0.0);  // dqu = dS k
    if (needs.u) g.grad_u = sum(grad_qu, {0, 2}, false);
  }
  if (needs.q || needs.w || needs.r) {
    const Tensor grad_bd = unshift_rows(op, grad_scores);
    if (needs.q || needs.w) {
      grad_qw = empty(q.shape(), opt);
      gemm_per_batch(grad_bd, r, grad_qw, false, false);  // dqw = dBD r
      if (needs.w) g.grad_w = sum(grad_qw, {0, 2}, false);
    }
    if (needs.r) {
      // dr = sum_b dBD[b]^T qw[b]: one GEMM batched over H per batch element, accumulating.
      g.grad_r = empty(r.shape(), opt);
      if (b == 0) fill(g.grad_r, 0.0);
      const Tensor qw = binary(BinaryOp::Add, q, per_head_bias(w));
      for (std::int64_t i = 0; i < b; ++i)
        gemm(batch_element(grad_bd, i), batch_element(qw, i), g.grad_r, true, false, 1.0, i == 0 ? 0.0 : 1.0);
    }
  }
  if (needs.q) {
    binary_into(BinaryOp::Add, grad_qu, grad_qu, grad_qw);  // dq = dqu + dqw, in place
    g.grad_q = grad_qu;
  }
  return g;
}

}  // namespace define::kernels
