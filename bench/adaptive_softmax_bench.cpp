// The fused adaptive-softmax loss (autograd/adaptive_softmax.h) against what it replaces, and
// the adaptive softmax layer against a full softmax over the vocabulary. float32, best of 5
// after a warm-up; forward alone (no graph) and forward + backward (define::grad).
//
//   1. Loss from given logits: fused (one pass per head row and per tail row, gradients in one
//      elementwise pass) vs the generic ops: log_softmax of the whole head, gather of each row's
//      slot, per tail log_softmax + gather of the tail rows, scatter_add back to the rows, mask of
//      ignored rows, sum.
//   2. The layer from hidden states [N, n], written with autograd ops exactly as
//      nn::AdaptiveSoftmax::loss computes it (bench executables link define_autograd only):
//      partition the rows, head GEMM over every row, tail i's projection n -> n / 4^(i+1) and GEMM
//      over only its rows, fused loss; vs the same GEMMs with the generic loss of (1); vs a full
//      softmax: logits = h W^T over all V words + cross_entropy.
// N = 2048, n = 256, factor 4; V = 10000 (cutoffs 2000, 5000) and V = 33278 (cutoffs 4000,
// 20000). Targets are Zipf-like (P(t < k) = ln(k + 1) / ln V), so most rows stay in the head as
// they do on real text. Ratios are other / fused (> 1: the fused path is faster).
// Devices: the CPU fast path; a GPU when this build has one (else reported as skipped).
//   adaptive_softmax_bench [threads]     (default 2)
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <vector>

#include <fmt/format.h>

#include "autograd/ops.h"
#include "bench/bench_family.h"
#include "bench/bench_util.h"
#include "core/factory.h"
#include "kernels/cpu/gemm_provider.h"
#include "kernels/devices.h"

DEFINE_BENCH_FAMILY("adaptive_softmax");

namespace {

using namespace define;
using bench::best_seconds;
using Bounds = std::vector<std::int64_t>;

struct Problem {
  std::int64_t n_rows, width;
  Bounds bounds;  // c_0 .. c_T = V
};

// Zipf-like targets: t = floor((V + 1)^u) - 1, u ~ U(0, 1).
Tensor zipf_targets(std::int64_t rows, std::int64_t vocab, Device d) {
  Generator gen(3);
  const std::vector<float> u = rand_uniform({rows}, 0, 1, {}, gen).to_vector<float>();
  std::vector<std::int64_t> t;
  for (float x : u)
    t.push_back(std::min<std::int64_t>(vocab - 1, static_cast<std::int64_t>(std::pow(double(vocab + 1), x)) - 1));
  return from_vector<std::int64_t>(t, {rows}, d);
}

// The generic composition the fused loss replaces (mean over all rows; no ignored rows here).
Tensor loss_by_generic_ops(const Tensor& head, const std::vector<Tensor>& tails, const AdaptivePartition& part,
                           const Tensor& slot, const Bounds& b) {
  const std::int64_t n = head.size(0);
  Tensor nll = neg(reshape(gather(log_softmax(head, 1), 1, slot), {n}));
  for (std::size_t i = 0; i < tails.size(); ++i) {
    if (part.counts[i + 1] == 0) continue;
    const std::int64_t m = part.counts[i + 1];
    const Tensor lp = gather(log_softmax(tails[i], 1), 1, reshape(part.local[i + 1], {m, 1}));
    nll = scatter_add(nll, 0, part.rows[i + 1], neg(reshape(lp, {m})));
  }
  (void)b;
  return mean(nll);
}

// Each row's head column: its word in the shortlist, else its tail's cluster logit ([N, 1]).
Tensor head_slots(const Tensor& target, const Bounds& b) {
  std::vector<std::int64_t> s;
  for (std::int64_t t : copy_to_device(target, Device::cpu()).to_vector<std::int64_t>()) {
    std::int64_t slot = t;
    if (t >= b[0]) slot = b[0] + (std::upper_bound(b.begin(), b.end(), t) - b.begin() - 1);
    s.push_back(slot);
  }
  return from_vector<std::int64_t>(s, {static_cast<std::int64_t>(s.size()), 1}, target.device());
}

struct Timing {
  double forward, forward_backward;
};

Timing time_loss(const std::function<Tensor()>& loss, const std::vector<Tensor>& leaves, Device d) {
  Timing t{};
  {
    NoGradGuard no_grad;
    t.forward = best_seconds([&] { (void)loss(); }, d);
  }
  t.forward_backward = best_seconds([&] { (void)grad(loss(), leaves); }, d);
  return t;
}

void print_row(const char* what, const Timing& fused, const Timing& other) {
  fmt::print("    {:<34} {:9.3f} {:9.3f} {:6.2f}   {:9.3f} {:9.3f} {:6.2f}\n", what, fused.forward * 1e3,
             other.forward * 1e3, other.forward / fused.forward, fused.forward_backward * 1e3,
             other.forward_backward * 1e3, other.forward_backward / fused.forward_backward);
}

void run_problem(const Problem& p, Device d) {
  const Bounds& b = p.bounds;
  const std::int64_t vocab = b.back();
  const Tensor target = zipf_targets(p.n_rows, vocab, d);
  const AdaptivePartition part = adaptive_partition(target, b);
  fmt::print("  V = {}, cutoffs {}, N = {}, n = {}: rows per cluster {}\n", vocab,
             fmt::join(Bounds(b.begin(), b.end() - 1), ","), p.n_rows, p.width, fmt::join(part.counts, "/"));
  fmt::print("    {:<34} {:>9} {:>9} {:>6}   {:>9} {:>9} {:>6}\n", "(ms)", "fused fw", "other", "ratio", "fused f+b",
             "other", "ratio");

  // 1. Loss from logits.
  Generator gen(5);
  Tensor head = copy_to_device(rand_uniform({p.n_rows, b[0] + std::int64_t(b.size()) - 1}, -3, 3, {}, gen), d);
  std::vector<Tensor> tails, rows, leaves{head};
  for (std::size_t i = 0; i + 1 < b.size(); ++i) {
    tails.push_back(copy_to_device(rand_uniform({part.counts[i + 1], b[i + 1] - b[i]}, -3, 3, {}, gen), d));
    rows.push_back(part.rows[i + 1]);
  }
  head.set_requires_grad();
  for (Tensor& t : tails) leaves.push_back(t.set_requires_grad());
  const Tensor slot = head_slots(target, b);
  const Timing fused = time_loss([&] { return adaptive_softmax_loss(head, tails, rows, target, b); }, leaves, d);
  const Timing generic = time_loss([&] { return loss_by_generic_ops(head, tails, part, slot, b); }, leaves, d);
  print_row("loss from logits: generic ops", fused, generic);

  // 2. Layers from hidden states (untied fairseq form: head [c_0 + T, n], tail i projection
  // [n / 4^(i+1), n] and words [c_{i+1} - c_i, n / 4^(i+1)], no biases).
  const auto param = [&](std::int64_t out, std::int64_t in) {
    const double a = std::sqrt(6.0 / double(in + out));
    Tensor w = copy_to_device(rand_uniform({out, in}, -a, a, {}, gen), d);
    return w.set_requires_grad();
  };
  const Tensor head_w = param(b[0] + std::int64_t(b.size()) - 1, p.width);
  std::vector<Tensor> proj_w, word_w;
  std::vector<Tensor> layer_leaves{head_w};
  for (std::size_t i = 0; i + 1 < b.size(); ++i) {
    const std::int64_t dim = p.width >> (2 * (i + 1));
    proj_w.push_back(param(dim, p.width));
    word_w.push_back(param(b[i + 1] - b[i], dim));
    layer_leaves.push_back(proj_w.back());
    layer_leaves.push_back(word_w.back());
  }
  Tensor hidden = copy_to_device(rand_uniform({p.n_rows, p.width}, -1, 1, {}, gen), d);
  layer_leaves.push_back(hidden.set_requires_grad());
  // Head over every row, tail i over only the rows of its words; `loss` turns the logits into
  // the mean NLL. The row bookkeeping (partition, slots) is inside, as in the layer.
  const auto adaptive_layer = [&](bool fused_loss) {
    const AdaptivePartition pt = adaptive_partition(target, b);
    const Tensor hl = linear(hidden, head_w);
    std::vector<Tensor> tl, tr;
    for (std::size_t i = 0; i + 1 < b.size(); ++i) {
      tr.push_back(pt.rows[i + 1]);
      tl.push_back(linear(linear(index_select(hidden, 0, pt.rows[i + 1]), proj_w[i]), word_w[i]));
    }
    if (fused_loss) return adaptive_softmax_loss(hl, tl, tr, target, b);
    return loss_by_generic_ops(hl, tl, pt, head_slots(target, b), b);
  };
  const Timing layer_fused = time_loss([&] { return adaptive_layer(true); }, layer_leaves, d);
  const Timing layer_gen = time_loss([&] { return adaptive_layer(false); }, layer_leaves, d);
  print_row("layer: same GEMMs + generic loss", layer_fused, layer_gen);
  const Tensor full_w = param(vocab, p.width);
  const Timing full = time_loss([&] { return cross_entropy(linear(hidden, full_w), target); }, {hidden, full_w}, d);
  print_row("layer: full softmax over V", layer_fused, full);
}

}  // namespace

int main(int argc, char** argv) {
  define::kernels::cpu::restart_with_library_settings(argv);  // the same settings as the define CLI
  const int threads = argc > 1 ? std::atoi(argv[1]) : 2;
  omp_set_num_threads(threads);
  const std::vector<Problem> problems = {{2048, 256, {2000, 5000, 10000}}, {2048, 256, {4000, 20000, 33278}}};
  const kernels::DeviceAvailability avail = kernels::register_devices();
  fmt::print("Adaptive softmax, float32, best of 5; ratio = other / fused\n");
  fmt::print("CPU fast path, {} threads\n", omp_get_max_threads());
  for (const Problem& p : problems) run_problem(p, Device::cpu());
  if (avail.cuda_devices > 0) {
    fmt::print("CUDA device 0\n");
    for (const Problem& p : problems) run_problem(p, Device::cuda(0));
  } else {
    fmt::print("CUDA: skipped (no GPU in this build or machine)\n");
  }
  return 0;
}
