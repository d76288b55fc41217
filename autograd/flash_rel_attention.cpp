// Fused relative attention with its backward beside it (kernels/flash_rel_attention.h). The options
// are read as relative_attention reads them (detail::read_rel_attention_call), so both ops draw the
// same dropout stream from the same generator state and give the same result.
#include "autograd/flash_rel_attention.h"

#include "autograd/attention_call.h"
#include "autograd/autocast.h"
#include "autograd/function.h"
#include "kernels/flash_rel_attention.h"

namespace define {

Tensor flash_relative_attention(const Tensor& q_in, const Tensor& k_in, const Tensor& v_in, const Tensor& r_in,
                                const Tensor& u_in, const Tensor& w_in, const RelAttentionOptions& options) {
  const char* op = "flash_relative_attention";
  // The autocast policy's GEMM inputs (autograd/autocast.h): under a 16-bit region the six inputs go
  // to the tensor-core kernels in 16 bits, as the unfused path's GEMMs take them.
  const Tensor q = autocast::gemm_input(q_in);
  const Tensor k = autocast::gemm_input(k_in);
  const Tensor v = autocast::gemm_input(v_in);
  const Tensor r = autocast::gemm_input(r_in);
  const Tensor u = autocast::gemm_input(u_in);
  const Tensor w = autocast::gemm_input(w_in);
  const kernels::RelAttentionParams params = detail::read_rel_attention_call(op, q, k, options);
  kernels::FlashAttentionOutput fw = kernels::flash_rel_attention_forward(q, k, v, r, u, w, params);
  if (needs_grad({q, k, v, r, u, w})) {
    record(op, {q, k, v, r, u, w}, {fw.out},
           [sq = SavedTensor(q), sk = SavedTensor(k), sv = SavedTensor(v), sr = SavedTensor(r), su = SavedTensor(u),
            sw = SavedTensor(w), so = SavedTensor(fw.out), lse = fw.lse, params](const BackwardArgs& a) {
             const char* name = "flash_relative_attention";
             const kernels::RelAttentionNeeds needs{a.needs(0), a.needs(1), a.needs(2),
                                                    a.needs(3), a.needs(4), a.needs(5)};
             kernels::RelAttentionGrads g =
                 kernels::flash_rel_attention_backward(a.grad(), sq.get(name), sk.get(name), sv.get(name), sr.get(name),
                                                       su.get(name), sw.get(name), so.get(name), lse, params, needs);
             return std::vector<Tensor>{g.grad_q, g.grad_k, g.grad_v, g.grad_r, g.grad_u, g.grad_w};
           });
  }
  return fw.out;
}

}  // namespace define
