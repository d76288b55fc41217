// Scaled dot-product attention with its backward beside it: the fused attention family of
// kernels/attention.h (GEMM, one fused mask + softmax + dropout row kernel, GEMM; the backward
// the same way round).
//
// The backward saves the probabilities P (pre-dropout), q, k and v, never the dropout mask: the
// mask is a pure function of (seed, offset, element) and the backward row kernel regenerates it,
// rebuilding D = dropout(P) for dv on the way. The backward closure calls the kernels directly, so
// the op supports first derivatives only (like softmax).
#include "autograd/attention.h"

#include <atomic>
#include <cmath>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "autograd/attention_call.h"
#include "autograd/autocast.h"
#include "autograd/flash_attention.h"
#include "autograd/function.h"
#include "core/error.h"
#include "kernels/attention.h"

namespace define {
namespace {

AttentionKernel kernel_from_environment() {
  const char* env = std::getenv("DEFINE_ATTENTION");
  if (env == nullptr || std::string_view(env).empty() || std::string_view(env) == "auto") return AttentionKernel::Auto;
  if (std::string_view(env) == "fused") return AttentionKernel::Fused;
  if (std::string_view(env) == "unfused") return AttentionKernel::Unfused;
  fail("scaled_dot_product_attention", "DEFINE_ATTENTION must be auto, fused or unfused, got '{}'", env);
}

std::atomic<int>& default_kernel_slot() {
  static std::atomic<int> slot{static_cast<int>(kernel_from_environment())};
  return slot;
}

bool is_float_for_fused(DType t) { return t == DType::Float32 || t == DType::Float16 || t == DType::BFloat16; }

// Whether the fused kernels take this call under AttentionKernel::Auto: a GPU (or the emulated one),
// float32 or 16-bit inputs, and head dims the kernels' tiles hold.
bool fused_fits(const Tensor& q, const Tensor& v) {
  if (!q.defined() || !v.defined() || q.dim() != 4 || v.dim() != 4) return false;
  if (q.device().is_cpu() || !is_float_for_fused(q.dtype())) return false;
  return q.size(3) >= 1 && q.size(3) <= 128 && v.size(3) >= 1 && v.size(3) <= 128;
}

}  // namespace

detail::AttentionCall detail::read_attention_call(const char* op, const Tensor& q, const Tensor& k,
                                                  const AttentionOptions& options) {
  if (!(options.dropout >= 0.0 && options.dropout <= 1.0)) fail(op, "dropout {} is outside [0, 1]", options.dropout);
  // Until the kernels' entry points check shapes, only what the default scale and the dropout
  // stream need is looked at.
  const bool four_d = q.defined() && k.defined() && q.dim() == 4 && k.dim() == 4;
  if (four_d && q.size(3) == 0 && options.scale == 0.0)
    fail(op, "the default scale 1 / sqrt(d) needs d > 0, got q {}", shape_str(q.shape()));
  AttentionCall call;
  call.scale = options.scale != 0.0 || !four_d ? options.scale : 1.0 / std::sqrt(static_cast<double>(q.size(3)));
  call.masking = {.key_padding_mask = options.key_padding_mask, .causal = options.causal};
  if (options.training && options.dropout > 0.0) {
    call.masking.dropout = options.dropout;
    // As in dropout(): p == 1 drops everything and draws nothing from the stream.
    if (options.dropout < 1.0 && four_d) {
      Generator& gen = options.generator != nullptr ? *options.generator : default_generator();
      call.masking.seed = gen.state().seed;
      // One word per element of the [B, H, Tq, Tk] probability tensor.
      const auto elements = static_cast<std::uint64_t>(q.size(0) * q.size(1) * q.size(2) * k.size(2));
      call.masking.offset = gen.reserve(elements);
    }
  }
  return call;
}

AttentionKernel detail::resolve_attention_kernel(AttentionKernel requested, const Tensor& q, const Tensor& v) {
  const AttentionKernel kernel = requested == AttentionKernel::Auto ? default_attention_kernel() : requested;
  if (kernel != AttentionKernel::Auto) return kernel;
  return fused_fits(q, v) ? AttentionKernel::Fused : AttentionKernel::Unfused;
}

void set_default_attention_kernel(AttentionKernel kernel) { default_kernel_slot() = static_cast<int>(kernel); }
AttentionKernel default_attention_kernel() { return static_cast<AttentionKernel>(default_kernel_slot().load()); }

Tensor scaled_dot_product_attention(const Tensor& q_in, const Tensor& k_in, const Tensor& v_in,
                                    const AttentionOptions& options) {
  const AttentionKernel kernel =
      k_in.defined() ? detail::resolve_attention_kernel(options.kernel, q_in, v_in) : AttentionKernel::Unfused;
  // The fused op applies the autocast policy itself (16-bit inputs run on tensor cores).
  if (kernel == AttentionKernel::Fused) return flash_attention(q_in, k_in, v_in, options);
  const Tensor q = autocast::gemm_input(q_in);
  const Tensor k = autocast::gemm_input(k_in);
  const Tensor v = autocast::gemm_input(v_in);
  const char* op = "scaled_dot_product_attention";
  const detail::AttentionCall call = detail::read_attention_call(op, q, k, options);
  kernels::AttentionMasking masking = call.masking;
  const double scale = call.scale;

  const bool grad = needs_grad({q, k, v});
  kernels::AttentionOutput fw = kernels::attention_forward(q, k, v, masking, scale, grad);
  if (grad) {
    // dq = scale * dS k, dk = scale * dS^T q, dv = D^T dO, with dS from the fused backward row
    // kernel (kernels/attention.h). The padding mask is not needed: masked entries of P are 0.
    masking.key_padding_mask = Tensor();
    record(op, {q, k, v}, {fw.out},
           [sq = SavedTensor(q), sk = SavedTensor(k), sv = SavedTensor(v), probs = fw.probs, masking,
            scale](const BackwardArgs& a) {
             kernels::AttentionGrads g =
                 kernels::attention_backward(a.grad(), sq.get("attention"), sk.get("attention"), sv.get("attention"),
                                             probs, masking, scale, a.needs(0), a.needs(1), a.needs(2));
             return std::vector<Tensor>{g.grad_q, g.grad_k, g.grad_v};
           });
  }
  return fw.out;
}

}  // namespace define
