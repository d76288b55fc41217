// `define demo`: a two-layer network learns to classify points of two interleaved spirals,
// exercising the whole stack (tensors, Philox init, matmul, gelu, cross-entropy, tape autograd)
// without any data files. The loss falls from ln(2) toward 0; the accuracy is printed.
#include <fmt/format.h>

#include <cmath>
#include <numbers>

#include "autograd/ops.h"
#include "tools/command.h"
#include "tools/options.h"

namespace define::cli {
namespace {

// Two spirals, 200 points each, labels 0/1.
void spirals(std::vector<float>& xy, std::vector<std::int64_t>& label) {
  const int n = 200;
  for (int c = 0; c < 2; ++c)
    for (int i = 0; i < n; ++i) {
      const double r = 0.1 + 0.9 * i / n, a = 3.0 * std::numbers::pi * i / n + c * std::numbers::pi;
      xy.push_back(static_cast<float>(r * std::cos(a)));
      xy.push_back(static_cast<float>(r * std::sin(a)));
      label.push_back(c);
    }
}

}  // namespace

DemoSettings parse_demo_options(const std::vector<std::string>& args) {
  const Options opts = parse_options("demo", args, {.required = {}, .repeated = {}, .optional = {"steps", "hidden", "lr", "seed"}, .flags = {}});
  DemoSettings o;
  o.help = opts.help;
  if (opts.has("steps")) o.steps = opts.get_int("steps");
  if (opts.has("hidden")) o.hidden = opts.get_int("hidden");
  if (opts.has("lr")) o.lr = opts.get_double("lr");
  if (opts.has("seed")) o.seed = opts.get_int("seed");
  // Bounds that keep the demo a demo: a hidden width of millions would ask for terabytes.
  if (o.steps < 1 || o.steps > 1'000'000) fail("demo", "--steps must be in [1, 1000000], got {}", o.steps);
  if (o.hidden < 1 || o.hidden > 4096) fail("demo", "--hidden must be in [1, 4096], got {}", o.hidden);
  if (!(o.lr > 0) || !std::isfinite(o.lr)) fail("demo", "--lr must be a positive finite number, got {}", o.lr);
  if (o.seed < 0) fail("demo", "--seed must be at least 0, got {}", o.seed);
  return o;
}

int run_demo(const std::vector<std::string>& args) {
  const DemoSettings o = parse_demo_options(args);
  if (o.help) {
    fmt::print("usage: define demo [--steps N] [--hidden H] [--lr LR] [--seed S]\n");
    return 0;
  }
  Generator gen(static_cast<std::uint64_t>(o.seed));
  std::vector<float> xy;
  std::vector<std::int64_t> label;
  spirals(xy, label);
  const std::int64_t n = static_cast<std::int64_t>(label.size());
  Tensor x = from_vector(xy, {n, 2});
  Tensor y = from_vector(label, {n});

  const double b1 = 1.0 / std::sqrt(2.0), b2 = 1.0 / std::sqrt(double(o.hidden));
  Tensor w1 = rand_uniform({o.hidden, 2}, -b1 * 3, b1 * 3, {}, gen).set_requires_grad();
  Tensor c1 = zeros({o.hidden}).set_requires_grad();
  Tensor w2 = rand_uniform({o.hidden, o.hidden}, -b2, b2, {}, gen).set_requires_grad();
  Tensor c2 = zeros({o.hidden}).set_requires_grad();
  Tensor w3 = rand_uniform({2, o.hidden}, -b2, b2, {}, gen).set_requires_grad();
  std::vector<Tensor> params{w1, c1, w2, c2, w3};

  fmt::print("define demo: two spirals, {} points, MLP 2-{}-{}-2 (gelu), SGD lr {}\n", n, o.hidden, o.hidden, o.lr);
  Tensor logits;
  for (std::int64_t step = 1; step <= o.steps; ++step) {
    Tensor h = gelu(linear(x, w1, c1));
    h = gelu(linear(h, w2, c2));
    logits = linear(h, w3);
    Tensor loss = cross_entropy(logits, y);
    for (Tensor& p : params) p.set_grad(Tensor());
    backward(loss);
    {
      NoGradGuard no_grad;
      for (Tensor& p : params) add_(p, p.grad(), -o.lr);
    }
    const double l = loss.item<float>();
    if (!std::isfinite(l)) fail("demo", "loss became {} at step {}; lower --lr", l, step);
    if (step == 1 || step % 250 == 0 || step == o.steps) fmt::print("step {:4d}  loss {:.4f}\n", step, l);
  }
  NoGradGuard no_grad;
  const std::vector<std::int64_t> pred = argmax(logits, 1).to_vector<std::int64_t>();
  std::int64_t correct = 0;
  for (std::int64_t i = 0; i < n; ++i) correct += pred[i] == label[i];
  fmt::print("accuracy {:.1f}% ({} of {})\n", 100.0 * correct / n, correct, n);
  return 0;
}

}  // namespace define::cli
