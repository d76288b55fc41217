// The commands that use a trained language model (tools/eval.cpp, generate.cpp, export_cache.cpp,
// corrmap.cpp, weights_io.cpp), end to end on a tiny DeFINE LSTM model trained for one epoch on a
// generated 40-word corpus: eval reproduces the trainer's perplexities, the token cache gives the
// same perplexity as the unit, generation is reproducible, weights survive export -> import bit
// for bit, and corrmap's PNG holds the normalised |E^T E| computed here independently.
#include <catch2/catch.hpp>
#include <png.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "autograd/ops.h"
#include "core/config.h"
#include "cli/cli_test_util.h"
#include "core/error.h"
#include "models/token_cache.h"
#include "nn/checkpoint.h"
#include "nn/safetensors.h"
#include "tools/command.h"
#include "tools/lm_trainer.h"
#include "tools/run_loader.h"

using namespace define;
using Catch::Contains;
namespace fs = std::filesystem;

namespace {

void write_corpus(const fs::path& dir) { test::write_tiny_corpus(dir, 987654321, 120, 20); }

constexpr const char* kDefineInput = R"({"type": "define", "dim": 8, "out_dim": 12, "k": 16, "depth": 2, "g_max": 2})";
constexpr const char* kEmbeddingInput = R"({"type": "embedding", "dim": 8})";

std::string config_text(const fs::path& data, const std::string& input, const std::string& train_limit) {
  return R"({"data": {"dir": ")" + data.string() + R"(", "batch_size": 4, "eval_batch_size": 2, "test_batch_size": 3, "bptt": 8},
    "model": {"type": "lstm_lm", "input": )" + input + R"(, "hidden": 10, "layers": 2,
              "dropout": {"embedding": 0.1, "input": 0.2, "hidden": 0.2, "output": 0.2, "weight": 0.3}},
    "train": {"optimizer": "ntasgd", "lr": 5, )" + train_limit + R"(, "log_interval": 50, "threads": 1}})";
}

struct TrainedRun {
  fs::path root;  // scratch folder of this process, removed at exit
  std::string dir;
  cli::TrainResult result;
};

// Removes the scratch folder when the process ends.
struct ScratchFolder {
  fs::path path;
  ~ScratchFolder() {
    std::error_code ec;
    if (!path.empty()) fs::remove_all(path, ec);
  }
};

// Trained once per process (ctest runs each case in its own process, possibly in parallel: the
// folder carries the pid).
const TrainedRun& define_run() {
  static ScratchFolder scratch;
  static const TrainedRun run = [] {
    TrainedRun r;
    r.root = fs::temp_directory_path() / ("define_commands_test_" + std::to_string(::getpid()));
    scratch.path = r.root;
    fs::remove_all(r.root);
    write_corpus(r.root / "data");
    Config cfg = Config::from_text(config_text(r.root / "data", kDefineInput, R"("epochs": 1)"), "<test>");
    r.dir = (r.root / "define").string();
    r.result = cli::train_language_model(cfg, r.dir, false);
    return r;
  }();
  return run;
}

// Runs a command with stdout redirected to a temporary file and returns what it printed.
std::string capture(const std::function<int(const std::vector<std::string>&)>& command, const std::vector<std::string>& args) {
  std::fflush(stdout);
  char name[] = "/tmp/define_commands_outXXXXXX";
  const int fd = ::mkstemp(name);
  REQUIRE(fd >= 0);
  const int saved = ::dup(1);
  ::dup2(fd, 1);
  auto restore = [&] {
    std::fflush(stdout);
    ::dup2(saved, 1);
    ::close(saved);
  };
  int rc = 0;
  try {
    rc = command(args);
  } catch (...) {
    restore();
    ::close(fd);
    ::unlink(name);
    throw;
  }
  restore();
  std::ifstream f(name, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  ::close(fd);
  ::unlink(name);
  CHECK(rc == 0);
  return ss.str();
}

// The "loss" of the JSON line of `mode` printed by `define eval --json`.
double json_loss(const std::string& out, const std::string& mode) {
  const std::string tag = "\"mode\": \"" + mode + "\", \"loss\": ";
  const auto at = out.find(tag);
  REQUIRE(at != std::string::npos);
  return std::strtod(out.c_str() + at + tag.size(), nullptr);
}

std::string read_all(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

std::vector<std::string> split_words(const std::string& text) {
  std::istringstream in(text);
  std::vector<std::string> words;
  for (std::string w; in >> w;) words.push_back(w);
  return words;
}

bool same_bytes(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && a.dtype() == b.dtype() &&
         std::memcmp(a.raw_data(), b.raw_data(), static_cast<std::size_t>(a.numel()) * dtype_size(a.dtype())) == 0;
}

std::uint32_t big_endian(const std::string& s, std::size_t at) {
  std::uint32_t v = 0;
  for (std::size_t i = 0; i < 4; ++i) v = (v << 8) | static_cast<unsigned char>(s[at + i]);
  return v;
}

struct Decoded {
  std::uint32_t width = 0, height = 0;
  std::vector<std::uint8_t> gray;
};

// Decoded by libpng itself (independent of the writer), converted to 8-bit gray.
Decoded decode_png(const fs::path& p) {
  png_image img;
  std::memset(&img, 0, sizeof img);
  img.version = PNG_IMAGE_VERSION;
  REQUIRE(png_image_begin_read_from_file(&img, p.c_str()) != 0);
  img.format = PNG_FORMAT_GRAY;
  Decoded d;
  d.width = img.width;
  d.height = img.height;
  d.gray.resize(PNG_IMAGE_SIZE(img));
  REQUIRE(png_image_finish_read(&img, nullptr, d.gray.data(), 0, nullptr) != 0);
  return d;
}

}  // namespace

TEST_CASE("eval: reproduces the trainer's perplexities, and the exported token cache gives the same", "[cli][commands]") {
  const TrainedRun& run = define_run();
  REQUIRE(fs::exists(fs::path(run.dir) / "best.ckpt"));

  const double valid = json_loss(capture(cli::run_eval, {"--run", run.dir, "--json"}), "unit");
  const double test = json_loss(capture(cli::run_eval, {"--run", run.dir, "--split", "test", "--json"}), "unit");
  // Same weights, batch sizes, bptt and thread count as the trainer's final evaluation.
  CHECK(valid == run.result.valid_loss);
  CHECK(test == run.result.test_loss);
  CHECK(std::exp(valid) < 41.0);  // learned something: below the uniform guess over 41 words

  // Text output: loss, perplexity, tokens. valid: 20 lines x 9 tokens = 180, batchify(2) -> 90
  // rows, 89 input rows x 2 streams = 178 tokens.
  const std::string text = capture(cli::run_eval, {"--run", run.dir});
  CHECK_THAT(text, Contains(fmt::format("perplexity {:.2f}", std::exp(run.result.valid_loss))));
  CHECK_THAT(text, Contains("178 tokens"));

  const std::string cache = (run.root / "cache.safetensors").string();
  const std::string exported = capture(cli::run_export_cache, {"--run", run.dir, "--out", cache});
  CHECK_THAT(exported, Contains("41 x 12 table"));
  const models::TokenCacheFile file = models::load_token_cache(cache);
  CHECK(file.table.shape() == Shape{41, 12});
  CHECK(file.vocab_size == 41);
  CHECK(file.width == 12);
  CHECK(file.input_type == "define");

  // The table's rows are the unit's outputs for each id.
  cli::LoadedRun loaded = cli::load_run(run.dir);
  const models::TokenInput& input = loaded.token_input();
  const Tensor ids = from_vector(std::vector<std::int64_t>{0, 7, 40}, {3, 1});
  const std::vector<float> direct = reshape(input.forward(ids), {3, 12}).to_vector<float>();
  const std::vector<float> table = file.table.to_vector<float>();
  const int rows[] = {0, 7, 40};
  for (int r = 0; r < 3; ++r)
    for (int c = 0; c < 12; ++c) CHECK(table[rows[r] * 12 + c] == Approx(direct[r * 12 + c]).margin(1e-6));

  // use_cache: the table must fit, and serves eval only.
  models::TokenInput& mutable_input = loaded.model->submodule_as<models::TokenInput>("input");
  CHECK_THROWS_WITH(mutable_input.use_cache(zeros({41, 11})), Contains("cached table has shape [41,11], this input needs [41,12]"));
  mutable_input.use_cache(file.table);
  CHECK(mutable_input.uses_cache());
  CHECK(reshape(mutable_input.forward(from_vector(std::vector<std::int64_t>{7}, {1, 1})), {12}).to_vector<float>() ==
        std::vector<float>(table.begin() + 7 * 12, table.begin() + 8 * 12));
  mutable_input.train();
  CHECK_THROWS_WITH(mutable_input.forward(ids), Contains("serves evaluation only"));
  mutable_input.eval();
  mutable_input.use_cache({});
  CHECK_FALSE(mutable_input.uses_cache());

  for (const char* split : {"valid", "test"}) {
    const double with_cache = json_loss(capture(cli::run_eval, {"--run", run.dir, "--split", split, "--cache", cache, "--json"}), "cache");
    const double reference = std::string(split) == "valid" ? run.result.valid_loss : run.result.test_loss;
    CHECK(std::abs(std::exp(with_cache) - std::exp(reference)) / std::exp(reference) < 1e-5);
  }
  // --compare: both timings and the agreement line; without --cache the table is computed here.
  const std::string compared = capture(cli::run_eval, {"--run", run.dir, "--cache", cache, "--compare"});
  CHECK_THAT(compared, Contains("unit:") && Contains("cache:") && Contains("cache vs unit: perplexity relative difference"));
  CHECK_THAT(capture(cli::run_eval, {"--run", run.dir, "--compare"}), Contains("cache vs unit"));

  CHECK_THROWS_WITH(cli::run_eval({"--run", run.dir, "--split", "train"}), Contains("--split must be valid or test, got 'train'"));
  CHECK_THROWS_WITH(cli::run_eval({"--run", run.dir, "--cache", (run.root / "nothing.safetensors").string()}),
                    Contains("nothing.safetensors"));
  // A checkpoint is not a cache.
  CHECK_THROWS_WITH(cli::run_eval({"--run", run.dir, "--cache", run.dir + "/best.ckpt"}), Contains("is not a token cache"));
}

TEST_CASE("eval: a cache made from other weights is refused", "[cli][commands]") {
  const TrainedRun& run = define_run();
  const std::string cache = (run.root / "stale_cache.safetensors").string();
  const std::string weights = (run.root / "stale_weights.safetensors").string();
  capture(cli::run_export_cache, {"--run", run.dir, "--out", cache});
  capture(cli::run_export, {"--run", run.dir, "--out", weights});
  // Other weights: the same model with its map table doubled, imported as a checkpoint.
  nn::SafetensorsContents file = nn::load_safetensors(weights);
  for (auto& [name, t] : file.tensors)
    if (name == "input.map.weight") t = mul(t, 2.0);
  nn::save_safetensors(weights, file.tensors, file.metadata);
  const std::string ckpt = (run.root / "doubled.ckpt").string();
  capture(cli::run_import, {"--run", run.dir, "--from", weights, "--out", ckpt});
  CHECK_THROWS_WITH(cli::run_eval({"--run", run.dir, "--checkpoint", ckpt, "--cache", cache}),
                    Contains("was computed from other weights") && Contains("export the cache again"));
  // Its own cache is accepted.
  const std::string fresh = (run.root / "fresh_cache.safetensors").string();
  capture(cli::run_export_cache, {"--run", run.dir, "--checkpoint", ckpt, "--out", fresh});
  CHECK_THAT(capture(cli::run_eval, {"--run", run.dir, "--checkpoint", ckpt, "--cache", fresh, "--compare"}),
             Contains("cache vs unit"));
}

TEST_CASE("generate: reproducible per seed, vocabulary words only, unknown prompt words named", "[cli][commands]") {
  const TrainedRun& run = define_run();
  const cli::LoadedRun loaded = cli::load_run(run.dir);
  const std::vector<std::string> a = {"--run", run.dir, "--words", "40", "--seed", "7"};
  const std::string first = capture(cli::run_generate, a), second = capture(cli::run_generate, a);
  CHECK(first == second);
  const std::string other = capture(cli::run_generate, {"--run", run.dir, "--words", "40", "--seed", "8"});
  CHECK(other != first);

  // 40 sampled words: every <eos> is a line break, everything else a vocabulary word.
  const std::vector<std::string> words = split_words(first);
  const auto breaks = static_cast<std::size_t>(std::count(first.begin(), first.end(), '\n'));
  CHECK(first.back() == '\n');
  CHECK(words.size() + breaks >= 40);   // the final '\n' closes the last line
  CHECK(words.size() + breaks <= 41);
  for (const std::string& w : words) {
    CHECK(loaded.vocab.contains(w));
    CHECK(w != "<eos>");
  }

  // The prompt is printed first; temperature 0 is greedy, so the seed does not matter.
  const std::string greedy1 = capture(cli::run_generate, {"--run", run.dir, "--prompt", "w3 w4", "--words", "10", "--temperature", "0", "--seed", "1"});
  const std::string greedy2 = capture(cli::run_generate, {"--run", run.dir, "--prompt", "w3 w4", "--words", "10", "--temperature", "0", "--seed", "2"});
  CHECK(greedy1 == greedy2);
  CHECK(greedy1.rfind("w3 w4", 0) == 0);

  CHECK_THROWS_WITH(cli::run_generate({"--run", run.dir, "--prompt", "w3 zebra w4"}),
                    Contains("prompt word 'zebra' is not in the run's vocabulary (41 words"));
  CHECK_THROWS_WITH(cli::run_generate({"--run", run.dir, "--temperature", "-1"}), Contains("--temperature must be"));
  CHECK_THROWS_WITH(cli::run_generate({"--run", run.dir, "--words", "x"}), Contains("--words expects an integer, got 'x'"));
}

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
  const cli::LoadedRun loaded = cli::load_run(run.dir);
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

TEST_CASE("corrmap: PNG of the normalised |E^T E|, one per layer, and the layer path reproduces the unit", "[cli][commands]") {
  const TrainedRun& run = define_run();
  const fs::path png = run.root / "map.png";
  // Size = n = 8: one pixel per entry, so pixels can be checked against the formula.
  CHECK_THAT(capture(cli::run_corrmap, {"--run", run.dir, "--out", png.string(), "--layer", "map", "--size", "8"}),
             Contains("map (8 features, 41 words)"));
  const std::string bytes = read_all(png);
  REQUIRE(bytes.size() > 33);
  CHECK(bytes.substr(0, 8) == std::string("\x89PNG\r\n\x1a\n", 8));
  CHECK(bytes.substr(12, 4) == "IHDR");
  CHECK(big_endian(bytes, 16) == 8);             // width
  CHECK(big_endian(bytes, 20) == 8);             // height
  CHECK(static_cast<int>(bytes[24]) == 8);       // bit depth
  CHECK(static_cast<int>(bytes[25]) == 0);       // colour type: gray

  // |C| = |E^T E| from the table, min-max normalised, computed here in double.
  const cli::LoadedRun loaded = cli::load_run(run.dir);
  const models::TokenInput& input = loaded.token_input();
  const std::vector<float> e = input.table().to_vector<float>();
  std::vector<double> c(64, 0.0);
  for (int i = 0; i < 8; ++i)
    for (int j = 0; j < 8; ++j) {
      for (int v = 0; v < 41; ++v) c[i * 8 + j] += static_cast<double>(e[v * 8 + i]) * e[v * 8 + j];
      c[i * 8 + j] = std::abs(c[i * 8 + j]);
    }
  const double lo = *std::min_element(c.begin(), c.end()), hi = *std::max_element(c.begin(), c.end());
  const Decoded d = decode_png(png);
  REQUIRE(d.width == 8);
  REQUIRE(d.height == 8);
  for (int k = 0; k < 64; ++k) CHECK(d.gray[k] == std::lround(255.0 * (c[k] - lo) / (hi - lo)));
  CHECK(*std::min_element(d.gray.begin(), d.gray.end()) == 0);
  CHECK(*std::max_element(d.gray.begin(), d.gray.end()) == 255);
  const Tensor gram = models::representation_gram(input, "map");
  CHECK(std::abs(std::abs(gram.to_vector<double>()[9]) - c[9]) <= 1e-9 * hi);

  // All layers, upscaled and downscaled; the unit's output is 12 wide.
  const fs::path all = run.root / "layers.png";
  capture(cli::run_corrmap, {"--run", run.dir, "--out", all.string(), "--layer", "all", "--size", "30"});
  for (const char* layer : {"map", "unit.0", "unit.1", "out"}) {
    const fs::path p = run.root / (std::string("layers.") + layer + ".png");
    REQUIRE(fs::exists(p));
    const Decoded img = decode_png(p);
    CHECK(img.width == 30);
    CHECK(img.height == 30);
    CHECK(*std::min_element(img.gray.begin(), img.gray.end()) == 0);  // upscaled: every entry shows
    CHECK(*std::max_element(img.gray.begin(), img.gray.end()) == 255);
  }
  const fs::path small = run.root / "small.png";
  capture(cli::run_corrmap, {"--run", run.dir, "--out", small.string(), "--layer", "unit.1", "--size", "5", "--colour", "heat"});
  const std::string heat = read_all(small);
  CHECK(big_endian(heat, 16) == 5);
  CHECK(static_cast<int>(heat[25]) == 2);  // colour type: RGB

  // Layer i of the unit, recomputed layer by layer, leads to the unit's own output.
  const Tensor ids = from_vector(std::vector<std::int64_t>{0, 5, 40}, {3});
  const std::vector<Tensor> layers = models::define_layer_outputs(input, ids);
  REQUIRE(layers.size() == 2);
  // o_1 = n + (k - n) / N = 12 rounded up to a multiple of 8; o_2 = k.
  CHECK(layers[0].shape() == Shape{3, 16});
  CHECK(layers[1].shape() == Shape{3, 16});
  const auto& unit = dynamic_cast<const nn::DefineUnit&>(input.submodule("unit"));
  const std::vector<float> via_layers = unit.reduce()->forward(layers[1]).to_vector<float>();
  const std::vector<float> direct = reshape(input.forward(reshape(ids, {3, 1})), {3, 12}).to_vector<float>();
  for (std::size_t k = 0; k < direct.size(); ++k) CHECK(via_layers[k] == Approx(direct[k]).margin(1e-6));

  CHECK_THROWS_WITH(cli::run_corrmap({"--run", run.dir, "--out", png.string(), "--layer", "unit.2"}),
                    Contains("--layer 'unit.2' does not exist for input type 'define' (available: map, unit.0, unit.1, out, all)"));
  CHECK_THROWS_WITH(cli::run_corrmap({"--run", run.dir, "--out", png.string(), "--size", "0"}), Contains("--size must be in"));
}

TEST_CASE("export-cache: an embedding-input model is refused with a clear message", "[cli][commands]") {
  const TrainedRun& run = define_run();
  Config cfg = Config::from_text(config_text(run.root / "data", kEmbeddingInput, R"("max_steps": 2)"), "<test>");
  const std::string dir = (run.root / "embedding").string();
  cli::train_language_model(cfg, dir, false);
  CHECK_THROWS_WITH(cli::run_export_cache({"--run", dir, "--out", (run.root / "e.safetensors").string()}),
                    Contains("has input type 'embedding', which has no unit to cache"));
  CHECK_THROWS_WITH(cli::run_eval({"--run", dir, "--compare"}), Contains("--compare needs a model whose input has a unit"));
  // Eval and corrmap still work: the table is the representation.
  CHECK_THAT(capture(cli::run_eval, {"--run", dir}), Contains("perplexity"));
  CHECK_THAT(capture(cli::run_corrmap, {"--run", dir, "--out", (run.root / "e.png").string(), "--size", "16"}),
             Contains("map (8 features"));
  CHECK_THROWS_WITH(cli::run_corrmap({"--run", dir, "--out", (run.root / "e.png").string(), "--layer", "out"}),
                    Contains("available: map, all"));
}

TEST_CASE("import: two names of one shared tensor must hold the same values", "[cli][commands]") {
  // The released forms share the map table between TokenInput ("input.map") and DExTraEmb
  // ("input.dextra_emb.map"): the state dict lists it under both names.
  const TrainedRun& run = define_run();
  Config cfg = Config::from_text(
      config_text(run.root / "data", R"({"type": "dextra", "dim": 8, "out_dim": 16, "width_mult": 2, "depth": 2, "max_groups": 2})",
                  R"("max_steps": 2)"),
      "<test>");
  const std::string dir = (run.root / "dextra").string();
  cli::train_language_model(cfg, dir, false);
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
