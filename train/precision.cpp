#include "train/precision.h"

#include <fmt/format.h>

#include <cmath>
#include <sstream>

#include "core/error.h"
#include "kernels/cuda/device.h"
#include "kernels/devices.h"

namespace define::train {
namespace {

constexpr const char* kOp = "train.precision";
constexpr std::size_t kHistory = 8;

int capability(Device device) {
  switch (device.type) {
    case DeviceType::CUDA:
#if defined(DEFINE_HAS_CUDA_KERNELS)
      return cuda::compute_capability(device.index);
#else
      return 0;
#endif
    case DeviceType::Emu: return cuda_emu::compute_capability(device.index);
    case DeviceType::CPU: break;
  }
  return 0;
}

std::string sm(int cc) { return fmt::format("sm_{}", cc); }

}  // namespace

const char* precision_name(Precision p) {
  switch (p) {
    case Precision::Fp32: return "fp32";
    case Precision::Fp16: return "fp16";
    case Precision::Bf16: return "bf16";
  }
  return "?";
}

std::optional<DType> lower_dtype(Precision p) {
  switch (p) {
    case Precision::Fp16: return DType::Float16;
    case Precision::Bf16: return DType::BFloat16;
    case Precision::Fp32: break;
  }
  return std::nullopt;
}

Precision resolve_precision(const std::string& name, Device device, const std::string& key) {
  if (name != "fp32" && name != "fp16" && name != "bf16" && name != "auto")
    fail(kOp, "{} must be fp32, fp16, bf16 or auto, got '{}'", key, name);
  if (name == "fp32") return Precision::Fp32;
  if (device.is_cpu()) {
    if (name == "auto") return Precision::Fp32;
    fail(kOp, "{} = {} needs a GPU (train.device = cuda, or emu for the emulated one): the CPU kernels have no "
              "16-bit arithmetic, so {} would only be slower there; use fp32 (or auto) on the CPU",
         key, name, name);
  }
  const int cc = capability(device);
  const std::string where = fmt::format("{} ({})", device.str(), sm(cc));
  if (name == "auto") return cc >= 80 ? Precision::Bf16 : cc >= 70 ? Precision::Fp16 : Precision::Fp32;
  if (name == "fp16" && cc < 70)
    fail(kOp, "{} = fp16 is refused on {}: Pascal GeForce GPUs run float16 arithmetic at 1/64 of the float32 rate "
              "and have no tensor cores, so fp16 would be slower than fp32; use fp32 (auto picks it there)",
         key, where);
  if (name == "bf16" && cc < 80)
    fail(kOp, "{} = bf16 is refused on {}: bfloat16 tensor cores start with sm_80 (Ampere); use fp16 on sm_70 / "
              "sm_75 (with its loss scaler) or fp32 on sm_61 (auto chooses)",
         key, where);
  return name == "fp16" ? Precision::Fp16 : Precision::Bf16;
}

std::optional<DType> read_allreduce_dtype(const std::string& name, Precision p, const std::string& key) {
  if (name == "float32") return std::nullopt;
  if (name == "bfloat16") return DType::BFloat16;
  if (name == "float16") {
    if (p != Precision::Fp16)
      fail(kOp,
           "{} = float16 needs train.precision = fp16 (got {}): only fp16's loss scale keeps small gradients "
           "above float16's smallest normal (6.1e-5); use bfloat16, which has float32's range",
           key, precision_name(p));
    return DType::Float16;
  }
  fail(kOp, "{} must be float32, bfloat16 or float16, got '{}'", key, name);
}

DynamicLossScaler::DynamicLossScaler(LossScalerSettings s) : s_(s), scale_(s.init) {
  if (!(s_.init > 0) || !std::isfinite(s_.init)) fail(kOp, "train.loss_scale_init must be positive, got {}", s_.init);
  if (s_.window < 1) fail(kOp, "train.loss_scale_window must be at least 1, got {}", s_.window);
  if (!(s_.min_scale > 0) || s_.min_scale > s_.init)
    fail(kOp, "train.min_loss_scale must be positive and at most loss_scale_init ({}), got {}", s_.init, s_.min_scale);
}

void DynamicLossScaler::remember(std::string change) {
  history_.push_back(std::move(change));
  if (history_.size() > kHistory) history_.pop_front();
}

bool DynamicLossScaler::clean_step(std::int64_t step) {
  if (++clean_ < s_.window) return false;
  clean_ = 0;
  remember(fmt::format("{:g} -> {:g} after step {}", scale_, 2 * scale_, step));
  scale_ *= 2;
  return true;
}

void DynamicLossScaler::overflow(std::int64_t epoch, std::int64_t step, const std::string& what) {
  ++overflows_;
  clean_ = 0;
  remember(fmt::format("{:g} -> {:g} at step {}", scale_, scale_ / 2, step));
  scale_ /= 2;
  if (scale_ >= s_.min_scale) return;
  std::string history;
  for (const std::string& h : history_) history += (history.empty() ? "" : "; ") + h;
  fail(kOp,
       "fp16 loss scale fell below its minimum {:g} at epoch {}, step {}: {}. Recent scale changes: {}. "
       "float16 cannot represent this run's values even with the loss scaled down that far: use "
       "train.precision = bf16 (sm_80 and newer) or fp32, or lower train.lr",
       s_.min_scale, epoch, step, what, history);
}

std::string DynamicLossScaler::state() const { return fmt::format("{:.17g} {} {}", scale_, clean_, overflows_); }

void DynamicLossScaler::restore(const std::string& state) {
  std::istringstream in(state);
  double scale = 0;
  std::int64_t clean = -1, overflows = -1;
  if (!(in >> scale >> clean >> overflows) || !(scale > 0) || clean < 0 || overflows < 0)
    fail(kOp, "checkpoint's loss-scaler state '{}' is not 'scale clean_steps overflows'", state);
  scale_ = scale;
  clean_ = clean;
  overflows_ = overflows;
}

}  // namespace define::train
