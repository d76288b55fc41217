// `define train` end to end on a tiny generated corpus (train/lm_trainer.h): the run folder's
// files, exact resume (a run interrupted and resumed ends with bit-identical weights and logs the
// same losses as an uninterrupted one), refusal of a corrupted checkpoint, a NaN loss stopping the
// run with a clear error, config errors naming the key, and training on the emulated GPU.
#include <catch2/catch.hpp>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "core/config.h"
#include "core/error.h"
#include "kernels/cuda/device.h"
#include "nn/checkpoint.h"
#include "support/common.h"
#include "support/runs.h"
#include "train/lm_trainer.h"
#include "train/training_loop.h"

using namespace define;
using Catch::Contains;
using define::test::read_all;
namespace fs = std::filesystem;

namespace {

// An empty folder `name` under the temporary directory with the tiny corpus in its data/.
fs::path fresh_root(const std::string& name) { return test::fresh_root(name, 12345, 400, 30); }

constexpr const char* kDefineInput = R"({"type": "define", "dim": 8, "out_dim": 12, "k": 16, "depth": 2, "g_max": 2})";

std::string config_text(const fs::path& data, int max_steps, const std::string& input = kDefineInput) {
  return R"({"data": {"dir": ")" + data.string() +
         R"(", "batch_size": 4, "eval_batch_size": 2, "test_batch_size": 2, "bptt": 8},
    "model": {"type": "lstm_lm", "input": )" +
         input + R"(, "hidden": 10, "layers": 2,
              "dropout": {"embedding": 0.1, "input": 0.2, "hidden": 0.2, "output": 0.2, "weight": 0.3}},
    "train": {"optimizer": "ntasgd", "lr": 5, "max_steps": )" +
         std::to_string(max_steps) + R"(, "log_interval": 1, "checkpoint_interval": 3, "threads": 1}})";
}

std::vector<std::string> train_lines(const fs::path& run) {
  std::ifstream f(run / "metrics.jsonl");
  std::vector<std::string> out;
  for (std::string line; std::getline(f, line);)
    if (line.find("\"event\":\"train\"") != std::string::npos) {
      // Drop the fields that depend on the clock or the process.
      std::string keep;
      for (const char* key : {"\"loss\":", "\"step\":"}) {
        const auto at = line.find(key);
        keep += line.substr(at, line.find_first_of(",}", at) - at) + " ";
      }
      out.push_back(keep);
    }
  return out;
}

// The loss of the last "valid" event in metrics.jsonl, and whether that event is the validation at
// the end of a budget.
std::pair<double, bool> last_validation(const fs::path& run) {
  const std::vector<nlohmann::json> valid = test::events(run, "valid");
  if (valid.empty()) return {std::nan(""), false};
  return {valid.back()["loss"].get<double>(), valid.back().contains("end_of_budget")};
}

}  // namespace

TEST_CASE("train: resume continues exactly, corrupted checkpoints are refused", "[cli][train]") {
  const fs::path root = fresh_root("define_train_test");

  Config whole = Config::from_text(config_text(root / "data", 9), "<test>");
  const train::TrainResult a = train::train_language_model(whole, (root / "a").string(), false);
  CHECK(a.steps == 9);
  for (const char* f : {"config.json", "metrics.jsonl", "vocab.txt", "latest.ckpt"}) CHECK(fs::exists(root / "a" / f));
  // 9 steps end inside the first epoch: the end of the budget validates the weights it stops with,
  // and they are the best so far, so the final numbers are theirs.
  REQUIRE(fs::exists(root / "a" / "best.ckpt"));
  CHECK(nn::load_checkpoint((root / "a" / "best.ckpt").string()).run.at("step") == "9");
  const auto [a_valid, a_at_end] = last_validation(root / "a");
  CHECK(a_at_end);
  CHECK(a_valid == a.valid_loss);

  Config first = Config::from_text(config_text(root / "data", 5), "<test>");
  train::train_language_model(first, (root / "b").string(), false);
  // A new run never overwrites another's folder.
  Config again = Config::from_text(config_text(root / "data", 5), "<test>");
  CHECK_THROWS_WITH(train::train_language_model(again, (root / "b").string(), false), Contains("already holds a run"));
  Config rest = Config::from_text(config_text(root / "data", 9), "<test>");
  const train::TrainResult b = train::train_language_model(rest, (root / "b").string(), true);
  CHECK(b.steps == 9);

  const auto la = train_lines(root / "a"), lb = train_lines(root / "b");
  REQUIRE(la.size() == 9);
  CHECK(lb == la);  // steps 1-5, then 6-9 after the resume: the same losses
  const nn::Checkpoint ca = nn::load_checkpoint((root / "a" / "latest.ckpt").string());
  const nn::Checkpoint cb = nn::load_checkpoint((root / "b" / "latest.ckpt").string());
  REQUIRE(ca.model.size() == cb.model.size());
  for (const auto& [name, t] : ca.model) CHECK(t.to_vector<float>() == cb.model.at(name).to_vector<float>());
  // b's validation at the end of its first budget (step 5) is not part of the resumed run's history:
  // both end with the same validation and the same best.
  CHECK(last_validation(root / "b") == last_validation(root / "a"));
  CHECK(a.valid_loss == b.valid_loss);

  // A truncated checkpoint is refused, and the run folder is left as it was.
  const std::string good = read_all(root / "b" / "latest.ckpt");
  {
    std::ofstream f(root / "b" / "latest.ckpt", std::ios::binary | std::ios::trunc);
    f.write(good.data(), static_cast<std::streamsize>(good.size() / 2));
  }
  Config resume = Config::from_text(config_text(root / "data", 12), "<test>");
  CHECK_THROWS_WITH(train::train_language_model(resume, (root / "b").string(), true), Contains("corrupt"));
  fs::remove_all(root);
}

TEST_CASE("train: full epochs validate, keep the best checkpoint and average under NT-ASGD", "[cli][train]") {
  const fs::path root = fresh_root("define_train_test_epochs");
  std::string text = config_text(root / "data", 0, R"({"type": "embedding", "dim": 16})");
  const std::string from = "\"log_interval\": 1,";
  text.replace(text.find(from), from.size(), "\"log_interval\": 50, \"epochs\": 3, \"nonmono\": 1,");
  Config cfg = Config::from_text(text, "<test>");
  // Learning, not regularisation, is under test here.
  for (const char* k : {"embedding", "input", "hidden", "output", "weight"})
    cfg.set(std::string("model.dropout.") + k + "=0");
  cfg.set("model.hidden=32");
  cfg.set("train.lr=10");
  cfg.set("train.epochs=3");
  const train::TrainResult r = train::train_language_model(cfg, (root / "run").string(), false);
  CHECK(fs::exists(root / "run" / "best.ckpt"));
  std::ifstream f(root / "run" / "metrics.jsonl");
  int valid_events = 0, final_events = 0;
  for (std::string line; std::getline(f, line);) {
    valid_events += line.find("\"event\":\"valid\"") != std::string::npos;
    final_events += line.find("\"event\":\"final\"") != std::string::npos;
  }
  CHECK(valid_events == 3);
  CHECK(final_events == 1);
  // A 40-word language where each word is followed by the next with probability 0.7: its
  // entropy is about 1.72 nats (perplexity 5.6); the uniform guess is 41. The bound must hold for
  // every mix of CPU GEMM libraries: each shape class's library is chosen by timing on the machine
  // (kernels/cpu/gemm_provider.h), and at lr 10 their roundings move the validation perplexity
  // between 10.9 and 12.9 (seen on one AMD EPYC: each library alone, and a mix ctest's order chose).
  CHECK(std::exp(r.valid_loss) < 15.0);
  CHECK(std::exp(r.test_loss) < 15.0);
  fs::remove_all(root);
}

TEST_CASE("train: a diverging run stops with a clear error, config errors name the key", "[cli][train]") {
  const fs::path root = fresh_root("define_train_test_errors");
  std::string text = config_text(root / "data", 50);
  text.replace(text.find("\"lr\": 5"), 7, "\"lr\": 1e30, \"clip\": 0");
  Config diverge = Config::from_text(text, "<test>");
  CHECK_THROWS_WITH(train::train_language_model(diverge, (root / "nan").string(), false),
                    Contains("the training loss became"));

  Config typo = Config::from_text(config_text(root / "data", 2), "<test>");
  typo.set("train.learning_rate=3");
  CHECK_THROWS_WITH(train::train_language_model(typo, (root / "typo").string(), false),
                    Contains("unknown config key 'train.learning_rate'"));
  Config missing = Config::from_text(config_text(root / "data", 2), "<test>");
  missing.set("data.dir=\"" + (root / "nowhere").string() + "\"");
  CHECK_THROWS_WITH(train::train_language_model(missing, (root / "missing").string(), false), Contains("nowhere"));
  fs::remove_all(root);
}

TEST_CASE("train: config mistakes are reported before any data is read", "[cli][train]") {
  // A corpus whose training split is empty: reading it fails, so each error below must come first.
  const fs::path root = fresh_root("define_train_test_early");
  const fs::path empty = root / "empty";
  fs::create_directories(empty);
  for (const char* f : {"train.txt", "valid.txt", "test.txt"}) std::ofstream(empty / f).put('\n');
  std::ofstream(empty / "train.txt", std::ios::trunc);  // 0 bytes
  const auto attempt = [&](const std::vector<std::string>& sets) {
    Config c = Config::from_text(config_text(empty, 20), "<test>");
    for (const std::string& s : sets) c.set(s);
    train::train_language_model(c, (root / "run").string(), false);
  };
  CHECK_THROWS_WITH(attempt({}), Contains("is empty"));  // the data is read when the config is fine
  CHECK_THROWS_WITH(attempt({"model.hiden=3"}), Contains("unknown config key 'model.hiden'"));
  CHECK_THROWS_WITH(attempt({"model.input.dept=3"}), Contains("unknown config key 'model.input.dept'"));
  CHECK_THROWS_WITH(attempt({"train.optimizer=adamx"}), Contains("unknown train.optimizer 'adamx'"));
  CHECK_THROWS_WITH(attempt({"train.optimizer=adam", "train.schedule=cosine", "train.warmup_steps=30"}),
                    Contains("needs more steps (20"));
  CHECK_THROWS_WITH(attempt({"train.optimizer=adam", "train.schedule=cosin"}),
                    Contains("unknown train.schedule 'cosin'"));
  // A shape the model refuses, found by building it with a stand-in vocabulary.
  CHECK_THROWS_WITH(attempt({"model.input.g_max=3"}), Contains("g_max must be a power of two, got 3"));
  // Both ways of naming the corpus in one config: refused, naming the two keys.
  CHECK_THROWS_WITH(attempt({"data.corpus=ptb"}), Contains("data.dir and data.corpus both say where the corpus is"));
  fs::remove_all(root);
}

namespace {

Config config_with(const fs::path& data, int max_steps, const std::vector<std::string>& sets,
                   const std::string& input = kDefineInput) {
  Config c = Config::from_text(config_text(data, max_steps, input), "<test>");
  for (const std::string& s : sets) c.set(s);
  return c;
}

std::map<std::string, std::vector<float>> weights_of(const fs::path& checkpoint) {
  std::map<std::string, std::vector<float>> out;
  for (const auto& [name, t] : nn::load_checkpoint(checkpoint.string()).model) out[name] = t.to_vector<float>();
  return out;
}

}  // namespace

TEST_CASE("train: --init-from starts a new run from another run's weights, checking names, shapes and vocabulary",
          "[cli][train]") {
  const fs::path root = fresh_root("define_train_test_init_from");
  Config base = config_with(root / "data", 6, {});
  train::train_language_model(base, (root / "a").string(), false);

  // With a learning rate of ~0 the fine-tuned run's weights stay the ones it loaded: a's best.
  train::StartOptions from_a;
  from_a.init_from = (root / "a").string();
  Config still = config_with(root / "data", 2, {"train.optimizer=sgd", "train.lr=1e-30"});
  train::train_language_model(still, (root / "b").string(), from_a);
  const auto a_best = weights_of(root / "a" / "best.ckpt"), b_last = weights_of(root / "b" / "latest.ckpt");
  REQUIRE(a_best.size() == b_last.size());
  for (const auto& [name, w] : a_best) CHECK(b_last.at(name) == w);
  const std::vector<nlohmann::json> init = test::events(root / "b", "init_from");
  REQUIRE(init.size() == 1);
  CHECK(init[0]["tensors_loaded"].get<double>() == static_cast<double>(a_best.size()));
  CHECK(init[0]["tensors_not_found"].get<double>() == 0);
  CHECK(init[0]["checkpoint"].get<std::string>() == (root / "a" / "best.ckpt").string());
  // Its vocabulary is a's, and it starts at step 1 with a fresh optimizer and schedule.
  CHECK(read_all(root / "b" / "vocab.txt") == read_all(root / "a" / "vocab.txt"));
  CHECK(test::events(root / "b", "train").front()["step"].get<double>() == 1);

  // A model with another token representation: the LSTM and output tensors load, the
  // embedding's are named as not found and stay as initialised.
  train::StartOptions from_file;
  from_file.init_from = (root / "a" / "latest.ckpt").string();
  Config other = config_with(root / "data", 1, {}, R"({"type": "projective", "dim": 8, "out_dim": 12})");
  train::train_language_model(other, (root / "c").string(), from_file);
  const nlohmann::json partial = test::events(root / "c", "init_from").at(0);
  CHECK(partial["tensors_not_found"].get<double>() >= 1);
  CHECK(partial["not_found"].get<std::string>().find("input") != std::string::npos);
  CHECK(partial["unused"].get<std::string>().find("input") != std::string::npos);
  CHECK(partial["tensors_loaded"].get<double>() >= 1);

  // A shape that differs is refused naming the tensor and both shapes.
  Config wider = config_with(root / "data", 1, {"model.hidden=14"});
  CHECK_THROWS_WITH(train::train_language_model(wider, (root / "d").string(), from_a),
                    Contains("shape mismatch for 'rnn.module.weight_ih_l0': checkpoint [40,12] vs model [56,12]"));
  // A checkpoint beside another vocabulary (two words swapped) is refused: its ids mean other words.
  fs::create_directories(root / "swapped");
  fs::copy_file(root / "a" / "best.ckpt", root / "swapped" / "best.ckpt");
  {
    std::string v = read_all(root / "a" / "vocab.txt");
    const std::size_t first_end = v.find('\n'), second_end = v.find('\n', first_end + 1);
    v = v.substr(first_end + 1, second_end - first_end) + v.substr(0, first_end + 1) + v.substr(second_end + 1);
    std::ofstream(root / "swapped" / "vocab.txt", std::ios::binary) << v;
  }
  from_file.init_from = (root / "swapped" / "best.ckpt").string();
  CHECK_THROWS_WITH(train::train_language_model(base, (root / "e").string(), from_file),
                    Contains("its vocab is") && Contains("the token ids would mean other tokens"));
  fs::remove(root / "swapped" / "vocab.txt");
  CHECK_THROWS_WITH(train::train_language_model(base, (root / "f").string(), from_file), Contains("no vocab.txt in"));
  from_file.init_from = (root / "nothing.ckpt").string();
  CHECK_THROWS_WITH(train::train_language_model(base, (root / "g").string(), from_file),
                    Contains("neither a run folder nor a checkpoint file"));
  train::StartOptions both(true);
  both.init_from = (root / "a").string();
  CHECK_THROWS_WITH(train::train_language_model(base, (root / "a").string(), both),
                    Contains("cannot be combined with --resume"));
  fs::remove_all(root);
}

TEST_CASE(
    "train: --reset-schedule restarts the schedule at the resumed step, --reset-optimizer drops the optimizer's state",
    "[cli][train]") {
  const fs::path root = fresh_root("define_train_test_reset");
  const std::vector<std::string> cosine = {"train.optimizer=adam",   "train.lr=0.01",
                                           "train.schedule=cosine",  "train.warmup_steps=2",
                                           "train.schedule_steps=6", "train.checkpoint_interval=1"};
  const auto lrs = [](const fs::path& run) {
    std::vector<double> out;
    for (const auto& e : test::events(run, "train")) out.push_back(e["lr"].get<double>());
    return out;
  };
  Config fresh = config_with(root / "data", 5, cosine);
  train::train_language_model(fresh, (root / "fresh").string(), false);
  const std::vector<double> schedule = lrs(root / "fresh");  // steps 1-5 of the 6-step schedule
  REQUIRE(schedule.size() == 5);

  Config first = config_with(root / "data", 3, cosine);
  train::train_language_model(first, (root / "r").string(), false);
  train::StartOptions reset(true);
  reset.reset_schedule = true;
  Config more = config_with(root / "data", 5, cosine);
  train::train_language_model(more, (root / "r").string(), reset);
  // A plain resume after it continues the restarted schedule (its origin is in the checkpoint).
  Config rest = config_with(root / "data", 8, cosine);
  train::train_language_model(rest, (root / "r").string(), true);
  const std::vector<double> got = lrs(root / "r");
  REQUIRE(got.size() == 8);
  for (int i = 0; i < 3; ++i) CHECK(got[static_cast<std::size_t>(i)] == schedule[static_cast<std::size_t>(i)]);
  for (int i = 3; i < 8; ++i) CHECK(got[static_cast<std::size_t>(i)] == schedule[static_cast<std::size_t>(i - 3)]);
  CHECK(test::events(root / "r", "reset").size() == 1);

  // Switching the optimizer on a resume needs its state dropped.
  std::vector<std::string> sgd = cosine;
  sgd[0] = "train.optimizer=sgd";
  Config switched = config_with(root / "data", 9, sgd);
  CHECK_THROWS(train::train_language_model(switched, (root / "r").string(), true));
  train::StartOptions drop(true);
  drop.reset_optimizer = true;
  Config switched_again = config_with(root / "data", 9, sgd);
  CHECK(train::train_language_model(switched_again, (root / "r").string(), drop).steps == 9);
  train::StartOptions not_resumed;
  not_resumed.reset_optimizer = true;
  CHECK_THROWS_WITH(train::train_language_model(fresh, (root / "x").string(), not_resumed),
                    Contains("apply to a resumed run"));
  fs::remove_all(root);
}

TEST_CASE("train: train.device runs the same training on the emulated GPU, unknown devices are refused",
          "[cli][train]") {
  // The emulated device runs the CUDA kernels (LSTM cells, GLT, split-mix, LayerNorm, dropout on
  // the shared Philox stream, ...) on the CPU: the same losses as the CPU run, to float32 rounding.
  const fs::path root = fresh_root("define_train_test_device");
  Config on_cpu = Config::from_text(config_text(root / "data", 4), "<test>");
  const train::TrainResult c = train::train_language_model(on_cpu, (root / "cpu").string(), false);
  Config on_emu = Config::from_text(config_text(root / "data", 4), "<test>");
  on_emu.set("train.device=\"emu\"");
  const train::TrainResult e = train::train_language_model(on_emu, (root / "emu").string(), false);
  const auto lc = train_lines(root / "cpu"), le = train_lines(root / "emu");
  REQUIRE(lc.size() == 4);
  REQUIRE(le.size() == 4);
  for (std::size_t i = 0; i < lc.size(); ++i) {
    const double a = std::stod(lc[i].substr(lc[i].find(':') + 1)), b = std::stod(le[i].substr(le[i].find(':') + 1));
    INFO("step " << i + 1 << ": cpu " << a << ", emu " << b);
    CHECK(std::abs(a - b) <= 1e-4 * std::abs(a));
  }
  CHECK(std::abs(e.valid_loss - c.valid_loss) <= 1e-4 * c.valid_loss);
  // The checkpoint holds host tensors whatever the device: it loads and resumes on the CPU.
  const nn::Checkpoint ck = nn::load_checkpoint((root / "emu" / "latest.ckpt").string());
  for (const auto& [name, t] : ck.model) CHECK(t.device().is_cpu());
  Config resume = Config::from_text(config_text(root / "data", 6), "<test>");
  CHECK(train::train_language_model(resume, (root / "emu").string(), true).steps == 6);

  for (const char* bad : {"\"cuda:7\"", "\"tpu\""}) {
    Config cfg = Config::from_text(config_text(root / "data", 2), "<test>");
    cfg.set(std::string("train.device=") + bad);
    CHECK_THROWS_WITH(train::train_language_model(cfg, (root / "bad").string(), false), Contains("train.device"));
  }
  fs::remove_all(root);
}

TEST_CASE("train: train.unit_lr_scale steps the DeFINE unit at its own learning rate", "[cli][train]") {
  // One SGD step from the same weights and batch at unit lr scales 1, 1/2 and 1/4: the update is
  // linear in the lr (weight decay included), so the unit's weights differ between the runs by
  // steps in the ratio 2 : 1, and every other weight is the same in all three.
  const fs::path root = fresh_root("define_train_test_unit_lr");
  std::map<std::string, Tensor> weights[3];
  const char* scales[] = {"1", "0.5", "0.25"};
  for (int i = 0; i < 3; ++i) {
    std::string text = config_text(root / "data", 1);
    text.replace(text.find("\"optimizer\": \"ntasgd\""), 21, "\"optimizer\": \"sgd\", \"clip\": 0");
    Config cfg = Config::from_text(text, "<test>");
    cfg.set(std::string("train.unit_lr_scale=") + scales[i]);
    train::train_language_model(cfg, (root / scales[i]).string(), false);
    for (auto& [name, t] : nn::load_checkpoint((root / scales[i] / "latest.ckpt").string()).model) weights[i][name] = t;
  }
  int unit_tensors = 0;
  for (const auto& [name, full] : weights[0]) {
    const auto a = full.to_vector<float>(), b = weights[1][name].to_vector<float>();
    const auto c = weights[2][name].to_vector<float>();
    double ab = 0, bc = 0, mismatch = 0;
    for (std::size_t j = 0; j < a.size(); ++j) {
      ab += std::abs(double(a[j]) - b[j]);
      bc += std::abs(double(b[j]) - c[j]);
      mismatch = std::max(mismatch, std::abs((double(a[j]) - b[j]) - 2 * (double(b[j]) - c[j])));
    }
    INFO(name);
    if (name.rfind("input.unit.", 0) == 0) {
      ++unit_tensors;
      CHECK(bc > 0);
      CHECK(ab == Approx(2 * bc).epsilon(1e-3));
      CHECK(mismatch <= 1e-5);
    } else {
      CHECK(ab == 0);
      CHECK(bc == 0);
    }
  }
  // Two GLT layers (weight, bias, LayerNorm gain and bias each) and the reduce (weight, bias).
  CHECK(unit_tensors == 10);

  Config no_unit = Config::from_text(config_text(root / "data", 1, R"({"type": "embedding", "dim": 8})"), "<test>");
  no_unit.set("train.unit_lr_scale=0.5");
  CHECK_THROWS_WITH(train::train_language_model(no_unit, (root / "no_unit").string(), false),
                    Contains("train.unit_lr_scale is set but the model has no token-representation unit"));
  fs::remove_all(root);
}

TEST_CASE("train: a step on the emulated GPU copies to the host only the loss it logs", "[cli][train][emu]") {
  // Everything a training step computes stays on the device: the index checks run in the kernels,
  // the gradient norm is clipped there, and the loss and norm of the steps wait there until a log
  // line needs them (one copy for the whole window). Step 1 also pays for setting up the run.
  const fs::path root = fresh_root("define_train_device_copies");
  Config cfg = Config::from_text(config_text(root / "data", 7), "<test>");
  cfg.set("train.device=\"emu\"");
  cfg.set("train.log_interval=3");
  cfg.set("train.checkpoint_interval=0");
  std::vector<std::uint64_t> copies;
  train::set_step_observer([&](std::int64_t) {
    copies.push_back(cuda_emu::device_to_host_copies());
    cuda_emu::reset_device_to_host_copies();
  });
  const train::TrainResult r = train::train_language_model(cfg, (root / "run").string(), false);
  train::set_step_observer({});
  REQUIRE(r.steps == 7);
  REQUIRE(copies.size() == 7);
  // Steps 2 to 7; lines are logged after steps 3 and 6.
  CHECK(std::vector<std::uint64_t>(copies.begin() + 1, copies.end()) == std::vector<std::uint64_t>{0, 1, 0, 0, 1, 0});
  CHECK(train_lines(root / "run").size() == 2);
  fs::remove_all(root);
}
