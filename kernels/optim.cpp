// Entry point of the optim family: checks, a contiguous gradient, dispatch.
#include "kernels/optim.h"

#include "core/error.h"
#include "kernels/backend.h"
#include "kernels/float16_compute.h"
#include "kernels/copy.h"
#include "kernels/cpu/optim.h"
#include "kernels/ref/optim.h"

namespace define::kernels {

void adam_update(const Tensor& p, const Tensor& g_in, const Tensor& m, const Tensor& v, const AdamHyper& h) {
  const char* op = "adam_update";
  for (const Tensor* t : {&p, &g_in, &m, &v})
    if (!t->defined()) fail(op, "p, g, m and v must all be defined tensors");
  check_floating(op, p);
  if (any_float16({p, g_in, m, v}))
    fail(op, "parameters, gradients and moments must be float32 or float64, got {} / {} / {} / {}: mixed precision "
             "keeps float32 master weights and casts them for the forward (train.precision)",
         dtype_name(p.dtype()), dtype_name(g_in.dtype()), dtype_name(m.dtype()), dtype_name(v.dtype()));
  check_same_dtype(op, {p, g_in, m, v});
  check_same_device(op, {p, g_in, m, v});
  if (g_in.shape() != p.shape() || m.shape() != p.shape() || v.shape() != p.shape())
    fail(op, "shapes differ: p {}, g {}, m {}, v {}", shape_str(p.shape()), shape_str(g_in.shape()),
         shape_str(m.shape()), shape_str(v.shape()));
  // Updated in place, so no copy can stand in for them.
  if (!p.is_contiguous() || !m.is_contiguous() || !v.is_contiguous())
    fail(op, "p, m and v must be contiguous (they are updated in place)");
  const Tensor g = contiguous(g_in);
  if (p.numel() == 0) return;
  DEFINE_BACKEND_CALL(op, p, adam_update, p, g, m, v, h.beta1, h.beta2, h.eps, h.step_size, h.inv_bias_sqrt, h.l2,
                      h.decay);
}

}  // namespace define::kernels
