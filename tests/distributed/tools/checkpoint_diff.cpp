// define_checkpoint_diff A.ckpt B.ckpt TOLERANCE: compares the weights, optimizer tensors and run
// tensors (carried state) of two checkpoints; prints the largest difference relative to each
// tensor's largest magnitude (at least 1e-4: a tensor that should be zero, such as the gradient
// moments of an attention key bias, which softmax ignores, holds rounding noise only) and exits 1
// when it exceeds TOLERANCE (0: must be bit-identical) or when the two hold different tensors.
// Used by scripts/checks/check-distributed.sh.
#include <cmath>
#include <cstdio>
#include <map>
#include <string>

#include <fmt/format.h>

#include "autograd/ops.h"
#include "core/error.h"
#include "nn/checkpoint.h"

using namespace define;

namespace {

// max |a - b| / max(max |a|, 1e-4) over the tensor.
double relative_difference(const Tensor& a, const Tensor& b) {
  const Tensor x = to_dtype(contiguous(to_device(a, Device::cpu())), DType::Float64);
  const Tensor y = to_dtype(contiguous(to_device(b, Device::cpu())), DType::Float64);
  double diff = 0, scale = 1e-4;
  for (std::int64_t i = 0; i < x.numel(); ++i) {
    const double u = x.data<double>()[i], v = y.data<double>()[i];
    if (std::isnan(u) != std::isnan(v)) return INFINITY;
    diff = std::max(diff, std::abs(u - v));
    scale = std::max(scale, std::abs(u));
  }
  return diff / scale;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 4) {
    std::fprintf(stderr, "usage: define_checkpoint_diff A.ckpt B.ckpt TOLERANCE\n");
    return 2;
  }
  try {
    const nn::Checkpoint a = nn::load_checkpoint(argv[1]), b = nn::load_checkpoint(argv[2]);
    const double tolerance = std::stod(argv[3]);
    std::map<std::string, std::pair<Tensor, Tensor>> pairs;
    std::map<std::string, int> count;
    auto add = [&](const std::string& key, const Tensor& t, bool first) {
      (first ? pairs[key].first : pairs[key].second) = t;
      ++count[key];
    };
    for (const auto& [k, t] : a.model) add("model " + k, t, true);
    for (const auto& [k, t] : b.model) add("model " + k, t, false);
    for (const auto& [k, t] : a.optimizer.tensors) add("optimizer " + k, t, true);
    for (const auto& [k, t] : b.optimizer.tensors) add("optimizer " + k, t, false);
    for (const auto& [k, t] : a.run_tensors) add("run " + k, t, true);
    for (const auto& [k, t] : b.run_tensors) add("run " + k, t, false);
    double worst = 0;
    std::string worst_key;
    for (const auto& [key, p] : pairs) {
      if (count[key] != 2 || p.first.shape() != p.second.shape()) {
        fmt::print("{}: present or shaped differently in the two checkpoints\n", key);
        return 1;
      }
      const double d = relative_difference(p.first, p.second);
      if (d > worst || worst_key.empty()) {
        worst = d;
        worst_key = key;
      }
    }
    fmt::print("{} tensors compared; largest relative difference {:.3g} ({})\n", pairs.size(), worst, worst_key);
    return worst <= tolerance ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "define_checkpoint_diff: %s\n", e.what());
    return 2;
  }
}
