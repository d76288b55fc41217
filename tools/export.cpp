// `define export` and `define import`: the command-line side of the weights interchange
// (train/weights_io.h says what the files hold and how strictly they are checked).
#include <fmt/format.h>

#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "core/error.h"
#include "tools/command.h"
#include "tools/options.h"
#include "train/run_loader.h"
#include "train/weights_io.h"

namespace define::cli {

int run_export(const std::vector<std::string>& args) {
  const char* op = "export";
  const Options opts = parse_options(
      op, args, {.required = {"run", "out"}, .repeated = {}, .optional = {"checkpoint", "dtype"}, .flags = {}});
  if (opts.help) {
    fmt::print(
        "usage: define export --run DIR [--checkpoint F] [--dtype T] --out model.safetensors\n"
        "Writes the model's tensors under its parameter names in the safetensors format, with the\n"
        "run's config and vocabulary as metadata, so it opens from Python (safetensors or numpy).\n"
        "  --checkpoint F  weights to use (default DIR/best.ckpt, else DIR/latest.ckpt)\n"
        "  --dtype T       float32 (default), float16 or bfloat16: the float tensors in that format,\n"
        "                  rounded once (a half-size file; `define import` widens it back)\n");
    return 0;
  }
  const train::LoadedRun run = train::load_run(opts.get("run"), opts.has("checkpoint") ? opts.get("checkpoint") : "");
  const std::string out = opts.get("out");
  std::optional<DType> dtype;
  if (opts.has("dtype")) {
    const std::string d = opts.get("dtype");
    if (d == "float32") dtype = DType::Float32;
    else if (d == "float16") dtype = DType::Float16;
    else if (d == "bfloat16") dtype = DType::BFloat16;
    else fail(op, "--dtype must be float32, float16 or bfloat16, got '{}'", d);
  }
  const train::ExportSummary written = train::export_weights(run, out, dtype);
  fmt::print("wrote {}: {} tensors, {:.1f} MiB, from {}\n", out, written.tensors,
             static_cast<double>(written.bytes) / (1 << 20), run.checkpoint);
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
  const train::LoadedRun run = train::load_run(opts.get("run"));
  const std::string out =
      opts.has("out") ? opts.get("out") : (std::filesystem::path(run.dir) / "imported.ckpt").string();
  std::error_code ec;  // a name the system refuses fails at the write, with its message
  if (std::filesystem::exists(out, ec) && !opts.has("force"))
    fail(op, "'{}' exists; pass --force to overwrite it or choose another --out", out);

  const std::size_t tensors = train::import_weights(run, from, out);
  fmt::print("wrote {}: {} tensors from {}\n", out, tensors, from);
  return 0;
}

}  // namespace define::cli
