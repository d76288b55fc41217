#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "core/error.h"
#include "core/factory.h"
#include "kernels/copy.h"
#include "nn/checkpoint.h"
#include "nn/safetensors.h"
#include "train/weights_io.h"

namespace define::train {
namespace {

constexpr const char* kFormatKey = "define.format";
constexpr const char* kFormat = "weights/1";

std::string read_text(const std::filesystem::path& p) {
  std::ifstream f(p, std::ios::binary);
  if (!f) fail("export", "cannot read '{}'", p.string());
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

bool same_bytes(const Tensor& a, const Tensor& b) {
  if (a.shape() != b.shape() || a.dtype() != b.dtype()) return false;
  const Tensor ha = copy_to_device(a, Device::cpu()), hb = copy_to_device(b, Device::cpu());
  return std::memcmp(ha.raw_data(), hb.raw_data(), static_cast<std::size_t>(ha.numel()) * dtype_size(ha.dtype())) == 0;
}

// Everything that keeps `file` from loading into `model`, one line per problem, by name.
std::vector<std::string> mismatches(const nn::StateDict& model, const nn::StateDict& file) {
  std::vector<std::string> missing, unexpected, problems;
  for (const auto& [name, t] : model) {
    const Tensor* f = file.find(name);
    if (!f) {
      missing.push_back(name);
      continue;
    }
    if (f->shape() != t.shape())
      problems.push_back(fmt::format("shape of '{}' is {} in the file, {} in the model", name, shape_str(f->shape()),
                                     shape_str(t.shape())));
    else if (f->dtype() != t.dtype())
      problems.push_back(
          fmt::format("dtype of '{}' is {} in the file, {} in the model", name, dtype_name(f->dtype()), dtype_name(t.dtype())));
  }
  for (const auto& [name, t] : file)
    if (!model.contains(name)) unexpected.push_back(name);
  // Names that alias one tensor of the model: loading copies both, so they must agree.
  std::map<std::tuple<const void*, std::int64_t, Shape>, std::string> first_name;
  for (const auto& [name, t] : model) {
    const auto key = std::make_tuple(static_cast<const void*>(t.storage().get()), t.offset(), t.shape());
    const auto [it, inserted] = first_name.emplace(key, name);
    if (inserted) continue;
    const Tensor *a = file.find(it->second), *b = file.find(name);
    if (a && b && !same_bytes(*a, *b))
      problems.push_back(fmt::format("'{}' and '{}' are one shared tensor in the model but differ in the file",
                                     it->second, name));
  }
  if (!missing.empty()) problems.insert(problems.begin(), fmt::format("missing tensors: {}", fmt::join(missing, ", ")));
  if (!unexpected.empty()) problems.push_back(fmt::format("unexpected tensors: {}", fmt::join(unexpected, ", ")));
  return problems;
}

}  // namespace

ExportSummary export_weights(const LoadedRun& run, const std::string& out, std::optional<DType> dtype) {
  if (dtype && !is_floating(*dtype)) fail("export", "--dtype must be a float type, got {}", dtype_name(*dtype));
  nn::NamedTensors tensors;
  std::int64_t bytes = 0;
  for (const auto& [name, t] : run.model->state_dict()) {
    // Float tensors rounded once to the asked format (integer buffers stay as they are).
    const Tensor e = dtype && is_floating(t.dtype()) && t.dtype() != *dtype ? kernels::cast(t, *dtype) : t;
    tensors.emplace_back(name, e);
    bytes += e.numel() * static_cast<std::int64_t>(dtype_size(e.dtype()));
  }
  nn::Metadata meta;
  meta[kFormatKey] = kFormat;
  meta["config"] = read_text(std::filesystem::path(run.dir) / "config.json");
  meta["vocab"] = run.vocab.to_text();
  meta["source_checkpoint"] = run.checkpoint;
  nn::save_safetensors(out, tensors, meta);
  return {tensors.size(), bytes};
}

std::size_t import_weights(const LoadedRun& run, const std::string& from, const std::string& out) {
  const char* op = "import";
  nn::SafetensorsContents file = nn::load_safetensors(from);
  if (const auto f = file.metadata.find(kFormatKey); f != file.metadata.end() && f->second != kFormat)
    fail(op, "'{}' has format '{}', not '{}'{}", from, f->second, kFormat,
         f->second.rfind("checkpoint/", 0) == 0 ? " (it is a checkpoint: pass it to the commands with --checkpoint)" : "");
  if (const auto v = file.metadata.find("vocab"); v != file.metadata.end()) {
    const data::Vocabulary theirs = data::Vocabulary::from_text(v->second, from + " (metadata 'vocab')");
    if (!(theirs == run.vocab)) {
      std::int64_t i = 0;
      while (i < theirs.size() && i < run.vocab.size() && theirs.word(i) == run.vocab.word(i)) ++i;
      fail(op, "the vocabulary of '{}' ({} words) differs from the run's ({} words) first at id {}: '{}' vs '{}'", from,
           theirs.size(), run.vocab.size(), i, i < theirs.size() ? theirs.word(i) : "(end)",
           i < run.vocab.size() ? run.vocab.word(i) : "(end)");
    }
  }
  nn::StateDict state;
  const nn::StateDict model_state = run.model->state_dict();
  for (auto& [name, t] : file.tensors) {
    // A half-size export (define export --dtype float16 / bfloat16) widens exactly into the model's
    // float32 weights; nothing else changes type on the way in.
    const Tensor* m = model_state.find(name);
    if (m && is_float16(t.dtype()) && is_floating(m->dtype()) && !is_float16(m->dtype()))
      t = kernels::cast(t, m->dtype());
    state.insert(name, std::move(t));
  }
  const std::vector<std::string> problems = mismatches(model_state, state);
  if (!problems.empty())
    fail(op, "'{}' does not fit the model of {}: {}", from, run.dir, fmt::join(problems, "; "));
  run.model->load_state_dict(state, /*strict=*/true);
  nn::save_checkpoint(out, nn::make_checkpoint(*run.model, nullptr, {{"imported_from", from}, {"vocab", run.vocab.fingerprint()}}));
  return state.size();
}

}  // namespace define::train
