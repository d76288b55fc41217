// Training speed and memory of an LSTM language model in define and in PyTorch (the peer,
// bench/scripts/lstm_lm_torch.py, Debian's python3-torch), same architecture, batch, sequence
// length and thread count, printed as ratios from one run, next to the physical limit.
//
//   lm_train_bench [--emb 200] [--hidden 200] [--layers 2] [--vocab 10000] [--batch 20]
//                  [--bptt 35] [--steps 60] [--threads 2] [--no-peer]
//
// Model: tied embedding (emb) -> LSTM layers (hidden, last layer emb wide) -> softmax over the
// vocabulary; SGD with gradient-norm clipping; random tokens (the speed does not depend on them).
// Memory: each framework runs in its own process (define: this one, measured before the peer
// starts) and reports its peak resident set (VmHWM / ru_maxrss).
// Physical limit: FLOPs per token (3x the forward GEMMs: LSTM gates and the softmax) over the
// float32 GEMM rate define measures on this machine in the same run (the best any framework can
// do with these GEMMs), printed as a multiple of PyTorch's tokens/s.
#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <omp.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "autograd/ops.h"
#include "bench/bench_util.h"
#include "core/config.h"
#include "core/omp_wait.h"
#include "models/registry.h"
#include "models/lstm_lm.h"
#include "nn/optim/optim.h"
#include "tools/run_log.h"

using namespace define;

namespace {

struct Args {
  std::int64_t emb = 200, hidden = 200, layers = 2, vocab = 10000, batch = 20, bptt = 35, steps = 60, threads = 2;
  bool peer = true;
};

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string k = argv[i];
    auto next = [&] { return std::stoll(argv[++i]); };
    if (k == "--no-peer") a.peer = false;
    else if (i + 1 >= argc) throw std::runtime_error("option " + k + " needs a value");
    else if (k == "--emb") a.emb = next();
    else if (k == "--hidden") a.hidden = next();
    else if (k == "--layers") a.layers = next();
    else if (k == "--vocab") a.vocab = next();
    else if (k == "--batch") a.batch = next();
    else if (k == "--bptt") a.bptt = next();
    else if (k == "--steps") a.steps = next();
    else if (k == "--threads") a.threads = next();
    else throw std::runtime_error("unknown option " + k);
  }
  return a;
}

double define_tokens_per_s(const Args& a) {
  const std::string json = fmt::format(
      R"({{"type": "lstm_lm", "vocab_size": {}, "input": {{"type": "embedding", "dim": {}}}, "hidden": {}, "layers": {}}})",
      a.vocab, a.emb, a.hidden, a.layers);
  const Config cfg = Config::from_text(fmt::format(R"({{"model": {}}})", json), "<bench>");
  Generator gen(0);
  auto model = std::dynamic_pointer_cast<models::LstmLM>(models::build_model(cfg.section("model"), 0, gen).module);
  const auto params = model->named_parameters();
  optim::SGD opt(params, {.lr = 1.0});
  const std::int64_t warmup = 5;
  const Tensor data = rand_int({a.bptt * (a.steps + warmup) + 1, a.batch}, a.vocab, {.dtype = DType::Int64}, gen);
  nn::LSTMState state;
  std::chrono::steady_clock::time_point start;
  for (std::int64_t step = 0; step < a.steps + warmup; ++step) {
    if (step == warmup) start = std::chrono::steady_clock::now();
    const Tensor x = contiguous(narrow(data, 0, step * a.bptt, a.bptt));
    const Tensor y = contiguous(narrow(data, 0, step * a.bptt + 1, a.bptt));
    opt.zero_grad();
    auto out = model->forward(x, y, nn::detach(state));
    backward(out.loss);
    state = std::move(out.state);
    optim::clip_grad_norm(params, 0.25);
    opt.step();
  }
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return static_cast<double>(a.steps * a.bptt * a.batch) / s;
}

double gemm_gflops() {
  Generator gen(1);
  const Tensor x = rand_normal({1024, 1024}, 0, 1, {}, gen), y = rand_normal({1024, 1024}, 0, 1, {}, gen);
  NoGradGuard g;
  const double s = bench::best_seconds([&] { (void)matmul(x, y); });
  return 2.0 * 1024 * 1024 * 1024 / s / 1e9;
}

}  // namespace

int main(int argc, char** argv) {
  prefer_passive_omp_wait(argv);  // the same policy as the define CLI and as the peer below
  const Args a = parse(argc, argv);
  omp_set_num_threads(static_cast<int>(a.threads));
  const double define_tps = define_tokens_per_s(a);
  const double define_mem = static_cast<double>(cli::peak_rss_bytes());
  const double rate = gemm_gflops();
  // Forward FLOPs per token: each LSTM layer 2 * 4H(I + H), the tied softmax 2 * V * emb; training
  // is about 3x the forward (the backward has two GEMMs per forward GEMM).
  double fwd = 2.0 * static_cast<double>(a.vocab * a.emb);
  std::int64_t in = a.emb;
  for (std::int64_t l = 0; l < a.layers; ++l) {
    const std::int64_t h = l + 1 == a.layers ? a.emb : a.hidden;
    fwd += 2.0 * 4 * static_cast<double>(h * (in + h));
    in = h;
  }
  const double limit_tps = rate * 1e9 / (3 * fwd);
  fmt::print("LSTM LM training, emb {} hidden {} x {} layers, V {}, batch {}, bptt {}, {} threads\n", a.emb, a.hidden,
             a.layers, a.vocab, a.batch, a.bptt, a.threads);
  fmt::print("define : {:9.0f} tokens/s, peak RSS {:7.1f} MiB\n", define_tps, define_mem / (1 << 20));
  fmt::print("limit  : {:9.0f} tokens/s ({:.1f} MFLOP/token at the measured {:.0f} GFLOP/s SGEMM rate)\n", limit_tps,
             3 * fwd / 1e6, rate);
  if (!a.peer) return 0;
  // Debian's interpreter (where python3-torch lives) unless DEFINE_PYTHON names another.
  const char* python = std::getenv("DEFINE_PYTHON") ? std::getenv("DEFINE_PYTHON") : "/usr/bin/python3";
  const std::string cmd = fmt::format(
      "OMP_WAIT_POLICY=PASSIVE OMP_NUM_THREADS={} {} bench/scripts/lstm_lm_torch.py --vocab {} --emb {} --hidden {} "
      "--layers {} --batch {} --bptt {} --steps {} --threads {}",
      a.threads, python, a.vocab, a.emb, a.hidden, a.layers, a.batch, a.bptt, a.steps, a.threads);
  FILE* p = popen(cmd.c_str(), "r");
  std::string out;
  char buf[4096];
  while (p && std::fgets(buf, sizeof buf, p)) out += buf;
  if (!p || pclose(p) != 0 || out.empty()) {
    fmt::print("pytorch: not available (run from the repository root with python3-torch installed)\n");
    return 0;
  }
  const auto j = nlohmann::json::parse(out.substr(out.rfind('{')));
  const double torch_tps = j["tokens_per_s"], torch_mem = j["peak_rss_bytes"];
  fmt::print("pytorch: {:9.0f} tokens/s, peak RSS {:7.1f} MiB (torch {})\n", torch_tps, torch_mem / (1 << 20),
             j["torch"].get<std::string>());
  fmt::print("ratios : define/pytorch tokens/s {:.2f}x (limit {:.2f}x), memory {:.2f}x\n", define_tps / torch_tps,
             limit_tps / torch_tps, define_mem / torch_mem);
  return 0;
}
