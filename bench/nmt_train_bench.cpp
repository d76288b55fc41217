// Training speed, beam-search speed and memory of the small translation Transformer
// (configs/multi30k-transformer.json's model) in define and in PyTorch (the peer,
// bench/peers/nmt_torch.py: torch.nn.Transformer, Debian's python3-torch), same architecture,
// batch, lengths, dropouts, loss and optimizer, printed as ratios from one run next to the
// physical limit.
//
//   nmt_train_bench [--vocab 8000] [--d-model 256] [--heads 4] [--ffn 1024] [--layers 3]
//                   [--batch 256] [--src-len 16] [--tgt-len 16] [--steps 20] [--beam 5]
//                   [--beam-batch 64] [--threads 2] [--rounds 3] [--no-peer]
//                   [--device cpu|cuda|emu] [--precision fp32|fp16|bf16]
//
// Defaults: the Multi30k model (3 + 3 pre-norm layers of 256, 4 heads, inner 1024, one 8,000-word
// table shared by source, target and the tied output, sinusoidal positions, dropout 0.3 on the
// residual branches and the embedding, 0.1 on attention probabilities and after the activation)
// and a batch of Multi30k's shape at max_tokens 4096: 256 sentences of 16 subwords a side (its
// average is 15.8 / 15.3 with eos).
//
// Training step (both sides): logits of the teacher-forced decoder, label-smoothed (0.1) cross
// entropy summed over the target tokens and divided by their number, backward, AdamW (0.9, 0.98,
// weight decay 1e-4), no clipping (the config's clip 0). define also computes the unsmoothed NLL
// that `define train` logs (TranslationModel::loss_sum, which on the CPU gets it from the fused
// output layer's own pass over the logits), so its figure is what the trainer runs. Tokens are Zipf-distributed subword
// ids (bench::zipf_tokens) without padding; tokens/s counts target tokens, as fairseq's words/s does. 3 warm-up steps
// are not timed.
//
// Beam search: --beam-batch source sentences of src-len subwords, beam --beam, length penalty 1,
// at most 1.2 x src-len + 10 target subwords (the README's translate command), batched, with the
// decoder's keys and values cached per layer on both sides (the peer drives nn.Transformer's
// decoder-layer weights step by step; nn.Transformer has no incremental decoder of its own), on a
// freshly initialised model so that hypotheses run to the length limit. Both frameworks decode the
// same model and sources: define writes its fresh model's weights and the sources to a scratch
// folder, and the peer loads them (nmt_torch.py --beam-from). Every round, the best translation of
// every sentence must be the same on both sides before a beam figure is printed: the bench prints
// how many match and stops (exit 1) at the first difference, naming the sentence, since
// sentences/s would otherwise compare different work.
//
// Parameter counts are checked equal before anything is timed. Memory: each framework runs in its
// own process (define: this one) and reports two figures (bench::RssFigures): its whole peak
// resident set (VmHWM; the peer's holds the Python interpreter and libtorch, about 0.5 GiB whatever
// the model) and its peak above the resident set just before the first training step (the model,
// optimizer and data built), over training and beam search; the largest over the rounds.
// Physical limit: training FLOPs per target token (below) over the float32 GEMM rate define
// measures on this machine in the same run.
// Device: define trains and decodes on --device (default cpu), training in --precision
// (train.precision's meaning; 16 bits only on a GPU; beam search stays float32 on both sides, as
// `define translate` runs it), and the peer gets --device cuda --amp <precision> when define is on
// a GPU (float32 with TF32 off, autocast, GradScaler for fp16; bench/peers/torch_device.py). On a
// GPU both sides' timed parts end with a device synchronisation, the physical limit is the
// device's GEMM rate in the precision's dtype (4096^3), and memory is each side's peak of live
// tensor bytes on the device (define's caching allocator, torch.cuda.max_memory_allocated), next
// to the peak RSS; the last line is a JSON summary (bench/peers/join_peers.py). On the emulated
// device (emu: for testing the path without a GPU) the peer runs on the CPU in float32.
#include <fmt/format.h>
#include <nlohmann/json.hpp>
#include <omp.h>

#include <stdlib.h>  // mkdtemp

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <cstring>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

#include "autograd/autocast.h"
#include "autograd/ops.h"
#include "bench/peer_bench_util.h"
#include "core/config.h"
#include "core/process_info.h"
#include "kernels/copy.h"
#include "kernels/cpu/denormals.h"
#include "kernels/cpu/gemm_provider.h"
#include "models/beam_search.h"
#include "models/registry.h"
#include "models/translation_model.h"
#include "nn/optim/optim.h"
#include "nn/safetensors.h"

using namespace define;

namespace {

constexpr std::int64_t kWarmup = 3;
constexpr std::int64_t kPad = 0, kBos = 2, kEos = 3, kFirstWord = 4;  // define's subword ids
constexpr double kMaxLenA = 1.2;
constexpr std::int64_t kMaxLenB = 10;

struct Args {
  std::int64_t vocab = 8000, d_model = 256, heads = 4, ffn = 1024, layers = 3, batch = 256, src_len = 16, tgt_len = 16,
               steps = 20, beam = 5, beam_batch = 64, threads = 2, rounds = 3;
  bool peer = true;
  std::string device = "cpu", precision = "fp32";
  bench::TrainDevice train;  // device and precision, checked
  std::filesystem::path beam_dir;  // where define writes the beam model and sources for the peer
};

Args parse(int argc, char** argv) {
  Args a;
  const std::vector<std::pair<const char*, std::int64_t*>> options = {
      {"--vocab", &a.vocab},   {"--d-model", &a.d_model}, {"--heads", &a.heads},       {"--ffn", &a.ffn},
      {"--layers", &a.layers}, {"--batch", &a.batch},     {"--src-len", &a.src_len},   {"--tgt-len", &a.tgt_len},
      {"--steps", &a.steps},   {"--beam", &a.beam},       {"--beam-batch", &a.beam_batch}, {"--threads", &a.threads},
      {"--rounds", &a.rounds}};
  for (int i = 1; i < argc; ++i) {
    const std::string k = argv[i];
    if (k == "--no-peer") {
      a.peer = false;
      continue;
    }
    if (k == "--device" || k == "--precision") {
      if (i + 1 >= argc) throw std::runtime_error("option " + k + " needs a value");
      (k == "--device" ? a.device : a.precision) = argv[++i];
      continue;
    }
    const auto it = std::find_if(options.begin(), options.end(), [&](const auto& o) { return k == o.first; });
    if (it == options.end()) throw std::runtime_error("unknown option " + k);
    if (i + 1 >= argc) throw std::runtime_error("option " + k + " needs a value");
    *it->second = bench::option_int(k, argv[++i]);
    if (*it->second < 1) throw std::runtime_error("option " + k + " must be at least 1");
  }
  if (a.vocab <= kFirstWord) throw std::runtime_error(fmt::format("--vocab must exceed {}", kFirstWord));
  if (a.src_len < 2 || a.tgt_len < 2) throw std::runtime_error("--src-len and --tgt-len must be at least 2");
  a.train = bench::parse_train_device(a.device, a.precision);
  return a;
}

// Training FLOPs per target token (multiply-adds count 2; backward twice the forward, every input
// gradient being needed down to the embedding). Per layer: the projections (encoder: q, k, v, out;
// decoder: self q, k, v, out, cross q and out over the target, cross k and v over the source), the
// attention products (scores and probabilities x values, both sides' batched GEMMs computing the
// causally masked entries too) and the FFN; then the tied output layer over V. Element-wise work
// (softmax, LayerNorm, dropout, AdamW) is not counted.
double train_flops_per_token(const Args& a) {
  const double B = static_cast<double>(a.batch), S = static_cast<double>(a.src_len), T = static_cast<double>(a.tgt_len);
  const double d = static_cast<double>(a.d_model), F = static_cast<double>(a.ffn), L = static_cast<double>(a.layers);
  const double encoder = 2 * B * S * d * 4 * d + 2 * 2 * B * S * S * d + 2 * 2 * B * S * d * F;
  const double decoder = 2 * B * T * d * 6 * d + 2 * B * S * d * 2 * d + 2 * 2 * B * T * (T + S) * d + 2 * 2 * B * T * d * F;
  const double output = 2 * B * T * d * static_cast<double>(a.vocab);
  return 3 * (L * (encoder + decoder) + output) / (B * T);
}

std::shared_ptr<models::TranslationModel> build(const Args& a, Generator& gen) {
  const std::string json = fmt::format(
      R"({{"model": {{"type": "transformer_nmt", "input": {{"type": "embedding", "dim": {}, "scale": true}},
          "d_model": {}, "heads": {}, "ffn_dim": {}, "encoder_layers": {}, "decoder_layers": {}, "pre_norm": true,
          "dropout": {{"residual": 0.3, "attention": 0.1, "activation": 0.1}}}}}})",
      a.d_model, a.d_model, a.heads, a.ffn, a.layers, a.layers);
  const Config cfg = Config::from_text(json, "<bench>");
  auto model = std::dynamic_pointer_cast<models::TranslationModel>(models::build_model(cfg.section("model"), a.vocab, gen).module);
  model->set_generator(gen);
  return model;
}

// Rows of Zipf-distributed words followed by an eos row: [len, cols].
Tensor sentences(std::int64_t len, std::int64_t cols, const Args& a, Generator& gen) {
  const Tensor words = bench::zipf_tokens(len - 1, cols, a.vocab - kFirstWord, gen, kFirstWord);
  return concat({words, full({1, cols}, static_cast<double>(kEos), {.dtype = DType::Int64})}, 0);
}

using Translations = std::vector<std::vector<std::int64_t>>;  // each sentence's best hypothesis

struct DefineResult {
  double tokens_per_s = 0, sentences_per_s = 0, mean_output_len = 0, first_loss = 0;
  std::optional<double> peak_device_bytes = std::nullopt;  // on a GPU: training and decoding
  bench::RssFigures rss = {};
  Translations translations = {};
};

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
  optim::AdamW opt(params, {.lr = 1e-3, .betas = {0.9, 0.98}, .weight_decay = 1e-4});
  bench::LossScale scale;
  DefineResult result;
  Tensor src = sentences(a.src_len, a.batch, a, gen), tgt_out = sentences(a.tgt_len, a.batch, a, gen);
  Tensor tgt_in = concat(
      {full({1, a.batch}, static_cast<double>(kBos), {.dtype = DType::Int64}), narrow(tgt_out, 0, 0, a.tgt_len - 1)},
      0);
  if (!t.on_cpu()) {
    src = copy_to_device(src, t.device);
    tgt_in = copy_to_device(tgt_in, t.device);
    tgt_out = copy_to_device(tgt_out, t.device);
  }
  const double tokens = static_cast<double>(a.tgt_len * a.batch);
  std::chrono::steady_clock::time_point start;
  const bench::TrainingRss rss;  // right before the first step
  for (std::int64_t step = 0; step < a.steps + kWarmup; ++step) {
    if (step == kWarmup) {
      bench::synchronize(t.device);
      start = std::chrono::steady_clock::now();
    }
    opt.zero_grad();
    const autocast::Scope mixed(t.lower);  // forward and backward, as in the trainer's step
    Tensor nll_sum;  // what the trainer logs (train/nmt_trainer.cpp), from the same logits
    const Tensor objective = model->loss_sum(src, tgt_in, tgt_out, 0.1, &nll_sum);
    // Read once, in the warm-up: on a GPU a read every step would wait for the device, which the
    // trainer avoids (it reads the logged losses in batches).
    if (step == 0) result.first_loss = nll_sum.item_double() / tokens;
    bench::backward_and_step(mul(objective, 1.0 / tokens), opt, named, 0, t, scale);
  }
  bench::synchronize(t.device);
  const double train_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  result.tokens_per_s = static_cast<double>(a.steps) * tokens / train_s;

  // A fresh model decodes: an untrained model's next-token distribution is nearly flat, so eos
  // rarely makes the beam and hypotheses run to the length limit on both sides (equal work); the
  // trained one has learnt that eos is the most frequent target and stops at random early points.
  Generator beam_gen(1);
  model = build(a, beam_gen);
  Tensor beam_src = sentences(a.src_len, a.beam_batch, a, gen);
  if (a.peer) {  // the same model and sources for the peer (its [B, S] layout)
    nn::NamedTensors weights;
    for (const auto& [name, p] : model->named_parameters()) weights.emplace_back(name, p);
    nn::save_safetensors((a.beam_dir / "weights.safetensors").string(), weights);
    nn::save_safetensors((a.beam_dir / "inputs.safetensors").string(),
                         {{"src", contiguous(transpose(beam_src, 0, 1))}});
  }
  if (!t.on_cpu()) model->to(t.device);
  model->eval();
  NoGradGuard no_grad;
  if (!t.on_cpu()) beam_src = copy_to_device(beam_src, t.device);
  models::BeamSearchOptions opt_bs{.beam = a.beam, .lenpen = 1.0, .max_len_a = kMaxLenA, .max_len_b = kMaxLenB,
                                   .bos = kBos, .eos = kEos};
  bench::synchronize(t.device);
  const auto beam_start = std::chrono::steady_clock::now();
  const auto hyps = models::beam_search(*model, beam_src, opt_bs);
  bench::synchronize(t.device);
  const double beam_s = std::chrono::duration<double>(std::chrono::steady_clock::now() - beam_start).count();
  result.sentences_per_s = static_cast<double>(a.beam_batch) / beam_s;
  double len = 0;
  for (const auto& h : hyps) {
    len += static_cast<double>(h.front().tokens.size());
    result.translations.emplace_back(h.front().tokens.begin(), h.front().tokens.end());
  }
  result.mean_output_len = len / static_cast<double>(hyps.size());
  result.peak_device_bytes = bench::device_peak_bytes(t.device);
  result.rss = rss.figures();
  return result;
}

struct PeerResult {
  double tokens_per_s = 0, sentences_per_s = 0, mean_output_len = 0, first_loss = 0;
  bench::RssFigures rss = {};
  std::int64_t params = 0;
  std::string version;
  std::optional<double> peak_device_bytes = std::nullopt;  // on a GPU
  Translations translations = {};                          // of define's model (--beam-from)
};

// The PyTorch peer in its own process (params_only: its parameter count, nothing timed); nothing
// when python3-torch is not there.
std::optional<PeerResult> run_peer(const Args& a, bool params_only) {
  const auto found = bench::run_python_peer(
      "bench/peers/nmt_torch.py",
      fmt::format("--vocab {} --d-model {} --heads {} --ffn {} --layers {} --batch {} --src-len {} --tgt-len {} "
                  "--steps {} --warmup {} --beam {} --beam-batch {} --max-len-a {} --max-len-b {} --threads {}{}",
                  a.vocab, a.d_model, a.heads, a.ffn, a.layers, a.batch, a.src_len, a.tgt_len, a.steps, kWarmup, a.beam,
                  a.beam_batch, kMaxLenA, kMaxLenB, a.threads,
                  params_only ? std::string(" --params-only") : " --beam-from " + a.beam_dir.string()) +
          // the count alone needs no GPU
          (params_only ? std::string() : bench::peer_device_args(a.train)),
      a.threads);
  if (!found) return std::nullopt;
  const nlohmann::json& j = *found;
  PeerResult r{.params = j["params"].get<std::int64_t>(), .version = j["torch"].get<std::string>()};
  if (!params_only) {
    r.tokens_per_s = j["tokens_per_s"];
    r.sentences_per_s = j["sentences_per_s"];
    r.mean_output_len = j["mean_output_len"];
    r.rss = bench::peer_rss(j);
    r.first_loss = j["first_loss"];
    if (j.contains("peak_device_bytes")) r.peak_device_bytes = j["peak_device_bytes"].get<double>();
    r.translations = j.at("beam_hyps").get<Translations>();
  }
  return r;
}

// How many sentences both frameworks translate alike; the first that differs (or a count that
// differs) is described in `first_difference`.
std::int64_t matching_translations(const Translations& define_t, const Translations& torch_t,
                                   std::string& first_difference) {
  if (define_t.size() != torch_t.size()) {
    first_difference = fmt::format("define decoded {} sentences, pytorch {}", define_t.size(), torch_t.size());
    return 0;
  }
  std::int64_t same = 0;
  for (std::size_t i = 0; i < define_t.size(); ++i) {
    if (define_t[i] == torch_t[i]) {
      ++same;
    } else if (first_difference.empty()) {
      first_difference = fmt::format("sentence {}: define [{}] vs pytorch [{}]", i, fmt::join(define_t[i], " "),
                                     fmt::join(torch_t[i], " "));
    }
  }
  return same;
}

std::string range(const std::vector<double>& v) {
  return fmt::format("{:.2f}-{:.2f}x", *std::min_element(v.begin(), v.end()), *std::max_element(v.begin(), v.end()));
}

}  // namespace

int main(int argc, char** argv) {
  kernels::cpu::restart_with_library_settings(argv);  // the same settings as the define CLI (and the peer)
  kernels::cpu::flush_denormals(true);  // as the define CLI does; the peer sets torch.set_flush_denormal(True)
  Args a;
  try {
    a = parse(argc, argv);
  } catch (const std::exception& e) {  // a usage error, not a crash
    fmt::print(stderr, "error: {}\n", e.what());
    return 2;
  }
  omp_set_num_threads(static_cast<int>(a.threads));
  const double flops = train_flops_per_token(a);
  fmt::print("Translation Transformer training, d_model {} heads {} ffn {} x {} + {} pre-norm layers, V {} (tied), "
             "batch {} x {} -> {}, {} threads, {} round(s)\n",
             a.d_model, a.heads, a.ffn, a.layers, a.layers, a.vocab, a.batch, a.src_len, a.tgt_len, a.threads, a.rounds);
  fmt::print("cpu    : {}, {} steps after {} warm-up per round; beam {} over {} sentences\n", bench::cpu_model(), a.steps,
             kWarmup, a.beam, a.beam_batch);
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
  // The beam model and sources define hands the peer, in a folder of this process's own.
  struct ScratchDir {
    std::filesystem::path path;
    ~ScratchDir() {
      std::error_code ec;
      if (!path.empty()) std::filesystem::remove_all(path, ec);
    }
  } scratch;
  if (a.peer) {
    std::string tmpl = (std::filesystem::temp_directory_path() / "define-nmt-bench-XXXXXX").string();
    if (!::mkdtemp(tmpl.data())) {
      fmt::print(stderr, "error: cannot create a scratch folder for the beam model: {}\n", std::strerror(errno));
      return 1;
    }
    scratch.path = a.beam_dir = tmpl;
  }
  std::vector<double> define_tps, define_sps, torch_tps, torch_sps, ratios, beam_ratios, limits;
  double rate = 0, define_len = 0, torch_len = 0;
  bench::RssFigures define_rss, torch_rss;
  std::optional<double> define_dev_mem, torch_dev_mem;  // peaks of live tensor bytes on a GPU
  std::string torch_version;
  for (std::int64_t r = 0; r < a.rounds; ++r) {
    const DefineResult d = define_run(a);
    define_tps.push_back(d.tokens_per_s);
    define_sps.push_back(d.sentences_per_s);
    define_len = d.mean_output_len;
    define_rss.keep_max(d.rss);
    if (d.peak_device_bytes) define_dev_mem = std::max(define_dev_mem.value_or(0), *d.peak_device_bytes);
    // the best rate seen is the machine's
    rate = std::max(rate, t.on_cpu() ? bench::sgemm_gflops() : bench::device_gemm_gflops(t));
    std::string line = fmt::format("round {}: define {:6.0f} tokens/s {:6.1f} sentences/s", r + 1, d.tokens_per_s,
                                   d.sentences_per_s);
    std::optional<PeerResult> peer;
    if (a.peer) {
      peer = run_peer(a, /*params_only=*/false);
      if (!peer) {
        fmt::print(bench::kNoPeer);
        return 0;
      }
      // The same translations first: otherwise sentences/s would compare different work.
      std::string difference;
      const std::int64_t same = matching_translations(d.translations, peer->translations, difference);
      fmt::print("beam   : round {}: {} of {} translations the same in define and pytorch (same weights and sources)\n",
                 r + 1, same, d.translations.size());
      if (same != static_cast<std::int64_t>(d.translations.size()) || !difference.empty()) {
        fmt::print(stderr,
                   "error: beam search: define and pytorch translate differently on the same weights ({}): the two "
                   "decoders are not the same, and their sentences/s would compare different work\n",
                   difference);
        return 1;
      }
      torch_tps.push_back(peer->tokens_per_s);
      torch_sps.push_back(peer->sentences_per_s);
      torch_rss.keep_max(peer->rss);
      if (peer->peak_device_bytes) torch_dev_mem = std::max(torch_dev_mem.value_or(0), *peer->peak_device_bytes);
      torch_len = peer->mean_output_len;
      torch_version = peer->version;
      ratios.push_back(d.tokens_per_s / peer->tokens_per_s);
      beam_ratios.push_back(d.sentences_per_s / peer->sentences_per_s);
      limits.push_back(rate * 1e9 / flops / peer->tokens_per_s);
      line += fmt::format(" | pytorch {:6.0f} tokens/s {:6.1f} sentences/s | training {:.2f}x (limit {:.2f}x), beam {:.2f}x",
                          peer->tokens_per_s, peer->sentences_per_s, ratios.back(), limits.back(), beam_ratios.back());
    }
    fmt::print("{}\n", line);
    if (r == 0)
      fmt::print("loss   : step 0 define {:.4f}{} (ln V = {:.4f})\n", d.first_loss,
                 peer ? fmt::format(", pytorch {:.4f}", peer->first_loss) : std::string(),
                 std::log(static_cast<double>(a.vocab)));
  }
  define_rss.peak = bench::TrainingRss::process_peak_bytes();  // the whole run's
  // On a GPU the memory that counts is the device's; the RSS follows it.
  const std::string define_memory = t.on_cpu() ? bench::rss_text(define_rss)
                                               : fmt::format("peak device memory {} (live tensors), {}",
                                                             bench::mib(define_dev_mem), bench::rss_text(define_rss));
  fmt::print(
      "define : {:7.0f} tokens/s (median, {:.1f} GFLOP/s), beam {:.1f} sentences/s (mean output {:.1f} subwords), "
      "{}\n",
      bench::median(define_tps), bench::median(define_tps) * flops / 1e9, bench::median(define_sps), define_len,
      define_memory);
  fmt::print("limit  : {:7.0f} tokens/s ({:.1f} MFLOP/token at the best measured {:.0f} GFLOP/s {} rate)\n",
             rate * 1e9 / flops, flops / 1e6, rate, bench::gemm_rate_name(t));
  const nlohmann::json beam = {{"define_sentences_per_s", bench::median(define_sps)}};
  if (!a.peer) {
    if (!t.on_cpu()) bench::print_device_summary("nmt", t, bench::median(define_tps), define_dev_mem, {}, {}, beam);
    return 0;
  }
  const std::string torch_memory = bench::peer_memory_text(t, torch_rss, torch_dev_mem);
  const std::string memory_ratio = bench::memory_ratio_text(t, define_rss, torch_rss, define_dev_mem, torch_dev_mem);
  fmt::print(
      "pytorch: {:7.0f} tokens/s (median, {:.1f} GFLOP/s), beam {:.1f} sentences/s (mean output {:.1f} subwords), "
      "{} (torch {})\n",
      bench::median(torch_tps), bench::median(torch_tps) * flops / 1e9, bench::median(torch_sps), torch_len,
      torch_memory, torch_version);
  fmt::print(
      "ratios : define/pytorch training tokens/s {:.2f}x (median of {} rounds, range {}; limit {:.2f}x), "
      "beam sentences/s {:.2f}x (range {}), {}\n",
      bench::median(ratios), ratios.size(), range(ratios), bench::median(limits), bench::median(beam_ratios),
      range(beam_ratios), memory_ratio);
  if (!t.on_cpu())
    bench::print_device_summary(
        "nmt", t, bench::median(define_tps), define_dev_mem, bench::median(torch_tps), torch_dev_mem,
        {{"define_sentences_per_s", bench::median(define_sps)}, {"torch_sentences_per_s", bench::median(torch_sps)}});
  return 0;
}
