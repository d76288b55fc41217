// Relative-position attention with its backward beside it: the fused family of
// kernels/rel_attention.h (GEMMs around one fused shift + mask + softmax + dropout row kernel;
// the backward through the attention family's softmax row kernel, an unshift and GEMMs).
//
// The backward saves the probabilities P (pre-dropout) and the six inputs, never qu = q + u,
// qw = q + w (recomputed: Tq * d elements each, against the Tq * Tk of P) nor the dropout mask (a
// pure function of (seed, offset, element) that the backward row kernel regenerates). The
// backward closure calls the kernels directly, so the op supports first derivatives only (like
// scaled_dot_product_attention).
#include "autograd/rel_attention.h"

#include <cmath>
#include <cstdint>

#include "autograd/attention_call.h"
#include "autograd/autocast.h"
#include "autograd/flash_rel_attention.h"
#include "autograd/function.h"
#include "core/error.h"
#include "kernels/rel_attention.h"

namespace define {

kernels::RelAttentionParams detail::read_rel_attention_call(const char* op, const Tensor& q, const Tensor& k,
                                                            const RelAttentionOptions& options) {
  if (!(options.dropout >= 0.0 && options.dropout <= 1.0)) fail(op, "dropout {} is outside [0, 1]", options.dropout);
  // Shapes, dtypes and devices are checked by the kernels' entry points; until then only what the
  // default scale and the dropout stream need is looked at.
  const bool four_d = q.defined() && k.defined() && q.dim() == 4 && k.dim() == 4;
  if (four_d && q.size(3) == 0 && options.scale == 0.0)
    fail(op, "the default scale 1 / sqrt(d) needs d > 0, got q {}", shape_str(q.shape()));
  kernels::RelAttentionParams params{
      .window = options.window,
      .scale = options.scale != 0.0 || !four_d ? options.scale : 1.0 / std::sqrt(static_cast<double>(q.size(3)))};
  if (options.training && options.dropout > 0.0) {
    params.dropout = options.dropout;
    // As in dropout(): p == 1 drops everything and draws nothing from the stream.
    if (options.dropout < 1.0 && four_d) {
      Generator& gen = options.generator != nullptr ? *options.generator : default_generator();
      params.seed = gen.state().seed;
      // One word per element of the [B, H, Tq, Tk] probability tensor.
      const auto elements = static_cast<std::uint64_t>(q.size(0) * q.size(1) * q.size(2) * k.size(2));
      params.offset = gen.reserve(elements);
    }
  }
  return params;
}

Tensor relative_attention(const Tensor& q_in, const Tensor& k_in, const Tensor& v_in, const Tensor& r_in,
                          const Tensor& u_in, const Tensor& w_in, const RelAttentionOptions& options) {
  // The fused op applies the autocast policy itself (16-bit inputs run on tensor cores).
  if (k_in.defined() && detail::resolve_attention_kernel(options.kernel, q_in, v_in) == AttentionKernel::Fused)
    return flash_relative_attention(q_in, k_in, v_in, r_in, u_in, w_in, options);
  const Tensor q = autocast::gemm_input(q_in);
  const Tensor k = autocast::gemm_input(k_in);
  const Tensor v = autocast::gemm_input(v_in);
  const Tensor r = autocast::gemm_input(r_in);
  const Tensor u = autocast::gemm_input(u_in);
  const Tensor w = autocast::gemm_input(w_in);
  const char* op = "relative_attention";
  const kernels::RelAttentionParams params = detail::read_rel_attention_call(op, q, k, options);

  const bool grad = needs_grad({q, k, v, r, u, w});
  kernels::RelAttentionOutput fw = kernels::rel_attention_forward(q, k, v, r, u, w, params, grad);
  if (grad) {
    record(op, {q, k, v, r, u, w}, {fw.out},
           [sq = SavedTensor(q), sk = SavedTensor(k), sv = SavedTensor(v), sr = SavedTensor(r), su = SavedTensor(u),
            sw = SavedTensor(w), probs = fw.probs, params](const BackwardArgs& a) {
             const char* name = "relative_attention";
             const kernels::RelAttentionNeeds needs{a.needs(0), a.needs(1), a.needs(2),
                                                    a.needs(3), a.needs(4), a.needs(5)};
             kernels::RelAttentionGrads g =
                 kernels::rel_attention_backward(a.grad(), sq.get(name), sk.get(name), sv.get(name), sr.get(name),
                                                 su.get(name), sw.get(name), probs, params, needs);
             return std::vector<Tensor>{g.grad_q, g.grad_k, g.grad_v, g.grad_r, g.grad_u, g.grad_w};
           });
  }
  return fw.out;
}

}  // namespace define
