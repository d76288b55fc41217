// `define demo`: a two-layer network learns to classify points of two interleaved spirals,
// exercising the whole stack (tensors, Philox init, matmul, gelu, cross-entropy, tape autograd)
// without any data files. The loss falls from ln(2) toward 0; the accuracy is printed.
#include <fmt/format.h>

#include <cmath>
#include <numbers>

#include "autograd/ops.h"
#include "tools/command.h"

namespace define::cli {
namespace {

struct Options {
  int steps = 1500;
  int hidden = 64;
  double lr = 2.0;
  std::uint64_t seed = 1;
};

Options parse(const std::vector<std::string>& args) {
  Options o;
  for (std::size_t i = 0; i < args.size(); ++i) {
    auto value = [&](const char* flag) {
      if (i + 1 >= args.size()) fail("demo", "option {} needs a value", flag);
      return args[++i];
    };
    if (args[i] == "--steps") o.steps = std::stoi(value("--steps"));
    else if (args[i] == "--hidden") o.hidden = std::stoi(value("--hidden"));
    else if (args[i] == "--lr") o.lr = std::stod(value("--lr"));
    else if (args[i] == "--seed") o.seed = std::stoull(value("--seed"));
    else if (args[i] == "--help") {
      fmt::print("usage: define demo [--steps N] [--hidden H] [--lr LR] [--seed S]\n");
      std::exit(0);
    } else {
      fail("demo", "unknown option '{}'", args[i]);
    }
  }
  if (o.steps <= 0 || o.hidden <= 0 || !(o.lr > 0)) fail("demo", "steps, hidden and lr must be positive");
  return o;
}

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

int run_demo(const std::vector<std::string>& args) {
  const Options o = parse(args);
  Generator gen(o.seed);
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
  for (int step = 1; step <= o.steps; ++step) {
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
