// Weights interchange with other tools (Python: `safetensors.numpy.load_file`, or
// bench/scripts/open_safetensors.py without any package):
//
//   define export --run DIR [--checkpoint F] --out model.safetensors
//       the model's state dict under its parameter names (input.map.weight, rnn.module.weight_hh_l0,
//       output.bias, ...), plus metadata strings: "define.format" = "weights/1", "config" (the
//       run's resolved config.json, so the model can be rebuilt), "vocab" (one word per line, line
//       i = id i), "source_checkpoint".
//   define import --run DIR --from model.safetensors [--out F] [--force]
//       loads such a file (e.g. weights changed in Python) into the run's model and writes a
//       checkpoint (default DIR/imported.ckpt) that eval / generate / export-cache read with
//       --checkpoint. Strict: every missing, unexpected, mis-shaped or mis-typed tensor is
//       listed by name, a vocabulary in the metadata must equal the run's, and two names of one
//       shared tensor (e.g. input.map.weight and input.dextra_emb.map.weight) must hold equal
//       values. Nothing is written unless the whole file fits.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "core/error.h"
#include "core/factory.h"
#include "nn/checkpoint.h"
#include "nn/safetensors.h"
#include "tools/command.h"
#include "tools/options.h"
#include "tools/run_loader.h"

namespace define::cli {
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

int run_export(const std::vector<std::string>& args) {
  const char* op = "export";
  const Options opts =
      parse_options(op, args, {.required = {"run", "out"}, .repeated = {}, .optional = {"checkpoint"}, .flags = {}});
  if (opts.help) {
    fmt::print(
        "usage: define export --run DIR [--checkpoint F] --out model.safetensors\n"
        "Writes the model's tensors under its parameter names in the safetensors format, with the\n"
        "run's config and vocabulary as metadata, so it opens from Python (safetensors or numpy).\n"
        "  --checkpoint F  weights to use (default DIR/best.ckpt, else DIR/latest.ckpt)\n");
    return 0;
  }
  const LoadedRun run = load_run(opts.get("run"), opts.has("checkpoint") ? opts.get("checkpoint") : "");
  nn::NamedTensors tensors;
  std::int64_t bytes = 0;
  for (const auto& [name, t] : run.model->state_dict()) {
    tensors.emplace_back(name, t);
    bytes += t.numel() * static_cast<std::int64_t>(dtype_size(t.dtype()));
  }
  nn::Metadata meta;
  meta[kFormatKey] = kFormat;
  meta["config"] = read_text(std::filesystem::path(run.dir) / "config.json");
  meta["vocab"] = run.vocab.to_text();
  meta["source_checkpoint"] = run.checkpoint;
  const std::string out = opts.get("out");
  nn::save_safetensors(out, tensors, meta);
  fmt::print("wrote {}: {} tensors, {:.1f} MiB, from {}\n", out, tensors.size(), static_cast<double>(bytes) / (1 << 20),
             run.checkpoint);
  return 0;
}

int run_import(const std::vector<std::string>& args) {
  const char* op = "import";
  const Options opts =
      parse_options(op, args, {.required = {"run", "from"}, .repeated = {}, .optional = {"out"}, .flags = {"force"}});
  if (opts.help) {
    fmt::print(
        "usage: define import --run DIR --from model.safetensors [--out F] [--force]\n"
        "Loads a safetensors file holding the run's model tensors under their parameter names (as\n"
        "`define export` writes them) and saves them as a checkpoint for eval, generate and the other\n"
        "commands (--checkpoint F). Every missing, unexpected or mis-shaped tensor is an error.\n"
        "  --out F    the checkpoint to write (default DIR/imported.ckpt)\n"
        "  --force    overwrite F if it exists\n");
    return 0;
  }
  const std::string from = opts.get("from");
  const LoadedRun run = load_run(opts.get("run"));
  const std::string out =
      opts.has("out") ? opts.get("out") : (std::filesystem::path(run.dir) / "imported.ckpt").string();
  std::error_code ec;  // a name the system refuses fails at the write, with its message
  if (std::filesystem::exists(out, ec) && !opts.has("force"))
    fail(op, "'{}' exists; pass --force to overwrite it or choose another --out", out);

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
  for (auto& [name, t] : file.tensors) state.insert(name, std::move(t));
  const std::vector<std::string> problems = mismatches(run.model->state_dict(), state);
  if (!problems.empty())
    fail(op, "'{}' does not fit the model of {}: {}", from, run.dir, fmt::join(problems, "; "));
  run.model->load_state_dict(state, /*strict=*/true);
  nn::save_checkpoint(out, nn::make_checkpoint(*run.model, nullptr, {{"imported_from", from}, {"vocab", run.vocab.fingerprint()}}));
  fmt::print("wrote {}: {} tensors from {}\n", out, state.size(), from);
  return 0;
}

}  // namespace define::cli
