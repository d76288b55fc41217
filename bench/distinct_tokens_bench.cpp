// How many distinct ids a language-model batch holds, and what running the token-representation
// unit once per distinct id (models/token_representation.h, `distinct_tokens`) saves:
//   1. per corpus and batch shape (B streams x T steps, AWD-LSTM's layout), the distinct ids of
//      a batch as a share of its positions (mean, smallest, largest over the training split);
//   2. the DeFINE unit of configs/ptb-define-lstm.json (n = 128, k = 512, N = 3, m = 256), forward
//      and backward on PTB batches, once per position against once per distinct id, and a
//      standard 256-wide table of the same batch for scale (the issue's target: the unit no dearer
//      than the embedding it replaces).
// Usage: distinct_tokens_bench [threads]. Needs ../shared/data (scripts/get-data ptb wikitext-2).
#include <omp.h>

#include <algorithm>
#include <cstdio>
#include <string>
#include <vector>

#include "autograd/ops.h"
#include "bench_util.h"
#include "core/config.h"
#include "core/factory.h"
#include "data/batching.h"
#include "data/corpus.h"
#include "kernels/cpu/gemm_provider.h"
#include "models/token_representation.h"
#include "train/corpus_location.h"

using namespace define;

namespace {

struct Share {
  double mean = 0, lo = 1, hi = 0;
};

Share distinct_share(const std::vector<std::int64_t>& ids, std::int64_t B, std::int64_t T) {
  const Tensor data = data::batchify(ids, B);
  const std::int64_t rows = data.size(0);
  const std::int64_t* p = data.data<std::int64_t>();
  Share s;
  int n = 0;
  std::vector<std::int64_t> window;
  for (std::int64_t t0 = 0; t0 + T <= rows; t0 += T) {
    window.assign(p + t0 * B, p + (t0 + T) * B);
    std::sort(window.begin(), window.end());
    const double share =
        static_cast<double>(std::unique(window.begin(), window.end()) - window.begin()) / static_cast<double>(T * B);
    s.mean += share;
    s.lo = std::min(s.lo, share);
    s.hi = std::max(s.hi, share);
    ++n;
  }
  s.mean /= n;
  return s;
}

}  // namespace

int main(int argc, char** argv) {
  define::kernels::cpu::restart_with_library_settings(argv);  // the same settings as the define CLI
  const int threads = argc > 1 ? std::atoi(argv[1]) : 2;
  omp_set_num_threads(threads);
  const data::Corpus ptb = data::Corpus::load(train::find_corpus("ptb"));
  const data::Corpus wt2 = data::Corpus::load(train::find_corpus("wikitext-2"));
  std::printf("distinct ids per batch (share of the batch's positions, over the training split)\n");
  std::printf("%-38s %8s %8s %8s\n", "corpus, B x T", "mean", "min", "max");
  struct Case {
    const char* name;
    const data::Corpus* corpus;
    std::int64_t B, T;
  };
  for (const Case& c : {Case{"PTB, 20 x 35 (LSTM LM)", &ptb, 20, 35}, Case{"WikiText-2, 20 x 35", &wt2, 20, 35},
                        Case{"WikiText-2, 16 x 64 (Transformer-XL)", &wt2, 16, 64},
                        Case{"WikiText-2, 60 x 150 (WT-103 recipe)", &wt2, 60, 150}}) {
    const Share s = distinct_share(c.corpus->train, c.B, c.T);
    std::printf("%-38s %7.1f%% %7.1f%% %7.1f%%\n", c.name, 100 * s.mean, 100 * s.lo, 100 * s.hi);
  }

  // The main job's DeFINE unit on PTB batches of 20 x 35.
  const std::int64_t V = static_cast<std::int64_t>(ptb.vocab.size());
  // As configs/ptb-define-lstm.json has it (norm none: without the key the unit would run its
  // default chunk layer norm, which the main job does not).
  const std::string unit = R"({"type": "define", "dim": 128, "out_dim": 256, "k": 512, "depth": 3, "g_max": 8,
                               "norm": "none", "init": "xavier", "reduce_skip": true, "distinct_tokens": )";
  Generator g1(1), g2(1), g3(1);
  models::TokenInput per_position(models::read_token_input_config(Config::from_text(unit + "false}", "<b>"), V), g1);
  models::TokenInput distinct(models::read_token_input_config(Config::from_text(unit + "true}", "<b>"), V), g2);
  models::TokenInput table(
      models::read_token_input_config(Config::from_text(R"({"type": "embedding", "dim": 256})", "<b>"), V), g3);
  const Tensor batches = data::batchify(ptb.train, 20);
  std::int64_t at = 0;
  auto step = [&](models::TokenInput& input) {
    const Tensor x = contiguous(narrow(batches, 0, at, 35));
    at = (at + 35) % (batches.size(0) - 35);
    input.zero_grad();  // as a training step does: the table's gradient starts fresh, not added to
    const Tensor y = input.forward(x);
    backward(sum(y));
  };
  const double t_pos = bench::best_seconds([&] { step(per_position); }, Device::cpu(), 30);
  const double t_dis = bench::best_seconds([&] { step(distinct); }, Device::cpu(), 30);
  const double t_tab = bench::best_seconds([&] { step(table); }, Device::cpu(), 30);
  std::printf("\nDeFINE unit of ptb-define-lstm (forward + backward, PTB batch 20 x 35, %d threads, best of 30)\n",
              threads);
  std::printf("  once per position     %8.3f ms\n", 1e3 * t_pos);
  std::printf("  once per distinct id  %8.3f ms  (%.2fx faster)\n", 1e3 * t_dis, t_pos / t_dis);
  std::printf("  standard 256-d table  %8.3f ms  (the unit per distinct id costs %.2fx the table)\n", 1e3 * t_tab,
              t_dis / t_tab);
  return 0;
}
