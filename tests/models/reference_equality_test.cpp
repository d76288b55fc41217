// Each model family against an implementation define did not write, on the same weights: define's
// weights and inputs go to a safetensors file, a PyTorch program in tests/reference/ builds the
// model from PyTorch's own layers and writes its outputs back, and they must agree in float64.
// PyTorch is Debian's python3-torch, run by /usr/bin/python3 (or $DEFINE_PYTHON);
// scripts/install-deps.sh installs it. Where it cannot be imported the test cases are reported as
// skipped, never as passed.
#include <catch2/catch.hpp>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

#include "autograd/engine.h"
#include "autograd/views.h"
#include "core/config.h"
#include "core/factory.h"
#include "models/beam_search.h"
#include "models/language_model.h"
#include "models/registry.h"
#include "models/translation_model.h"
#include "nn/delight_block.h"
#include "nn/safetensors.h"
#include "support/common.h"
#include "support/gradients.h"

using namespace define;
namespace fs = std::filesystem;

namespace {

std::string python() {
  const char* p = std::getenv("DEFINE_PYTHON");
  return p != nullptr && *p != '\0' ? p : "/usr/bin/python3";
}

// Skips the test case unless python() can import torch.
#define REQUIRE_PYTORCH()                                                                                    \
  do {                                                                                                       \
    if (std::system((python() + " -c 'import torch' > /dev/null 2>&1").c_str()) != 0)                        \
      DEFINE_SKIP_TEST(python() + " cannot import torch (Debian's python3-torch; scripts/install-deps.sh)"); \
  } while (false)

// Writes the model's parameters and the inputs, runs tests/reference/<script> on the folder and
// returns what it wrote; the script's output is shown when it fails.
nn::NamedTensors run_reference(const std::string& script, const fs::path& dir, const nn::Module& model,
                               const nn::NamedTensors& inputs) {
  nn::NamedTensors weights;
  for (const auto& [name, p] : model.named_parameters()) weights.emplace_back(name, p);
  nn::save_safetensors((dir / "weights.safetensors").string(), weights);
  nn::save_safetensors((dir / "inputs.safetensors").string(), inputs);
  const fs::path log = dir / "reference.log";
  const std::string cmd = python() + " " + DEFINE_SOURCE_DIR + "/tests/reference/" + script + " " + dir.string() +
                          " > " + log.string() + " 2>&1";
  const int rc = std::system(cmd.c_str());
  INFO(script << " said:\n" << test::read_all(log));
  REQUIRE(rc == 0);
  return nn::load_safetensors((dir / "reference.safetensors").string()).tensors;
}

const Tensor& named(const nn::NamedTensors& ts, const std::string& name) {
  for (const auto& [n, t] : ts)
    if (n == name) return t;
  FAIL("no tensor '" << name << "' in the reference's output");
  static const Tensor none;
  return none;
}

// Token ids [T, B] in [0, vocab), a fixed pseudo-random pattern per salt.
Tensor token_window(std::int64_t T, std::int64_t B, std::int64_t vocab, std::int64_t salt) {
  std::vector<std::int64_t> ids(static_cast<std::size_t>(T * B));
  for (std::size_t i = 0; i < ids.size(); ++i)
    ids[i] = static_cast<std::int64_t>((i * 7 + static_cast<std::size_t>(salt) * 5 + i * i / 3) %
                                       static_cast<std::size_t>(vocab));
  return from_vector(ids, {T, B});
}

std::shared_ptr<models::LanguageModel> build_lm(const std::string& model_json, std::int64_t vocab) {
  Generator gen(3);
  const Config cfg = Config::from_text(R"({"model": )" + model_json + "}", "<test>");
  auto lm =
      std::dynamic_pointer_cast<models::LanguageModel>(models::build_model(cfg.section("model"), vocab, gen).module);
  REQUIRE(lm);
  lm->to(DType::Float64);
  test::randomise(*lm, gen);  // biases and gains away from 0 and 1, so a missing term shows
  lm->eval();
  return lm;
}

}  // namespace

// The LSTM LM (embedding, three LSTM layers of widths 7, 7 and 6, classifier tied to the embedding
// with a bias) against torch.nn.Embedding and torch.nn.LSTM: the log-probabilities of two windows,
// the second starting from the state the first left.
TEST_CASE("reference equality: the LSTM LM equals torch.nn.LSTM on the same weights, state carried",
          "[models][reference]") {
  REQUIRE_PYTORCH();
  const std::int64_t V = 20;
  const auto lm = build_lm(R"({"type": "lstm_lm", "input": {"type": "embedding", "dim": 6}, "hidden": 7,
                              "layers": 3})",
                           V);
  const Tensor w0 = token_window(9, 3, V, 1), w1 = token_window(5, 3, V, 2);
  auto [lp0, state] = lm->log_prob(w0, {});
  const Tensor lp1 = lm->log_prob(w1, state).first;
  test::TempDir dir;
  const nn::NamedTensors ref = run_reference("lstm_lm.py", dir.path(), *lm, {{"tokens0", w0}, {"tokens1", w1}});
  test::check_close(lp0, named(ref, "log_probs0"), 1e-12, 1e-12, "first window");
  test::check_close(lp1, named(ref, "log_probs1"), 1e-12, 1e-12, "second window, state carried");
}

// Transformer-XL (embedding scaled by sqrt(d_model), post-norm layers, two shared relative biases,
// a projected adaptive softmax with two tails tied to the embedding) against bench/peers/txl_torch.py
// loaded with the same weights: the loss of three segments, each reading the memory of the
// previous ones (4 positions), and each layer's memory at the end.
TEST_CASE("reference equality: Transformer-XL equals the PyTorch peer over three segments of memory",
          "[models][reference]") {
  REQUIRE_PYTORCH();
  const std::int64_t V = 30;
  const auto lm = build_lm(R"({"type": "transformer_xl", "input": {"type": "projected", "dim": 8,
                              "cutoffs": [10, 20]}, "d_model": 8, "n_head": 2, "d_head": 3, "d_inner": 12,
                              "n_layer": 2, "dropout": 0, "mem_len": 4})",
                           V);
  test::TempDir dir;
  dir.write("config.json", R"({"vocab": 30, "d_model": 8, "n_head": 2, "d_head": 3, "d_inner": 12, "n_layer": 2,
                              "mem_len": 4, "cutoffs": [10, 20]})");
  nn::NamedTensors inputs;
  std::vector<double> losses;
  models::LmState state;
  for (int k = 0; k < 3; ++k) {
    const Tensor tokens = token_window(5, 2, V, 2 * k), targets = token_window(5, 2, V, 2 * k + 1);
    inputs.emplace_back("tokens" + std::to_string(k), tokens);
    inputs.emplace_back("targets" + std::to_string(k), targets);
    models::LanguageModel::Output out = lm->forward(tokens, targets, state);
    losses.push_back(out.loss.item_double());
    state = std::move(out.state);
  }
  const nn::NamedTensors ref = run_reference("transformer_xl.py", dir.path(), *lm, inputs);
  for (int k = 0; k < 3; ++k) {
    INFO("segment " << k);
    CHECK(losses[static_cast<std::size_t>(k)] ==
          Approx(named(ref, "loss" + std::to_string(k)).item_double()).epsilon(1e-12));
  }
  for (int l = 0; l < 2; ++l) {
    const std::string m = "mem" + std::to_string(l);
    REQUIRE(state.count(m));
    test::check_close(state.at(m), named(ref, m), 1e-12, 1e-12, m);
  }
}

// The translation Transformer (pre-norm, 2 + 2 layers, embedding scaled by sqrt(d_model) plus
// sinusoids, tied output) against torch.nn.Transformer as bench/peers/nmt_torch.py drives it:
// teacher-forced logits, and beam search (beam 3, at most 6 tokens before eos) giving the same
// translations through the peer's own incremental decoder and fairseq-style search.
TEST_CASE("reference equality: the translation Transformer equals torch.nn.Transformer, logits and beam search",
          "[models][reference][beam]") {
  REQUIRE_PYTORCH();
  const std::int64_t V = 24, B = 3, S = 6, T = 5;
  Generator gen(3);
  const Config cfg = Config::from_text(R"({"model": {"type": "transformer_nmt", "vocab_size": 24,
      "input": {"type": "embedding", "dim": 8}, "d_model": 8, "heads": 2, "ffn_dim": 12, "encoder_layers": 2,
      "decoder_layers": 2, "pre_norm": true, "dropout": {"residual": 0}}})",
                                       "<test>");
  auto m =
      std::dynamic_pointer_cast<models::TranslationModel>(models::build_model(cfg.section("model"), V, gen).module);
  REQUIRE(m);
  m->to(DType::Float64);
  test::randomise(*m, gen);
  m->eval();
  // Sources of words (ids 4 and up) ending in eos (3), no padding; target inputs start with bos (2).
  std::vector<std::int64_t> src(static_cast<std::size_t>(S * B)), tgt(static_cast<std::size_t>(T * B));
  for (std::int64_t s = 0; s < S; ++s)
    for (std::int64_t b = 0; b < B; ++b)
      src[static_cast<std::size_t>(s * B + b)] = s + 1 == S ? 3 : 4 + (5 * s + 7 * b + s * b) % (V - 4);
  for (std::int64_t t = 0; t < T; ++t)
    for (std::int64_t b = 0; b < B; ++b)
      tgt[static_cast<std::size_t>(t * B + b)] = t == 0 ? 2 : 4 + (3 * t + 5 * b) % (V - 4);
  const Tensor src_tb = from_vector(src, {S, B}), tgt_tb = from_vector(tgt, {T, B});
  const Tensor logits = m->logits(src_tb, tgt_tb);  // [T, B, V]
  const auto hyps = models::beam_search(*m, src_tb, {.beam = 3, .max_len_a = 0, .max_len_b = 6, .bos = 2, .eos = 3});

  test::TempDir dir;
  dir.write("config.json",
            R"({"vocab": 24, "d_model": 8, "heads": 2, "ffn": 12, "layers": 2, "beam": 3, "max_len": 6})");
  const nn::NamedTensors ref =
      run_reference("transformer_nmt.py", dir.path(), *m,
                    {{"src", contiguous(transpose(src_tb, 0, 1))}, {"tgt_in", contiguous(transpose(tgt_tb, 0, 1))}});
  test::check_close(contiguous(transpose(logits, 0, 1)), named(ref, "logits"), 1e-12, 1e-12, "teacher-forced logits");
  const Tensor& beam = named(ref, "beam");
  for (std::int64_t b = 0; b < B; ++b) {
    CAPTURE(b);
    std::vector<std::int64_t> want;
    for (std::int64_t j = 0; j < beam.size(1); ++j)
      if (const std::int64_t id = beam.data<std::int64_t>()[b * beam.size(1) + j]; id >= 0) want.push_back(id);
    const std::vector<std::int32_t>& got = hyps[static_cast<std::size_t>(b)][0].tokens;
    CHECK(std::vector<std::int64_t>(got.begin(), got.end()) == want);
    CHECK_FALSE(got.empty());
  }
}

// DeLighT's block against tests/reference/delight_block.py, a transcription of the papers'
// equations and the released code's description (the DExTra schedule, group linear transforms with
// the shuffle and per-chunk norm, the input mixer, single-head attention, the light FFN) that
// shares only parameter names with define: a pre-norm causal block as the LM stacks them (N = 5,
// odd: groups 2, 4, 4, 4, 2) and a post-norm decoder block with encoder attention (N = 4).
TEST_CASE("reference equality: DeLighT blocks equal a PyTorch transcription of the papers' equations",
          "[models][reference][delight]") {
  REQUIRE_PYTORCH();
  struct Case {
    nn::DelightBlockConfig cfg;
    const char* json;
  };
  const Case cases[] = {
      {{.d_m = 64, .depth = 5, .width_mult = 1.5, .max_groups = 4, .pre_norm = true, .cross_attention = false},
       R"({"d_m": 64, "depth": 5, "width_mult": 1.5, "max_groups": 4, "pre_norm": true, "causal": true,
           "cross_attention": false})"},
      {{.d_m = 64, .depth = 4, .width_mult = 2.0, .max_groups = 4, .pre_norm = false, .cross_attention = true},
       R"({"d_m": 64, "depth": 4, "width_mult": 2.0, "max_groups": 4, "pre_norm": false, "causal": true,
           "cross_attention": true})"},
  };
  for (const Case& c : cases) {
    CAPTURE(c.json);
    Generator gen(11);
    nn::DelightDecoderBlock block(c.cfg, gen);
    block.to(DType::Float64);
    test::randomise(block, gen);
    block.eval();
    const Tensor x = detach(test::random_leaf({7, 2, 64}, gen)), memory = detach(test::random_leaf({5, 2, 64}, gen));
    const Tensor y = c.cfg.cross_attention ? block.forward(x, memory) : block.forward(x);
    test::TempDir dir;
    dir.write("config.json", c.json);
    nn::NamedTensors inputs = {{"x", x}};
    if (c.cfg.cross_attention) inputs.emplace_back("memory", memory);
    const nn::NamedTensors ref = run_reference("delight_block.py", dir.path(), block, inputs);
    test::check_close(y, named(ref, "y"), 1e-12, 1e-12, "block output");
  }
}

// scripts/import_txl_checkpoint.py on a checkpoint in the reference code's layout (kimiyoung's
// MemTransformerLM names, its pos_emb buffer included) that the PyTorch peer wrote from define's
// weights: the converted file holds exactly define's state-dict names with the original float32
// values, loads strictly into a fresh model, which then gives the peer's loss; a name with no place
// in define's Transformer-XL is refused by name.
TEST_CASE("reference equality: a reference-layout Transformer-XL checkpoint imports into define",
          "[models][reference]") {
  REQUIRE_PYTORCH();
  const std::string model_json = R"({"type": "transformer_xl", "input": {"type": "projected", "dim": 8,
      "cutoffs": [10, 20]}, "d_model": 8, "n_head": 2, "d_head": 3, "d_inner": 12, "n_layer": 2, "dropout": 0,
      "mem_len": 4})";
  const std::int64_t V = 30;
  Generator gen(5);
  const Config cfg = Config::from_text(R"({"model": )" + model_json + "}", "<test>");
  auto original =
      std::dynamic_pointer_cast<models::LanguageModel>(models::build_model(cfg.section("model"), V, gen).module);
  test::randomise(*original, gen);  // float32, as the reference's checkpoints
  original->eval();
  test::TempDir dir;
  dir.write("config.json", R"({"vocab": 30, "d_model": 8, "n_head": 2, "d_head": 3, "d_inner": 12, "n_layer": 2,
                              "mem_len": 4, "cutoffs": [10, 20]})");
  const Tensor tokens = token_window(5, 2, V, 3), targets = token_window(5, 2, V, 4);
  const nn::NamedTensors ref =
      run_reference("reference_layout.py", dir.path(), *original, {{"tokens0", tokens}, {"targets0", targets}});

  const fs::path converted = dir.path() / "converted.safetensors", log = dir.path() / "import.log";
  const std::string script = std::string(DEFINE_SOURCE_DIR) + "/scripts/import_txl_checkpoint.py";
  const int rc = std::system((python() + " " + script + " " + (dir.path() / "reference.pt").string() + " " +
                              converted.string() + " > " + log.string() + " 2>&1")
                                 .c_str());
  INFO(test::read_all(log));
  REQUIRE(rc == 0);
  nn::StateDict imported;
  for (auto& [name, t] : nn::load_safetensors(converted.string()).tensors) imported.insert(name, t);
  const nn::StateDict want = original->state_dict();
  REQUIRE(imported.size() == want.size());
  for (const auto& [name, t] : want) {
    CAPTURE(name);
    REQUIRE(imported.contains(name));
    CHECK(test::values(imported.at(name)) == test::values(t));  // bit for bit
  }
  Generator other(99);
  auto fresh =
      std::dynamic_pointer_cast<models::LanguageModel>(models::build_model(cfg.section("model"), V, other).module);
  fresh->load_state_dict(imported);  // strict
  fresh->eval();
  CHECK(fresh->forward(tokens, targets, {}).loss.item_double() ==
        Approx(named(ref, "loss0").item_double()).epsilon(1e-5));  // float32 in both

  // A name define has no place for is refused, naming it.
  const fs::path odd = dir.path() / "odd.pt";
  REQUIRE(std::system((python() + " -c \"import torch; torch.save({'layers.0.dec_attn.r_emb': torch.zeros(2)}, '" +
                       odd.string() + "')\"")
                          .c_str()) == 0);
  const int bad = std::system((python() + " " + script + " " + odd.string() + " " +
                               (dir.path() / "odd.safetensors").string() + " > " + log.string() + " 2>&1")
                                  .c_str());
  CHECK(bad != 0);
  CHECK_THAT(test::read_all(log), Catch::Contains("no define parameter for layers.0.dec_attn.r_emb"));
}
