// `define average --run DIR [--last N] [--out FILE]`: averages the weights of the last N epoch
// checkpoints a run kept (train.keep_epoch_checkpoints; epoch<E>.ckpt), as fairseq's
// average_checkpoints.py does for translation models: each parameter is the mean of its N values
// (computed in double, stored in the parameter's dtype). The result is a weights-only checkpoint
// (default <DIR>/averaged.ckpt, written atomically) that eval / translate read with --checkpoint.
// Checkpoints that differ in their tensors' names, shapes or dtypes, or in the vocabulary /
// subword model they were trained with, are refused naming the two files.
#include <fmt/format.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "autograd/views.h"
#include "core/error.h"
#include "core/factory.h"
#include "nn/checkpoint.h"
#include "tools/command.h"
#include "tools/options.h"

namespace define::cli {
namespace {

constexpr const char* kOp = "average";

// The epoch checkpoints of a run folder, by epoch.
std::vector<std::pair<std::int64_t, std::string>> epoch_checkpoints(const std::string& dir) {
  namespace fs = std::filesystem;
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) fail(kOp, "run folder '{}' does not exist", dir);
  std::vector<std::pair<std::int64_t, std::string>> found;
  for (const auto& entry : fs::directory_iterator(dir, ec)) {
    const std::string name = entry.path().filename().string();
    if (name.size() <= 10 || name.rfind("epoch", 0) != 0 || name.substr(name.size() - 5) != ".ckpt") continue;
    const std::string digits = name.substr(5, name.size() - 10);
    if (digits.empty() || !std::all_of(digits.begin(), digits.end(), [](char c) { return c >= '0' && c <= '9'; }) ||
        digits.size() > 12)
      continue;
    found.emplace_back(std::stoll(digits), entry.path().string());
  }
  std::sort(found.begin(), found.end());
  return found;
}

}  // namespace

nn::Checkpoint average_checkpoints(const std::vector<std::string>& paths) {
  if (paths.empty()) fail(kOp, "no checkpoint to average");
  const nn::Checkpoint first = nn::load_checkpoint(paths[0]);
  std::vector<std::vector<double>> sums;
  for (const auto& [name, t] : first.model)
    sums.push_back(copy_to_device(to_dtype(t, DType::Float64), Device::cpu()).to_vector<double>());
  for (std::size_t i = 1; i < paths.size(); ++i) {
    const nn::Checkpoint ck = nn::load_checkpoint(paths[i]);
    for (const char* label : {"vocab", "subword"}) {
      const auto a = first.run.find(label), b = ck.run.find(label);
      if ((a == first.run.end()) != (b == ck.run.end()) || (a != first.run.end() && a->second != b->second))
        fail(kOp, "'{}' and '{}' were trained with different {} files", paths[0], paths[i], label);
    }
    if (ck.model.size() != first.model.size())
      fail(kOp, "'{}' holds {} tensors but '{}' holds {}", paths[0], first.model.size(), paths[i], ck.model.size());
    std::size_t j = 0;
    for (const auto& [name, t] : first.model) {
      const Tensor* other = ck.model.find(name);
      if (!other) fail(kOp, "'{}' has no tensor '{}' (it is in '{}')", paths[i], name, paths[0]);
      if (other->shape() != t.shape() || other->dtype() != t.dtype())
        fail(kOp, "tensor '{}' is {} {} in '{}' but {} {} in '{}'", name, dtype_name(t.dtype()), shape_str(t.shape()),
             paths[0], dtype_name(other->dtype()), shape_str(other->shape()), paths[i]);
      const std::vector<double> v = copy_to_device(to_dtype(*other, DType::Float64), Device::cpu()).to_vector<double>();
      for (std::size_t e = 0; e < v.size(); ++e) sums[j][e] += v[e];
      ++j;
    }
  }
  nn::Checkpoint out;
  std::size_t j = 0;
  const double n = static_cast<double>(paths.size());
  for (const auto& [name, t] : first.model) {
    std::vector<double>& s = sums[j++];
    for (double& x : s) x /= n;
    out.model.insert(name, to_dtype(from_vector(s, t.shape()), t.dtype()));
  }
  for (const char* label : {"vocab", "subword"})
    if (const auto it = first.run.find(label); it != first.run.end()) out.run[label] = it->second;
  std::string from;
  for (const auto& p : paths) {
    if (!from.empty()) from += ' ';
    from += std::filesystem::path(p).filename().string();
  }
  out.run["averaged_from"] = from;
  return out;
}

int run_average(const std::vector<std::string>& args) {
  const Options opts = parse_options(kOp, args, {.required = {"run"}, .repeated = {}, .optional = {"last", "out"}, .flags = {}});
  if (opts.help) {
    fmt::print(
        "usage: define average --run DIR [--last N] [--out FILE]\n"
        "Averages the weights of the run's last N epoch checkpoints (train.keep_epoch_checkpoints keeps them).\n"
        "  --last N    how many (default 5; fewer when the run kept fewer)\n"
        "  --out FILE  where the averaged weights go (default DIR/averaged.ckpt)\n");
    return 0;
  }
  const std::string dir = opts.get("run");
  const std::int64_t last = opts.has("last") ? opts.get_int("last") : 5;
  if (last < 1) fail(kOp, "--last must be positive, got {}", last);
  const auto found = epoch_checkpoints(dir);
  if (found.empty())
    fail(kOp, "run folder '{}' kept no epoch checkpoints (epoch<E>.ckpt; set train.keep_epoch_checkpoints)", dir);
  std::vector<std::string> paths;
  std::string epochs;
  for (std::size_t i = found.size() - std::min<std::size_t>(found.size(), static_cast<std::size_t>(last)); i < found.size(); ++i) {
    paths.push_back(found[i].second);
    if (!epochs.empty()) epochs += ", ";
    epochs += std::to_string(found[i].first);
  }
  const std::string out = opts.has("out") ? opts.get("out") : (std::filesystem::path(dir) / "averaged.ckpt").string();
  nn::save_checkpoint(out, average_checkpoints(paths));
  fmt::print("averaged {} checkpoints (epochs {}) into {}\n", paths.size(), epochs, out);
  return 0;
}

}  // namespace define::cli
