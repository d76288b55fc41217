// Flash attention with its backward beside it (kernels/flash_attention.h). The options are read as
// scaled_dot_product_attention reads them (autograd/attention.cpp), so both ops draw the same
// dropout stream from the same generator state and give the same result.
#include "autograd/flash_attention.h"

#include <cmath>
#include <cstdint>

#include "autograd/attention_call.h"
#include "autograd/autocast.h"
#include "autograd/function.h"
#include "core/error.h"
#include "kernels/flash_attention.h"

namespace define {

Tensor flash_attention(const Tensor& q_in, const Tensor& k_in, const Tensor& v_in, const AttentionOptions& options) {
  const char* op = "flash_attention";
  // The autocast policy's GEMM inputs (autograd/autocast.h): under a 16-bit region q, k and v go to
  // the tensor-core kernels in 16 bits, as the unfused path's GEMMs take them.
  const Tensor q = autocast::gemm_input(q_in);
  const Tensor k = autocast::gemm_input(k_in);
  const Tensor v = autocast::gemm_input(v_in);
  // Shapes, dtypes and devices are checked by kernels::flash_attention_forward.
  const detail::AttentionCall call = detail::read_attention_call(op, q, k, options);
  const kernels::AttentionMasking& masking = call.masking;
  const double scale = call.scale;

  kernels::FlashAttentionOutput fw = kernels::flash_attention_forward(q, k, v, masking, scale);
  if (needs_grad({q, k, v})) {
    // The backward recomputes P, so it keeps the padding mask (unlike scaled_dot_product_attention's).
    record(op, {q, k, v}, {fw.out},
           [sq = SavedTensor(q), sk = SavedTensor(k), sv = SavedTensor(v), so = SavedTensor(fw.out), lse = fw.lse,
            masking, scale](const BackwardArgs& a) {
             kernels::AttentionGrads g = kernels::flash_attention_backward(
                 a.grad(), sq.get("flash_attention"), sk.get("flash_attention"), sv.get("flash_attention"),
                 so.get("flash_attention"), lse, masking, scale, a.needs(0), a.needs(1), a.needs(2));
             return std::vector<Tensor>{g.grad_q, g.grad_k, g.grad_v};
           });
  }
  return fw.out;
}

}  // namespace define
