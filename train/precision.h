// train.precision: which float format a training step's forward and backward run in, and fp16's
// dynamic loss scaling. The op policy itself (which op gets 16-bit inputs) is
// autograd/autocast.h's; parameters, the gradients the optimizer sees, optimizer state and
// checkpoints stay float32 in every precision, so a mixed-precision run resumes, evaluates and
// exports exactly as an fp32 one (evaluation runs in float32).
//
//   fp32   everything in float32 (the default);
//   fp16   IEEE half: tensor-core GEMMs from sm_70 (the RTX 2080 Ti's sm_75 among them); its
//          5-bit exponent underflows small gradients, hence the loss scaler below; refused on
//          sm_61, where GeForce Pascal runs half arithmetic at 1/64 of the float rate;
//   bf16   bfloat16: float32's exponent range with 8 bits of mantissa, so no scaler is needed;
//          tensor cores for it from sm_80 (Ampere), refused below;
//   auto   bf16 on sm_80 and newer, fp16 on sm_70 / sm_75, fp32 on sm_61 and on the CPU.
// On the CPU only fp32 (and auto) are accepted: its kernels have no 16-bit arithmetic, a 16-bit
// run would only be slower. The emulated GPU (train.device = emu) reports CUDA_EMU_ARCH's compute
// capability (sm_61 by default), so `CUDA_EMU_ARCH=75` or `=80` tests fp16 or bf16 training there.
//
// Dynamic loss scaling (fp16), as fairseq's DynamicLossScaler and PyTorch's GradScaler do it: the
// objective is multiplied by the scale before backward; a step whose gradient is not finite is an
// overflow: it is skipped (no update; logged as "overflow" in metrics.jsonl, not counted against
// train.skip_nonfinite's limit) and the scale halves; after loss_scale_window clean steps in a row
// it doubles. Unscaling is folded into the clipping coefficient (one pass over the gradients). A
// scale that falls below min_loss_scale ends the run with an error that names the step, the recent
// scale history and the first parameter whose gradient overflowed (or says the loss itself was not
// finite: a forward op overflowed float16). Data-parallel ranks decide from the all-reduced
// gradients, so they skip together. Config keys (train section): loss_scale_init [65536],
// loss_scale_window [2000], min_loss_scale [1e-4]. The scale and its counter are checkpointed.
#pragma once

#include <cstdint>
#include <deque>
#include <optional>
#include <string>

#include "core/device.h"
#include "core/dtype.h"

namespace define::train {

enum class Precision { Fp32, Fp16, Bf16 };

const char* precision_name(Precision p);
// The dtype GEMM inputs take in a step (nullopt for fp32).
std::optional<DType> lower_dtype(Precision p);
// train.precision resolved for the training device: "auto" chosen as above, a refused choice an
// error naming `key`, the device and what to use instead.
Precision resolve_precision(const std::string& name, Device device, const std::string& key);
// train.allreduce_dtype: "float32" (nullopt: gradients travel in their own dtype), "bfloat16", or
// "float16", which only an fp16 run may use: without its loss scale many gradients sit below
// float16's smallest normal (6.1e-5) and would be flushed or lose their bits. `key` names the
// config key in errors.
std::optional<DType> read_allreduce_dtype(const std::string& name, Precision p, const std::string& key);

struct LossScalerSettings {
  double init = 65536;
  std::int64_t window = 2000;
  double min_scale = 1e-4;
};

class DynamicLossScaler {
 public:
  explicit DynamicLossScaler(LossScalerSettings s);

  double scale() const { return scale_; }
  std::int64_t clean_steps() const { return clean_; }
  std::int64_t overflows() const { return overflows_; }

  // A clean step: counts toward the next doubling; true when the scale doubled.
  bool clean_step(std::int64_t step);
  // An overflow at `step` (the update is skipped): halves the scale. Throws define::Error when it
  // falls below the minimum, with `what` (which gradient or output was not finite) in the message.
  void overflow(std::int64_t epoch, std::int64_t step, const std::string& what);

  // Checkpoint fields: "scale clean overflows".
  std::string state() const;
  void restore(const std::string& state);

 private:
  LossScalerSettings s_;
  double scale_;
  std::int64_t clean_ = 0, overflows_ = 0;
  std::deque<std::string> history_;  // the last changes, "65536 -> 32768 at step 12"
  void remember(std::string change);
};

}  // namespace define::train
