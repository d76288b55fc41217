// Training speed and memory of a Transformer-XL language model in define and in PyTorch (the peer,
// bench/peers/txl_torch.py, Debian's python3-torch), same architecture, batch, segment and memory
// length and thread count, printed as ratios from one run, next to the physical limit.
//
//   txl_train_bench [--vocab 33278] [--d-model 256] [--heads 4] [--d-head 64] [--inner 1024]
//                   [--layers 4] [--batch 16] [--tgt-len 64] [--mem-len 64] [--cutoffs 2000,10000]
//                   [--steps 60] [--threads 2] [--rounds 3] [--no-peer]
//                   [--device cpu|cuda|emu] [--precision fp32|fp16|bf16]
//
// Model (what build() below constructs; both sides the same): a Transformer-XL with post-LayerNorm
// layers (pre_lnorm false: LayerNorm(x + sublayer(x)), the Transformer-XL reference code's layer and
// the peer's), shared r_w_bias / r_r_bias, dropout 0.1, dropatt 0, and a projected adaptive input
// tied to the adaptive softmax (div_val 1). At the defaults that is the model of
// configs/wt2-transformer-xl-standard.json (WikiText-2's 33,278 words, d_model 256, 4 heads of 64,
// inner 1024, 4 layers, mem_len 64, cutoffs 2000,10000, batch 16 x 64) EXCEPT its layers: the config
// trains pre-LayerNorm ones (pre_lnorm true), so the bench trains that config with
// --set model.pre_lnorm=false; the optimizer is the config's Adam (lr 1e-3, clip 0.25) at a constant
// rate. --cutoffs none: a full softmax over the vocabulary.
//
// Rounds: the two frameworks run alternately, define then the peer, `rounds` times, and the
// ratio is the median of the rounds' ratios (one run's tokens/s swings by 5-10% on the 2-core VM).
//
// Step (both sides): forward over one segment of tgt_len tokens with the previous segment's
// detached per-layer memory (mem_len positions), backward, gradient-norm clipping at 0.25, Adam;
// 5 warm-up steps excluded from timing (they also fill the memory to mem_len when mem_len <= 5
// tgt_len). Tokens are random with Zipf's law (id = floor(V^u) - 1 for u uniform in [0, 1), so
// P(id < c) = ln(c + 1) / ln V), like words ranked by frequency: the adaptive softmax's cost
// depends on how many targets fall in its tails, and uniform ids would send 94% of the rows there
// (defaults) where WikiText-2's text, frequency-ordered, sends 23%; Zipf sends 27% (12% to the last
// tail, where the corpus sends 7%).
// Parameter counts of the two models are checked equal before anything is timed: a mismatch
// means the models differ, and the figures would compare different work.
// Memory: each framework runs in its own process (define: this one) and reports two figures
// (bench::RssFigures): its whole peak resident set (VmHWM; the peer's holds the Python interpreter
// and libtorch, about 0.5 GiB whatever the model) and its peak above the resident set just before
// the first training step (the model, optimizer and data built); the largest over the rounds.
// Physical limit: the training FLOPs per token (train_flops_per_token below) over the float32
// GEMM rate define measures on this machine in the same run, printed as a multiple of PyTorch's
// tokens/s; the achieved GFLOP/s of each side is the same FLOP count times its tokens/s.
// Device: define trains on --device (default cpu) in --precision (train.precision's meaning; 16
// bits only on a GPU), and the peer gets --device cuda --amp <precision> when define is on a GPU
// (float32 with TF32 off, autocast, GradScaler for fp16; bench/peers/torch_device.py). On a GPU
// both sides' timed loops end with a device synchronisation, the physical limit is the device's
// GEMM rate in the precision's dtype (4096^3), and memory is each side's peak of live tensor
// bytes on the device (define's caching allocator, torch.cuda.max_memory_allocated), next to the
// peak RSS; the last line is a JSON summary (bench/peers/join_peers.py). On the emulated device
// (emu: for testing the path without a GPU) the peer runs on the CPU in float32.
#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "autograd/autocast.h"
#include "autograd/ops.h"
#include "bench/peer_bench_util.h"
#include "core/config.h"
#include "core/process_info.h"
#include "kernels/cpu/denormals.h"
#include "kernels/cpu/gemm_provider.h"
#include "models/language_model.h"
#include "models/registry.h"
#include "nn/optim/optim.h"

using namespace define;

namespace {

constexpr std::int64_t kWarmup = 5;

struct Args {
  std::int64_t vocab = 33278, d_model = 256, heads = 4, d_head = 64, inner = 1024, layers = 4, batch = 16,
               tgt_len = 64, mem_len = 64, steps = 60, threads = 2, rounds = 3;
  std::vector<std::int64_t> cutoffs = {2000, 10000};
  bool peer = true;
  std::string device = "cpu", precision = "fp32";
  bench::TrainDevice train;  // device and precision, checked
};

std::vector<std::int64_t> parse_cutoffs(const std::string& s) {
  std::vector<std::int64_t> out;
  if (s == "none") return out;
  std::stringstream in(s);
  for (std::string item; std::getline(in, item, ',');) out.push_back(bench::option_int("--cutoffs", item));
  return out;
}

// What the title line and --help say the bench trains (the header above says why).
constexpr const char* kModel =
    "post-LayerNorm layers (pre_lnorm false), shared r_w_bias / r_r_bias, projected adaptive input tied to the "
    "adaptive softmax (div_val 1), dropout 0.1, dropatt 0";
constexpr const char* kConfig =
    "configs/wt2-transformer-xl-standard.json's model with --set model.pre_lnorm=false (the config's layers are "
    "pre-LayerNorm)";

constexpr const char* kHelp =
    "usage: txl_train_bench [--vocab 33278] [--d-model 256] [--heads 4] [--d-head 64] [--inner 1024]\n"
    "                       [--layers 4] [--batch 16] [--tgt-len 64] [--mem-len 64] [--cutoffs 2000,10000|none]\n"
    "                       [--steps 60] [--threads 2] [--rounds 3] [--no-peer]\n"
    "                       [--device cpu|cuda|emu] [--precision fp32|fp16|bf16]\n"
    "Trains a Transformer-XL language model in define and in PyTorch (bench/peers/txl_torch.py): post-LayerNorm\n"
    "layers (pre_lnorm false), shared r_w_bias / r_r_bias, a projected adaptive input tied to the adaptive\n"
    "softmax (div_val 1), dropout 0.1, dropatt 0, Adam at lr 1e-3 with clipping 0.25, on Zipf-distributed\n"
    "tokens. At the defaults that is configs/wt2-transformer-xl-standard.json's model with\n"
    "--set model.pre_lnorm=false: the config itself trains pre-LayerNorm layers.\n";

Args parse(int argc, char** argv) {
  Args a;
  for (int i = 1; i < argc; ++i) {
    const std::string k = argv[i];
    auto next = [&] { return bench::option_int(k, argv[++i]); };
    if (k == "--help" || k == "-h") {
      fmt::print("{}", kHelp);
      std::exit(0);
    }
    if (k == "--no-peer") a.peer = false;
    else if (i + 1 >= argc) throw std::runtime_error("option " + k + " needs a value");
    else if (k == "--vocab") a.vocab = next();
    else if (k == "--d-model") a.d_model = next();
    else if (k == "--heads") a.heads = next();
    else if (k == "--d-head") a.d_head = next();
    else if (k == "--inner") a.inner = next();
    else if (k == "--layers") a.layers = next();
    else if (k == "--batch") a.batch = next();
    else if (k == "--tgt-len") a.tgt_len = next();
    else if (k == "--mem-len") a.mem_len = next();
    else if (k == "--steps") a.steps = next();
    else if (k == "--threads") a.threads = next();
    else if (k == "--rounds") a.rounds = next();
    else if (k == "--cutoffs") a.cutoffs = parse_cutoffs(argv[++i]);
    else if (k == "--device")
      a.device = argv[++i];
    else if (k == "--precision")
      a.precision = argv[++i];
    else throw std::runtime_error("unknown option " + k);
  }
  if (a.rounds < 1) throw std::runtime_error("--rounds must be at least 1");
  a.train = bench::parse_train_device(a.device, a.precision);
  // Checked here rather than left to the model so that the message names the option (the
  // defaults' cutoffs do not fit a small --vocab).
  for (std::size_t i = 0; i < a.cutoffs.size(); ++i)
    if (a.cutoffs[i] <= (i ? a.cutoffs[i - 1] : 0) || a.cutoffs[i] >= a.vocab)
      throw std::runtime_error(fmt::format("--cutoffs must ascend within (0, vocab = {}), e.g. --cutoffs {},{} "
                                           "(or --cutoffs none)",
                                           a.vocab, a.vocab / 4, a.vocab / 2));
  return a;
}

// Whether the sizes are the defaults (configs/wt2-transformer-xl-standard.json's).
bool default_sizes(const Args& a) {
  const Args d;
  return a.vocab == d.vocab && a.d_model == d.d_model && a.heads == d.heads && a.d_head == d.d_head &&
         a.inner == d.inner && a.layers == d.layers && a.batch == d.batch && a.tgt_len == d.tgt_len &&
         a.mem_len == d.mem_len && a.cutoffs == d.cutoffs;
}

std::string cutoffs_str(const std::vector<std::int64_t>& c) {
  return c.empty() ? "none" : fmt::format("{}", fmt::join(c, ","));
}

// Training FLOPs per token (multiply-adds count 2). Forward: per layer the qkv projection over
// memory + segment, the position projection r_net (once per step, not per batch row), the
// three attention products (content AC, position BD, probabilities x values) over all Tk keys
// (both sides' batched GEMMs compute the causally masked entries too), o_net and the
// feed-forward net; then the
// adaptive softmax: the head (shortlist + cluster logits) for every row, tail i for the rows
// whose target falls in it (Zipf targets: a share ln((c_{i+1} + 1) / (c_i + 1)) / ln V). Backward: one GEMM for
// the weight gradient and one for the input gradient per forward GEMM, except where the input
// needs none (the detached memory rows of qkv, the constant sinusoids of r_net). Element-wise
// work (softmax, LayerNorm, dropout, Adam) is not counted.
// The share of Zipf-distributed ids (see the top) in [first, end).
double zipf_share(std::int64_t vocab, std::int64_t first, std::int64_t end) {
  return std::log(static_cast<double>(end + 1) / static_cast<double>(first + 1)) / std::log(static_cast<double>(vocab));
}

double train_flops_per_token(const Args& a) {
  const double T = static_cast<double>(a.tgt_len), B = static_cast<double>(a.batch);
  const double M = static_cast<double>(std::min(a.mem_len, kWarmup * a.tgt_len)), Tk = T + M;
  const double d = static_cast<double>(a.d_model), hd = static_cast<double>(a.heads * a.d_head);
  const double inner = static_cast<double>(a.inner);
  const double qkv_seg = 2 * T * B * d * 3 * hd, qkv_mem = 2 * M * B * d * 3 * hd;
  const double r_net = 2 * Tk * d * hd;
  const double attention = 3 * 2 * B * T * Tk * hd;
  const double dense = 2 * T * B * hd * d + 2 * 2 * T * B * d * inner;
  const double layer = 3 * (qkv_seg + attention + dense) + 2 * qkv_mem + 2 * r_net;
  const std::int64_t head = a.cutoffs.empty() ? a.vocab : a.cutoffs[0] + static_cast<std::int64_t>(a.cutoffs.size());
  double softmax = 2 * T * B * d * static_cast<double>(head);
  for (std::size_t i = 0; i < a.cutoffs.size(); ++i) {
    const std::int64_t end = i + 1 < a.cutoffs.size() ? a.cutoffs[i + 1] : a.vocab;
    softmax += 2 * (T * B * zipf_share(a.vocab, a.cutoffs[i], end)) * d * static_cast<double>(end - a.cutoffs[i]);
  }
  return (static_cast<double>(a.layers) * layer + 3 * softmax) / (T * B);
}

// The expected first loss of an untrained model (logits near zero) on the Zipf targets. Not ln V
// with cutoffs: a tail cluster's head logit weighs like one shortlist word, so a word of tail i
// costs ln(c_0 + T) + ln(rows_i); without cutoffs it is ln V.
double zero_logits_loss(const Args& a) {
  if (a.cutoffs.empty()) return std::log(static_cast<double>(a.vocab));
  double loss = std::log(static_cast<double>(a.cutoffs[0] + static_cast<std::int64_t>(a.cutoffs.size())));
  for (std::size_t i = 0; i < a.cutoffs.size(); ++i) {
    const std::int64_t end = i + 1 < a.cutoffs.size() ? a.cutoffs[i + 1] : a.vocab;
    loss += zipf_share(a.vocab, a.cutoffs[i], end) * std::log(static_cast<double>(end - a.cutoffs[i]));
  }
  return loss;
}

struct DefineResult {
  double tokens_per_s = 0, first_loss = 0;
  std::int64_t params = 0;
  std::optional<double> peak_device_bytes = std::nullopt;  // on a GPU
  bench::RssFigures rss = {};
};

std::shared_ptr<models::LanguageModel> build(const Args& a, Generator& gen) {
  const std::string json = fmt::format(
      R"({{"type": "transformer_xl", "vocab_size": {}, "input": {{"type": "projected", "dim": {}, "cutoffs": [{}]}},
          "d_model": {}, "n_head": {}, "d_head": {}, "d_inner": {}, "n_layer": {}, "dropout": 0.1, "dropatt": 0.0,
          "pre_lnorm": false, "untie_r": false, "mem_len": {}}})",
      a.vocab, a.d_model, fmt::join(a.cutoffs, ", "), a.d_model, a.heads, a.d_head, a.inner, a.layers, a.mem_len);
  const Config cfg = Config::from_text(fmt::format(R"({{"model": {}}})", json), "<bench>");
  return std::dynamic_pointer_cast<models::LanguageModel>(models::build_model(cfg.section("model"), 0, gen).module);
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
  optim::Adam opt(params, {.lr = 1e-3});
  bench::LossScale scale;
  Tensor data = bench::zipf_tokens(a.tgt_len * (a.steps + kWarmup) + 1, a.batch, a.vocab, gen);
  if (!t.on_cpu()) data = copy_to_device(data, t.device);
  DefineResult result{.params = model->num_parameters()};
  models::LmState state;
  std::chrono::steady_clock::time_point start;
  const bench::TrainingRss rss;  // right before the first step
  for (std::int64_t step = 0; step < a.steps + kWarmup; ++step) {
    if (step == kWarmup) {
      bench::synchronize(t.device);
      start = std::chrono::steady_clock::now();
    }
    const Tensor x = contiguous(narrow(data, 0, step * a.tgt_len, a.tgt_len));
    const Tensor y = contiguous(narrow(data, 0, step * a.tgt_len + 1, a.tgt_len));
    opt.zero_grad();
    const autocast::Scope mixed(t.lower);  // forward and backward, as in the trainer's step
    auto out = model->forward(x, y, models::detach(state));
    if (step == 0) result.first_loss = out.loss.item_double();  // warm-up: not timed
    state = std::move(out.state);
    bench::backward_and_step(out.objective, opt, named, 0.25, t, scale);
  }
  bench::synchronize(t.device);
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  result.tokens_per_s = static_cast<double>(a.steps * a.tgt_len * a.batch) / s;
  result.peak_device_bytes = bench::device_peak_bytes(t.device);
  result.rss = rss.figures();
  return result;
}

struct PeerResult {
  double tokens_per_s = 0, first_loss = 0;
  bench::RssFigures rss = {};
  std::int64_t params = 0;
  std::string version;
  std::optional<double> peak_device_bytes = std::nullopt;  // on a GPU
};

// The PyTorch peer in its own process (params_only: build the model and report its parameter
// count, nothing timed); nothing when python3-torch is not there.
std::optional<PeerResult> run_peer(const Args& a, bool params_only) {
  const auto found = bench::run_python_peer(
      "bench/peers/txl_torch.py",
      fmt::format("--vocab {} --d-model {} --heads {} --d-head {} --inner {} --layers {} --batch {} --tgt-len {} "
                  "--mem-len {} --cutoffs {} --steps {} --warmup {} --threads {}{}",
                  a.vocab, a.d_model, a.heads, a.d_head, a.inner, a.layers, a.batch, a.tgt_len, a.mem_len,
                  cutoffs_str(a.cutoffs), a.steps, kWarmup, a.threads, params_only ? " --params-only" : "") +
          // the count alone needs no GPU
          (params_only ? std::string() : bench::peer_device_args(a.train)),
      a.threads);
  if (!found) return std::nullopt;
  const nlohmann::json& j = *found;
  PeerResult r{.params = j["params"].get<std::int64_t>(), .version = j["torch"].get<std::string>()};
  if (!params_only) {
    r.tokens_per_s = j["tokens_per_s"];
    r.rss = bench::peer_rss(j);
    r.first_loss = j["first_loss"];
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
  } catch (const std::exception& e) {  // a usage error, not a crash: no abort and core dump
    fmt::print(stderr, "error: {}\n", e.what());
    return 2;
  }
  omp_set_num_threads(static_cast<int>(a.threads));
  const double flops = train_flops_per_token(a);
  fmt::print(
      "Transformer-XL LM training, post-LayerNorm, d_model {} heads {}x{} inner {} x {} layers, V {} (cutoffs "
      "{}), batch {}, tgt_len {}, mem_len {}, {} threads, {} round(s)\n",
      a.d_model, a.heads, a.d_head, a.inner, a.layers, a.vocab, cutoffs_str(a.cutoffs), a.batch, a.tgt_len, a.mem_len,
      a.threads, a.rounds);
  fmt::print("model  : {}\n", default_sizes(a) ? kConfig : kModel);
  fmt::print("cpu    : {}, {} steps after {} warm-up per round\n", bench::cpu_model(), a.steps, kWarmup);
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
    const double limit_tps = rate * 1e9 / flops;
    std::string line = fmt::format("round {}: define {:7.0f} tokens/s", r + 1, define_tps.back());
    std::optional<PeerResult> peer;
    if (a.peer) {
      peer = run_peer(a, /*params_only=*/false);
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
    if (r == 0)
      fmt::print("loss   : step 0 define {:.4f}{} (zero logits: {:.4f}; ln V = {:.4f})\n", d.first_loss,
                 peer ? fmt::format(", pytorch {:.4f}", peer->first_loss) : std::string(), zero_logits_loss(a),
                 std::log(static_cast<double>(a.vocab)));
  }
  define_rss.peak = bench::TrainingRss::process_peak_bytes();  // the whole run's
  // On a GPU the memory that counts is the device's; the RSS follows it.
  const std::string define_memory = t.on_cpu() ? bench::rss_text(define_rss)
                                               : fmt::format("peak device memory {} (live tensors), {}",
                                                             bench::mib(define_dev_mem), bench::rss_text(define_rss));
  fmt::print("define : {:9.0f} tokens/s (median, {:.1f} GFLOP/s), {}\n", bench::median(define_tps),
             bench::median(define_tps) * flops / 1e9, define_memory);
  fmt::print("limit  : {:9.0f} tokens/s ({:.1f} MFLOP/token at the best measured {:.0f} GFLOP/s {} rate)\n",
             rate * 1e9 / flops, flops / 1e6, rate, bench::gemm_rate_name(t));
  if (!a.peer) {
    if (!t.on_cpu()) bench::print_device_summary("txl", t, bench::median(define_tps), define_dev_mem, {}, {});
    return 0;
  }
  const std::string torch_memory = bench::peer_memory_text(t, torch_rss, torch_dev_mem);
  const std::string memory_ratio = bench::memory_ratio_text(t, define_rss, torch_rss, define_dev_mem, torch_dev_mem);
  fmt::print("pytorch: {:9.0f} tokens/s (median, {:.1f} GFLOP/s), {} (torch {})\n", bench::median(torch_tps),
             bench::median(torch_tps) * flops / 1e9, torch_memory, torch_version);
  fmt::print(
      "ratios : define/pytorch tokens/s {:.2f}x (median of {} rounds, range {:.2f}-{:.2f}x; limit {:.2f}x), "
      "{}\n",
      bench::median(ratios), ratios.size(), *std::min_element(ratios.begin(), ratios.end()),
      *std::max_element(ratios.begin(), ratios.end()), bench::median(limits), memory_ratio);
  if (!t.on_cpu())
    bench::print_device_summary("txl", t, bench::median(define_tps), define_dev_mem, bench::median(torch_tps),
                                torch_dev_mem);
  return 0;
}
