// Training speed and memory of an LSTM language model in define and in PyTorch (the peer,
// bench/peers/lstm_lm_torch.py, Debian's python3-torch), same architecture, batch, sequence
// length and thread count, printed as ratios from one run, next to the physical limit.
//
//   lm_train_bench [--emb 200] [--hidden 200] [--layers 2] [--vocab 10000] [--batch 20]
//                  [--bptt 35] [--steps 60] [--threads 2] [--rounds 3] [--no-peer]
//                  [--device cpu|cuda|emu] [--precision fp32|fp16|bf16]
//
// Device: define trains on --device (default cpu) in --precision (train.precision's meaning; 16
// bits only on a GPU), and the peer gets --device cuda --amp <precision> when define is on a GPU
// (float32 with TF32 off, autocast, GradScaler for fp16; bench/peers/torch_device.py). On a GPU
// both sides' timed loops end with a device synchronisation, the physical limit is the device's
// GEMM rate in the precision's dtype (4096^3), and memory is each side's peak of live tensor
// bytes on the device (define's caching allocator, torch.cuda.max_memory_allocated), next to the
// peak RSS; the last line is a JSON summary (bench/peers/join_peers.py). On the emulated device
// (emu: for testing the path without a GPU) the peer runs on the CPU in float32.
//
// Rounds: the two frameworks run alternately, define then the peer, `rounds` times, and the
// ratio is the median of the rounds' ratios. On the 2-core build machine (a VM) one run's
// tokens/s swings by up to 5-10% between runs of the same binary, so a single pair decides little.
//
// Model: tied embedding (emb) -> LSTM layers (hidden, last layer emb wide) -> softmax over the
// vocabulary; SGD with gradient-norm clipping; random tokens (the speed does not depend on them).
// Parameter counts of the two models are checked equal before anything is timed: a mismatch
// means the models differ, and the figures would compare different work.
// Memory: each framework runs in its own process (define: this one) and reports two figures
// (bench::RssFigures): its whole peak resident set (VmHWM; the peer's holds the Python interpreter
// and libtorch, about 0.5 GiB whatever the model) and its peak above the resident set just before
// the first training step (the model, optimizer and data built); the largest over the rounds.
// Physical limit: FLOPs per token (3x the forward GEMMs: LSTM gates and the softmax) over the
// float32 GEMM rate define measures on this machine in the same run (the best any framework can
// do with these GEMMs), printed as a multiple of PyTorch's tokens/s.
#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <optional>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "autograd/autocast.h"
#include "autograd/ops.h"
#include "bench/peer_bench_util.h"
#include "core/config.h"
#include "core/cpu_allocator.h"
#include "core/process_info.h"
#include "kernels/cpu/denormals.h"
#include "kernels/cpu/gemm_provider.h"
#include "models/lstm_lm.h"
#include "models/registry.h"
#include "nn/optim/optim.h"

using namespace define;

namespace {

struct Args {
  std::int64_t emb = 200, hidden = 200, layers = 2, vocab = 10000, batch = 20, bptt = 35, steps = 60, threads = 2,
               rounds = 3;
  bool peer = true;
  std::string device = "cpu", precision = "fp32";
  bench::TrainDevice train;  // device and precision, checked
};

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string k = argv[i];
    auto next = [&] { return bench::option_int(k, argv[++i]); };
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
    else if (k == "--rounds") a.rounds = next();
    else if (k == "--device")
      a.device = argv[++i];
    else if (k == "--precision")
      a.precision = argv[++i];
    else throw std::runtime_error("unknown option " + k);
  }
  if (a.rounds < 1) throw std::runtime_error("--rounds must be at least 1");
  a.train = bench::parse_train_device(a.device, a.precision);
  return a;
}

struct DefineResult {
  double tokens_per_s = 0;
  std::optional<double> peak_device_bytes = std::nullopt;  // on a GPU
  bench::RssFigures rss = {};
};

std::shared_ptr<models::LstmLm> build(const Args& a, Generator& gen) {
  const std::string json = fmt::format(
      R"({{"type": "lstm_lm", "vocab_size": {}, "input": {{"type": "embedding", "dim": {}}}, "hidden": {}, "layers": {}}})",
      a.vocab, a.emb, a.hidden, a.layers);
  const Config cfg = Config::from_text(fmt::format(R"({{"model": {}}})", json), "<bench>");
  return std::dynamic_pointer_cast<models::LstmLm>(models::build_model(cfg.section("model"), 0, gen).module);
}

DefineResult define_run(const Args& a) {
  const bench::TrainDevice& t = a.train;
  Generator gen(0);
  auto model = build(a, gen);
  if (!t.on_cpu()) {
    bench::reset_device_peak(t.device);
    model->to(t.device);  // before the optimizer takes the parameters, as the trainer does
  }
  const auto params = model->named_parameters();
  const optim::NamedParameters named = optim::to_named_parameters(params);
  optim::SGD opt(params, {.lr = 1.0});
  bench::LossScale scale;
  const std::int64_t warmup = 5;
  Tensor data = rand_int({a.bptt * (a.steps + warmup) + 1, a.batch}, a.vocab, {.dtype = DType::Int64}, gen);
  if (!t.on_cpu()) data = copy_to_device(data, t.device);
  models::LmState state;
  std::chrono::steady_clock::time_point start;
  const bench::TrainingRss rss;  // right before the first step
  for (std::int64_t step = 0; step < a.steps + warmup; ++step) {
    if (step == warmup) {
      bench::synchronize(t.device);
      start = std::chrono::steady_clock::now();
    }
    const Tensor x = contiguous(narrow(data, 0, step * a.bptt, a.bptt));
    const Tensor y = contiguous(narrow(data, 0, step * a.bptt + 1, a.bptt));
    opt.zero_grad();
    const autocast::Scope mixed(t.lower);  // forward and backward, as in the trainer's step
    auto out = model->forward(x, y, models::detach(state));
    state = std::move(out.state);
    bench::backward_and_step(out.loss, opt, named, 0.25, t, scale);
  }
  bench::synchronize(t.device);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  return {static_cast<double>(a.steps * a.bptt * a.batch) / s, bench::device_peak_bytes(t.device), rss.figures()};
}

struct PeerResult {
  double tokens_per_s = 0;
  bench::RssFigures rss = {};
  std::int64_t params = 0;
  std::string version;
  std::optional<double> peak_device_bytes = std::nullopt;  // on a GPU
};

// The PyTorch peer in its own process (params_only: build the model and report its parameter
// count, nothing timed); nothing when python3-torch is not there.
std::optional<PeerResult> run_peer(const Args& a, bool params_only) {
  const auto found = bench::run_python_peer(
      "bench/peers/lstm_lm_torch.py",
      fmt::format("--vocab {} --emb {} --hidden {} --layers {} --batch {} --bptt {} --steps {} --threads {}{}", a.vocab,
                  a.emb, a.hidden, a.layers, a.batch, a.bptt, a.steps, a.threads, params_only ? " --params-only" : "") +
          // the count alone needs no GPU
          (params_only ? std::string() : bench::peer_device_args(a.train)),
      a.threads);
  if (!found) return std::nullopt;
  const nlohmann::json& j = *found;
  PeerResult r{.params = j["params"].get<std::int64_t>(), .version = j["torch"].get<std::string>()};
  if (!params_only) {
    r.tokens_per_s = j["tokens_per_s"];
    r.rss = bench::peer_rss(j);
    if (j.contains("peak_device_bytes")) r.peak_device_bytes = j["peak_device_bytes"].get<double>();
  }
  return r;
}

}  // namespace

int main(int argc, char** argv) {
  kernels::cpu::restart_with_library_settings(argv);  // the same settings as the define CLI (and the peer)
  kernels::cpu::flush_denormals(true);  // as the define CLI does; the peer sets torch.set_flush_denormal(True)
  Args a;
  try {
    a = parse(argc, argv);
  } catch (const std::exception& e) {  // a usage error, not a crash, as in the other training benches
    fmt::print(stderr, "error: {}\n", e.what());
    return 2;
  }
  omp_set_num_threads(static_cast<int>(a.threads));
  // Forward FLOPs per token: each LSTM layer 2 * 4H(I + H), the tied softmax 2 * V * emb; training
  // is about 3x the forward (the backward has two GEMMs per forward GEMM).
  double fwd = 2.0 * static_cast<double>(a.vocab * a.emb);
  std::int64_t in = a.emb;
  for (std::int64_t l = 0; l < a.layers; ++l) {
    const std::int64_t h = l + 1 == a.layers ? a.emb : a.hidden;
    fwd += 2.0 * 4 * static_cast<double>(h * (in + h));
    in = h;
  }
  fmt::print("LSTM LM training, emb {} hidden {} x {} layers, V {}, batch {}, bptt {}, {} threads, {} round(s)\n",
             a.emb, a.hidden, a.layers, a.vocab, a.batch, a.bptt, a.threads, a.rounds);
  const bench::TrainDevice& t = a.train;
  if (!t.on_cpu()) fmt::print("device : {}\n", bench::describe(t));
  std::int64_t define_params = 0;
  {
    Generator gen(0);
    define_params = build(a, gen)->num_parameters();
  }
  std::optional<std::int64_t> peer_params;
  if (a.peer)
    if (const auto counted = run_peer(a, /*params_only=*/true)) peer_params = counted->params;
  if (const auto stop = bench::report_params(define_params, a.peer, peer_params)) return *stop;
  std::vector<double> define_tps, torch_tps, ratios, limits;
  double rate = 0;
  bench::RssFigures define_rss, torch_rss;
  std::optional<double> define_dev_mem, torch_dev_mem;  // peaks of live tensor bytes on a GPU
  std::string torch_version;
  for (std::int64_t r = 0; r < a.rounds; ++r) {
    const DefineResult d = define_run(a);
    define_tps.push_back(d.tokens_per_s);
    define_rss.keep_max(d.rss);
    if (d.peak_device_bytes) define_dev_mem = std::max(define_dev_mem.value_or(0), *d.peak_device_bytes);
    // The best GEMM rate seen is the machine's (a slow measurement is noise, not the limit).
    rate = std::max(rate, t.on_cpu() ? bench::sgemm_gflops() : bench::device_gemm_gflops(t));
    const double limit_tps = rate * 1e9 / (3 * fwd);
    std::string line = fmt::format("round {}: define {:7.0f} tokens/s", r + 1, define_tps.back());
    if (a.peer) {
      const std::optional<PeerResult> peer = run_peer(a, /*params_only=*/false);
      if (!peer) {
        fmt::print(bench::kNoPeer);
        return 0;
      }
      torch_tps.push_back(peer->tokens_per_s);
      torch_rss.keep_max(peer->rss);
      if (peer->peak_device_bytes) torch_dev_mem = std::max(torch_dev_mem.value_or(0), *peer->peak_device_bytes);
      torch_version = peer->version;
      ratios.push_back(define_tps.back() / peer->tokens_per_s);
      limits.push_back(limit_tps / peer->tokens_per_s);
      line += fmt::format(", pytorch {:7.0f} tokens/s, ratio {:.2f}x (limit {:.2f}x)", peer->tokens_per_s,
                          ratios.back(), limits.back());
    }
    fmt::print("{}\n", line);
  }
  define_rss.peak = bench::TrainingRss::process_peak_bytes();  // the whole run's
  // Peak RSS also holds the allocator's cache and moves by several MiB between identical runs; the
  // allocator's peak of live bytes is the stable measure of what training needed.
  if (t.on_cpu())
    fmt::print("define : {:9.0f} tokens/s (median), {} (peak live tensors {:.1f} MiB)\n", bench::median(define_tps),
               bench::rss_text(define_rss),
               static_cast<double>(CpuCachingAllocator::instance().stats().peak_active_bytes) / (1 << 20));
  else
    fmt::print("define : {:9.0f} tokens/s (median), peak device memory {} (live tensors), {}\n",
               bench::median(define_tps), bench::mib(define_dev_mem), bench::rss_text(define_rss));
  fmt::print("limit  : {:9.0f} tokens/s ({:.1f} MFLOP/token at the best measured {:.0f} GFLOP/s {} rate)\n",
             rate * 1e9 / (3 * fwd), 3 * fwd / 1e6, rate, bench::gemm_rate_name(t));
  if (!a.peer) {
    if (!t.on_cpu()) bench::print_device_summary("lm", t, bench::median(define_tps), define_dev_mem, {}, {});
    return 0;
  }
  if (t.on_cpu()) {
    fmt::print("pytorch: {:9.0f} tokens/s (median), {} (torch {})\n", bench::median(torch_tps),
               bench::rss_text(torch_rss), torch_version);
    fmt::print(
        "ratios : define/pytorch tokens/s {:.2f}x (median of {} rounds, range {:.2f}-{:.2f}x; limit {:.2f}x), "
        "{}\n",
        bench::median(ratios), ratios.size(), *std::min_element(ratios.begin(), ratios.end()),
        *std::max_element(ratios.begin(), ratios.end()), bench::median(limits),
        bench::memory_ratio_text(t, define_rss, torch_rss, define_dev_mem, torch_dev_mem));
    return 0;
  }
  fmt::print("pytorch: {:9.0f} tokens/s (median), {} (torch {})\n", bench::median(torch_tps),
             bench::peer_memory_text(t, torch_rss, torch_dev_mem), torch_version);
  fmt::print(
      "ratios : define/pytorch tokens/s {:.2f}x (median of {} rounds, range {:.2f}-{:.2f}x; limit {:.2f}x), "
      "device memory {}\n",
      bench::median(ratios), ratios.size(), *std::min_element(ratios.begin(), ratios.end()),
      *std::max_element(ratios.begin(), ratios.end()), bench::median(limits),
      define_dev_mem && torch_dev_mem ? fmt::format("{:.2f}x", *define_dev_mem / *torch_dev_mem) : "n/a");
  bench::print_device_summary("lm", t, bench::median(define_tps), define_dev_mem, bench::median(torch_tps),
                              torch_dev_mem);
  return 0;
}
