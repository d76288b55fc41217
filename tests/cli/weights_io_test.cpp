// `define export` / `import` on a tiny trained run (support/trained_run.h): parameter names in the
// safetensors header, a bit-identical round trip, strict loading that names every bad tensor, and
// the released forms' shared map table.
#include <catch2/catch.hpp>

#include <cstring>
#include <filesystem>
#include <functional>
#include <string>
#include <tuple>
#include <vector>

#include "autograd/ops.h"
#include "support/trained_run.h"
#include "core/config.h"
#include "kernels/copy.h"
#include "nn/checkpoint.h"
#include "nn/safetensors.h"
#include "tools/command.h"
#include "train/run_loader.h"

using namespace define;
using define::test::capture;
using define::test::define_run;
using define::test::read_all;
using define::test::TrainedRun;
using Catch::Contains;
namespace fs = std::filesystem;

namespace {

bool same_bytes(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && a.dtype() == b.dtype() &&
         std::memcmp(a.raw_data(), b.raw_data(), static_cast<std::size_t>(a.numel()) * dtype_size(a.dtype())) == 0;
}

}  // namespace

TEST_CASE("export / import: parameter names in the header, bit-identical round trip, strict loading", "[cli][commands]") {
  const TrainedRun& run = define_run();
  const fs::path weights = run.root / "model.safetensors";
  CHECK_THAT(capture(cli::run_export, {"--run", run.dir, "--out", weights.string()}), Contains("wrote"));

  // The header (8-byte length, then JSON) names every parameter of the module and carries the
  // config and the vocabulary.
  const std::string bytes = read_all(weights);
  std::uint64_t header_len = 0;
  std::memcpy(&header_len, bytes.data(), 8);
  const std::string header = bytes.substr(8, header_len);
  const train::LoadedRun loaded = train::load_run(run.dir);
  const auto params = loaded.model->named_parameters();
  CHECK(params.size() >= 10);
  for (const auto& [name, t] : params) CHECK_THAT(header, Contains("\"" + name + "\":{"));
  for (const char* name : {"input.map.weight", "input.unit.layers.0.weight", "input.unit.reduce.weight", "output.bias"})
    CHECK_THAT(header, Contains(std::string("\"") + name + "\""));
  const nn::SafetensorsContents file = nn::load_safetensors(weights.string());
  CHECK(file.metadata.at("define.format") == "weights/1");
  CHECK(file.metadata.at("vocab") == loaded.vocab.to_text());
  CHECK(file.metadata.at("config") == read_all(fs::path(run.dir) / "config.json"));
  CHECK(file.tensors.size() == loaded.model->state_dict().size());

  // export -> import -> the checkpoint holds exactly the original weights.
  const fs::path ckpt = run.root / "roundtrip.ckpt";
  capture(cli::run_import, {"--run", run.dir, "--from", weights.string(), "--out", ckpt.string()});
  const nn::Checkpoint original = nn::load_checkpoint(run.dir + "/best.ckpt");
  const nn::Checkpoint imported = nn::load_checkpoint(ckpt.string());
  REQUIRE(imported.model.size() == original.model.size());
  for (const auto& [name, t] : original.model) {
    const Tensor* u = imported.model.find(name);
    REQUIRE(u);
    CHECK(same_bytes(*u, t));
  }
  CHECK_THROWS_WITH(cli::run_import({"--run", run.dir, "--from", weights.string(), "--out", ckpt.string()}),
                    Contains("exists; pass --force"));
  capture(cli::run_import, {"--run", run.dir, "--from", weights.string(), "--out", ckpt.string(), "--force"});

  // Broken files are refused naming every offending tensor, and no checkpoint is written.
  auto altered = [&](const std::function<void(nn::NamedTensors&)>& edit) {
    nn::NamedTensors t = file.tensors;
    edit(t);
    const std::string path = (run.root / "altered.safetensors").string();
    nn::save_safetensors(path, t, file.metadata);
    return path;
  };
  const std::string bad_out = (run.root / "never.ckpt").string();
  const std::string wrong_shape = altered([](nn::NamedTensors& t) {
    for (auto& [name, x] : t)
      if (name == "output.bias") x = zeros({42});
  });
  CHECK_THROWS_WITH(cli::run_import({"--run", run.dir, "--from", wrong_shape, "--out", bad_out}),
                    Contains("shape of 'output.bias' is [42] in the file, [41] in the model"));
  const std::string missing = altered([](nn::NamedTensors& t) {
    std::erase_if(t, [](const auto& p) { return p.first == "input.unit.reduce.weight" || p.first == "output.bias"; });
  });
  CHECK_THROWS_WITH(cli::run_import({"--run", run.dir, "--from", missing, "--out", bad_out}),
                    Contains("missing tensors: input.unit.reduce.weight, output.bias"));
  const std::string unexpected = altered([](nn::NamedTensors& t) { t.emplace_back("decoder.extra.weight", zeros({2})); });
  CHECK_THROWS_WITH(cli::run_import({"--run", run.dir, "--from", unexpected, "--out", bad_out}),
                    Contains("unexpected tensors: decoder.extra.weight"));
  const std::string wrong_dtype = altered([](nn::NamedTensors& t) {
    for (auto& [name, x] : t)
      if (name == "output.bias") x = zeros({41}, {.dtype = DType::Float64});
  });
  CHECK_THROWS_WITH(cli::run_import({"--run", run.dir, "--from", wrong_dtype, "--out", bad_out}),
                    Contains("dtype of 'output.bias' is float64 in the file, float32 in the model"));
  CHECK_FALSE(fs::exists(bad_out));
  // Another vocabulary in the metadata is refused even when the shapes fit.
  nn::Metadata other_vocab = file.metadata;
  other_vocab["vocab"][0] = 'x';  // the first word "w<N>" becomes "x<N>"
  const std::string renamed = (run.root / "renamed.safetensors").string();
  nn::save_safetensors(renamed, file.tensors, other_vocab);
  CHECK_THROWS_WITH(cli::run_import({"--run", run.dir, "--from", renamed, "--out", bad_out}),
                    Contains("differs from the run's (41 words) first at id 0"));
  // A checkpoint is not an exported weights file.
  CHECK_THROWS_WITH(cli::run_import({"--run", run.dir, "--from", run.dir + "/best.ckpt", "--out", bad_out}),
                    Contains("it is a checkpoint"));
}

TEST_CASE("import: two names of one shared tensor must hold the same values", "[cli][commands]") {
  // The released forms share the map table between TokenInput ("input.map") and DExTraEmb
  // ("input.dextra_emb.map"): the state dict lists it under both names.
  const TrainedRun& run = define_run();
  Config cfg = Config::from_text(
      test::lm_config_text(run.root / "data", R"({"type": "dextra", "dim": 8, "out_dim": 16, "width_mult": 2, "depth": 2, "max_groups": 2})",
                  R"("max_steps": 2)"),
      "<test>");
  const std::string dir = (run.root / "dextra").string();
  train::train_language_model(cfg, dir, false);
  const std::string weights = (run.root / "dextra.safetensors").string();
  capture(cli::run_export, {"--run", dir, "--out", weights});
  nn::SafetensorsContents file = nn::load_safetensors(weights);
  int shared = 0;
  for (auto& [name, t] : file.tensors) {
    shared += name == "input.map.weight" || name == "input.dextra_emb.map.weight";
    if (name == "input.dextra_emb.map.weight") t = add(t, 1.0);
  }
  CHECK(shared == 2);
  nn::save_safetensors(weights, file.tensors, file.metadata);
  CHECK_THROWS_WITH(cli::run_import({"--run", dir, "--from", weights}),
                    Contains("'input.map.weight' and 'input.dextra_emb.map.weight' are one shared tensor in the model but differ in the file"));
  CHECK_FALSE(fs::exists(fs::path(dir) / "imported.ckpt"));
  // The token cache works for the released form as well.
  const std::string cache = (run.root / "dextra_cache.safetensors").string();
  CHECK_THAT(capture(cli::run_export_cache, {"--run", dir, "--out", cache}), Contains("41 x 16 table"));
  CHECK_THAT(capture(cli::run_eval, {"--run", dir, "--cache", cache, "--compare"}), Contains("cache vs unit"));
}

TEST_CASE("export --dtype float16 / bfloat16: half-size files, each value rounded once, imported back widened",
          "[cli][commands][float16]") {
  const TrainedRun& run = define_run();
  const fs::path full = run.root / "full.safetensors";
  capture(cli::run_export, {"--run", run.dir, "--out", full.string()});
  const nn::SafetensorsContents f32 = nn::load_safetensors(full.string());
  for (const auto& [flag, dtype, tag] : {std::tuple{"float16", DType::Float16, "\"F16\""},
                                          std::tuple{"bfloat16", DType::BFloat16, "\"BF16\""}}) {
    INFO(flag);
    const fs::path half = run.root / (std::string(flag) + ".safetensors");
    capture(cli::run_export, {"--run", run.dir, "--out", half.string(), "--dtype", flag});
    CHECK_THAT(read_all(half), Contains(tag));
    const nn::SafetensorsContents h = nn::load_safetensors(half.string());
    // The tensors take half the bytes (this tiny model's file is mostly its metadata: config and vocabulary).
    const auto tensor_bytes = [](const nn::SafetensorsContents& c) {
      std::int64_t b = 0;
      for (const auto& [name, t] : c.tensors) b += t.numel() * static_cast<std::int64_t>(dtype_size(t.dtype()));
      return b;
    };
    CHECK(2 * tensor_bytes(h) == tensor_bytes(f32));
    REQUIRE(h.tensors.size() == f32.tensors.size());
    for (std::size_t i = 0; i < h.tensors.size(); ++i) {
      const auto& [name, t] = h.tensors[i];
      INFO(name);
      REQUIRE(f32.tensors[i].first == name);  // one order: the model's state dict
      const Tensor& w = f32.tensors[i].second;
      if (w.dtype() != DType::Float32) continue;
      REQUIRE(t.dtype() == dtype);
      // Each value is the float32 weight rounded once (core/float16.h, checked against F16C).
      CHECK(same_bytes(t, kernels::cast(w, dtype)));
    }
    // Imported back: widened exactly into the float32 model.
    const fs::path ckpt = run.root / (std::string(flag) + ".ckpt");
    capture(cli::run_import, {"--run", run.dir, "--from", half.string(), "--out", ckpt.string(), "--force"});
    const nn::Checkpoint imported = nn::load_checkpoint(ckpt.string());
    for (const auto& [name, t] : h.tensors) {
      INFO(name);
      const Tensor* u = imported.model.find(name);
      REQUIRE(u);
      if (is_float16(t.dtype())) CHECK(same_bytes(*u, kernels::cast(t, DType::Float32)));
    }
  }
  CHECK_THROWS_WITH(cli::run_export({"--run", run.dir, "--out", full.string(), "--dtype", "int8"}),
                    Contains("--dtype must be float32, float16 or bfloat16, got 'int8'"));
}
