#include "nn/checkpoint.h"

#include <cstdlib>

#include "core/error.h"

namespace define::nn {
namespace {

constexpr const char* kFormatKey = "define.format";
constexpr const char* kFormat = "checkpoint/1";
constexpr const char* kModel = "model/";
constexpr const char* kOptimizer = "optimizer/";
constexpr const char* kRunTensor = "run/";
constexpr const char* kOptimizerName = "optimizer.name";
constexpr const char* kScalar = "optimizer.scalar.";
constexpr const char* kRun = "run.";

bool starts_with(const std::string& s, const char* prefix, std::string& rest) {
  const std::string p(prefix);
  if (s.compare(0, p.size(), p) != 0) return false;
  rest = s.substr(p.size());
  return true;
}

}  // namespace

void save_checkpoint(const std::string& path, const Checkpoint& ckpt) {
  NamedTensors tensors;
  for (const auto& [name, t] : ckpt.model) tensors.emplace_back(kModel + name, t);
  for (const auto& [name, t] : ckpt.optimizer.tensors) tensors.emplace_back(kOptimizer + name, t);
  for (const auto& [name, t] : ckpt.run_tensors) tensors.emplace_back(kRunTensor + name, t);
  Metadata meta;
  meta[kFormatKey] = kFormat;
  if (!ckpt.optimizer_name.empty()) meta[kOptimizerName] = ckpt.optimizer_name;
  for (const auto& [k, v] : ckpt.optimizer.scalars) meta[kScalar + k] = fmt::format("{:.17g}", v);
  for (const auto& [k, v] : ckpt.run) meta[kRun + k] = v;
  save_safetensors(path, tensors, meta);
}

Checkpoint load_checkpoint(const std::string& path) {
  const char* op = "load_checkpoint";
  SafetensorsContents file = load_safetensors(path);
  const auto format = file.metadata.find(kFormatKey);
  if (format == file.metadata.end())
    fail(op, "'{}' is a safetensors file but not a define checkpoint (no {} entry)", path, kFormatKey);
  if (format->second != kFormat)
    fail(op, "'{}' has checkpoint format '{}'; this build reads '{}'", path, format->second, kFormat);
  Checkpoint ckpt;
  std::string rest;
  for (auto& [name, t] : file.tensors) {
    if (starts_with(name, kModel, rest)) {
      ckpt.model.insert(rest, std::move(t));
    } else if (starts_with(name, kOptimizer, rest)) {
      ckpt.optimizer.tensors[rest] = std::move(t);
    } else if (starts_with(name, kRunTensor, rest)) {
      ckpt.run_tensors[rest] = std::move(t);
    } else {
      fail(op, "'{}': unexpected tensor '{}' (not model/, optimizer/ or run/)", path, name);
    }
  }
  for (const auto& [k, v] : file.metadata) {
    if (k == kFormatKey) continue;
    if (k == kOptimizerName) {
      ckpt.optimizer_name = v;
    } else if (starts_with(k, kScalar, rest)) {
      char* end = nullptr;
      const double x = std::strtod(v.c_str(), &end);
      if (v.empty() || *end != '\0') fail(op, "'{}': optimizer scalar '{}' is not a number ('{}')", path, rest, v);
      ckpt.optimizer.scalars[rest] = x;
    } else if (starts_with(k, kRun, rest)) {
      ckpt.run[rest] = v;
    } else {
      fail(op, "'{}': unexpected metadata key '{}'", path, k);
    }
  }
  return ckpt;
}

Checkpoint make_checkpoint(const Module& model, const optim::Optimizer* optimizer,
                           std::map<std::string, std::string> run) {
  Checkpoint ckpt;
  ckpt.model = model.state_dict();
  if (optimizer) {
    ckpt.optimizer = optimizer->state_dict();
    ckpt.optimizer_name = optimizer->name();
  }
  ckpt.run = std::move(run);
  return ckpt;
}

void restore_checkpoint(const Checkpoint& ckpt, Module& model, optim::Optimizer* optimizer) {
  if (optimizer && !ckpt.optimizer_name.empty() && ckpt.optimizer_name != optimizer->name())
    fail("restore_checkpoint", "the checkpoint holds {} state but the run uses {}", ckpt.optimizer_name,
         optimizer->name());
  model.load_state_dict(ckpt.model, /*strict=*/true);
  if (optimizer) optimizer->load_state_dict(ckpt.optimizer);
}

}  // namespace define::nn
