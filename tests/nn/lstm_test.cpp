// nn::LSTM: exact parameter counts (PyTorch's formula, and AWD-LSTM's 400/1150/1150/400 stack with
// its tied 10,000-word embedding), PyTorch's parameter names and initialisation, the fused op
// against an unfused composition of autograd ops, a float64 gradient check of a stack with
// initial-state gradients, hidden state carried across chunks, WeightDrop on weight_hh_l<k>,
// dropout between layers, a run on the emulated device, and the named errors.
#include <catch2/catch.hpp>

#include <cmath>

#include "harness/op_harness.h"
#include "kernels/backend.h"
#include "kernels/devices.h"
#include "nn/embedding.h"
#include "nn/lstm.h"
#include "nn/weight_drop.h"
#include "support/gradients.h"

using namespace define;
using namespace define::nn;
using Catch::Contains;
using define::test::check_gradients;
using define::test::max_abs;
using define::test::max_diff;
using define::test::random_leaf;
using define::test::values;
using define::test::with_parameters;

namespace {

// PyTorch's count for one LSTM layer: weight_ih 4H x in, weight_hh 4H x H, two biases of 4H.
std::int64_t layer_count(std::int64_t in, std::int64_t H, bool bias = true) {
  return 4 * H * (in + H) + (bias ? 2 * 4 * H : 0);
}

// One layer written with generic autograd ops, step by step (no fused kernel anywhere).
LstmLayerResult unfused_layer(const Tensor& x, const Tensor& h0, const Tensor& c0, const Tensor& w_ih,
                              const Tensor& w_hh, const Tensor& b_ih, const Tensor& b_hh) {
  Tensor h = h0, c = c0;
  std::vector<Tensor> ys;
  for (std::int64_t t = 0; t < x.shape()[0]; ++t) {
    const Tensor gates = add(linear(select(x, 0, t), w_ih, b_ih), linear(h, w_hh, b_hh));
    const std::vector<Tensor> g = chunk(gates, 4, 1);  // i, f, g, o
    c = add(mul(sigmoid(g[1]), c), mul(sigmoid(g[0]), tanh(g[2])));
    h = mul(sigmoid(g[3]), tanh(c));
    ys.push_back(h);
  }
  return {stack(ys, 0), h, c};
}

// Output, then every layer's h_n and c_n, flattened into one tensor.
Tensor everything(const LSTMOutput& out) {
  std::vector<Tensor> parts{flatten(out.output)};
  for (std::size_t k = 0; k < out.state.h.size(); ++k) {
    parts.push_back(flatten(out.state.h[k]));
    parts.push_back(flatten(out.state.c[k]));
  }
  return concat(parts, 0);
}

LSTMState random_state(const LSTM& lstm, std::int64_t batch, Generator& gen, DType dtype = DType::Float64) {
  LSTMState s;
  for (std::int64_t H : lstm.hidden_sizes()) {
    s.h.push_back(rand_uniform({batch, H}, -1, 1, {.dtype = dtype}, gen).set_requires_grad(true));
    s.c.push_back(rand_uniform({batch, H}, -1, 1, {.dtype = dtype}, gen).set_requires_grad(true));
  }
  return s;
}

}  // namespace

TEST_CASE("nn: LSTM parameter counts, PyTorch's and AWD-LSTM's", "[nn][lstm]") {
  // PyTorch nn.LSTM(400, 1150): 4*1150*(400+1150) + 2*4*1150 (the stack below builds this layer;
  // smaller sizes check the stacked and bias-free forms without drawing tens of millions of values).
  CHECK(layer_count(400, 1150) == 7'139'200);
  CHECK(LSTM(40, 115).num_parameters() == layer_count(40, 115));
  CHECK(LSTM(40, 115, 1, {.bias = false}).num_parameters() == layer_count(40, 115, false));
  CHECK(LSTM(40, 115, 3).num_parameters() == layer_count(40, 115) + 2 * layer_count(115, 115));

  // AWD-LSTM: 400 -> 1150 -> 1150 -> 400, i.e. 7,139,200 + 10,589,200 + 2,483,200.
  const std::int64_t stack = layer_count(400, 1150) + layer_count(1150, 1150) + layer_count(1150, 400);
  CHECK(layer_count(1150, 1150) == 10'589'200);
  CHECK(layer_count(1150, 400) == 2'483'200);
  CHECK(stack == 20'211'600);
  LSTM awd(400, std::vector<std::int64_t>{1150, 1150, 400});
  CHECK(awd.num_parameters() == stack);
  CHECK(awd.parameter_breakdown() == std::vector<std::pair<std::string, std::int64_t>>{
                                         {"weight_ih_l0", 1'840'000}, {"weight_hh_l0", 5'290'000},
                                         {"bias_ih_l0", 4'600},       {"bias_hh_l0", 4'600},
                                         {"weight_ih_l1", 5'290'000}, {"weight_hh_l1", 5'290'000},
                                         {"bias_ih_l1", 4'600},       {"bias_hh_l1", 4'600},
                                         {"weight_ih_l2", 1'840'000}, {"weight_hh_l2", 640'000},
                                         {"bias_ih_l2", 1'600},       {"bias_hh_l2", 1'600}});
  CHECK(awd.num_layers() == 3);
  CHECK(awd.output_size() == 400);
  // With the tied 10,000 x 400 embedding (the decoder reuses it) and the decoder's bias of 10,000.
  Embedding embedding(10000, 400);
  const std::int64_t decoder_bias = 10000;
  CHECK(embedding.num_parameters() == 10000 * 400);
  CHECK(awd.num_parameters() + embedding.num_parameters() + decoder_bias == 24'221'600);
}

TEST_CASE("nn: LSTM parameter names, shapes and initialisation as PyTorch", "[nn][lstm]") {
  Generator g1(3), g2(3);
  LSTM a(5, std::vector<std::int64_t>{7, 4}, {}, g1), b(5, std::vector<std::int64_t>{7, 4}, {}, g2);
  CHECK(a.named_parameters().keys() ==
        std::vector<std::string>{"weight_ih_l0", "weight_hh_l0", "bias_ih_l0", "bias_hh_l0", "weight_ih_l1",
                                 "weight_hh_l1", "bias_ih_l1", "bias_hh_l1"});
  CHECK(a.parameter("weight_ih_l0").shape() == Shape{28, 5});
  CHECK(a.parameter("weight_hh_l0").shape() == Shape{28, 7});
  CHECK(a.parameter("bias_hh_l0").shape() == Shape{28});
  CHECK(a.parameter("weight_ih_l1").shape() == Shape{16, 7});
  CHECK(a.parameter("weight_hh_l1").shape() == Shape{16, 4});
  CHECK(values(a.parameter("weight_hh_l1")) == values(b.parameter("weight_hh_l1")));  // reproducible from the seed
  // Every parameter of layer k ~ U(-1/sqrt(H_k), 1/sqrt(H_k)).
  for (const auto& [name, bound] : std::vector<std::pair<std::string, double>>{
           {"weight_ih_l0", 1 / std::sqrt(7.0)}, {"weight_hh_l0", 1 / std::sqrt(7.0)},
           {"weight_ih_l1", 1 / std::sqrt(4.0)}, {"weight_hh_l1", 1 / std::sqrt(4.0)}}) {
    INFO(name);
    CHECK(max_abs(a.parameter(name)) <= bound);
    CHECK(max_abs(a.parameter(name)) > 0.8 * bound);
  }
  CHECK(LSTM(5, 7, 1, {.bias = false}).named_parameters().keys() ==
        std::vector<std::string>{"weight_ih_l0", "weight_hh_l0"});
}

// The fused op against the composition of linear / chunk / sigmoid / tanh per step, in float64:
// outputs, final states and every gradient (x, initial states, all weights) to 1e-12.
TEST_CASE("nn: the fused LSTM equals an unfused composition of autograd ops", "[nn][lstm]") {
  Generator gen(8);
  LSTM lstm(5, std::vector<std::int64_t>{7, 4}, {}, gen);
  lstm.to(DType::Float64);
  const Tensor x = random_leaf({6, 3, 5}, gen);
  const LSTMState s0 = random_state(lstm, 3, gen);
  std::vector<Tensor> leaves{x};
  for (std::size_t k = 0; k < 2; ++k) {
    leaves.push_back(s0.h[k]);
    leaves.push_back(s0.c[k]);
  }
  for (const Tensor& p : lstm.parameters()) leaves.push_back(p);

  const Tensor fused = everything(lstm.forward(x, s0));
  LSTMOutput composed;
  Tensor y = x;
  for (std::size_t k = 0; k < 2; ++k) {
    const std::string l = "_l" + std::to_string(k);
    LstmLayerResult r = unfused_layer(y, s0.h[k], s0.c[k], lstm.parameter("weight_ih" + l),
                                      lstm.parameter("weight_hh" + l), lstm.parameter("bias_ih" + l),
                                      lstm.parameter("bias_hh" + l));
    composed.state.h.push_back(r.h_n);
    composed.state.c.push_back(r.c_n);
    y = r.output;
  }
  composed.output = y;
  const Tensor unfused = everything(composed);
  CHECK(max_diff(values(fused), values(unfused)) < 1e-12);

  const Tensor u = rand_uniform(fused.shape(), -1, 1, {.dtype = DType::Float64}, gen);
  const std::vector<Tensor> g_fused = define::grad(sum(mul(fused, u)), leaves);
  const std::vector<Tensor> g_unfused = define::grad(sum(mul(unfused, u)), leaves);
  for (std::size_t i = 0; i < leaves.size(); ++i) {
    INFO("leaf " << i);
    CHECK(max_diff(values(g_fused[i]), values(g_unfused[i])) < 1e-12);
  }
}

TEST_CASE("nn: LSTM float64 gradient check of a two-layer stack with initial-state gradients", "[nn][lstm]") {
  Generator gen(4);
  LSTM lstm(3, std::vector<std::int64_t>{4, 2}, {}, gen);
  lstm.to(DType::Float64);
  const Tensor x = random_leaf({3, 2, 3}, gen);
  const LSTMState s0 = random_state(lstm, 2, gen);
  const auto wrt = with_parameters(
      lstm, {{"x", x}, {"h0[0]", s0.h[0]}, {"c0[0]", s0.c[0]}, {"h0[1]", s0.h[1]}, {"c0[1]", s0.c[1]}});
  check_gradients([&] { return everything(lstm.forward(x, s0)); }, wrt);
}

// Truncated BPTT: two chunks with the state carried (detached) give the outputs and final state of
// one run over the whole sequence; the carried state is cut off from the first chunk's graph.
TEST_CASE("nn: LSTM state carried across chunks equals one run over the concatenation", "[nn][lstm]") {
  Generator gen(5);
  LSTM lstm(4, 6, 2, {}, gen);
  lstm.to(DType::Float64);
  const Tensor x = rand_uniform({7, 3, 4}, -1, 1, {.dtype = DType::Float64}, gen);
  const LSTMOutput whole = lstm.forward(x);
  const LSTMOutput first = lstm.forward(narrow(x, 0, 0, 3));
  const LSTMState carried = detach(first.state);
  CHECK(first.state.h[0].grad_fn() != nullptr);
  CHECK(carried.h[0].grad_fn() == nullptr);
  CHECK_FALSE(carried.c[1].requires_grad());
  const LSTMOutput second = lstm.forward(narrow(x, 0, 3, 4), carried);
  CHECK(max_diff(values(concat({first.output, second.output}, 0)), values(whole.output)) < 1e-13);
  for (std::size_t k = 0; k < 2; ++k) {
    CHECK(max_diff(values(second.state.h[k]), values(whole.state.h[k])) < 1e-13);
    CHECK(max_diff(values(second.state.c[k]), values(whole.state.c[k])) < 1e-13);
  }
  // Backward from the second chunk reaches the weights, and nothing of the first chunk's graph.
  backward(sum(second.output));
  CHECK(lstm.parameter("weight_hh_l0").grad().defined());
  CHECK_FALSE(carried.h[0].grad().defined());
}

// AWD-LSTM's DropConnect: WeightDrop names weight_hh_l<k> through the module's parameter API; the
// fused op then runs on the dropped weights, and gradients reach the raw weights through the mask.
TEST_CASE("nn: WeightDrop drops an LSTM's weight_hh_l<k>", "[nn][lstm]") {
  const double p = 0.5;
  Generator init(6), gen(17), replay(17);
  auto lstm = std::make_shared<LSTM>(3, std::vector<std::int64_t>{5, 4}, LSTMOptions{}, init);
  auto wd = weight_drop(lstm, {"weight_hh_l0", "weight_hh_l1"}, p);
  wd->set_generator(gen);
  CHECK(wd->named_parameters().keys()[1] == "module.weight_hh_l0");
  const Tensor x = rand_uniform({4, 2, 3}, -1, 1, {}, init);
  const LSTMOutput dropped = wd->forward(x);

  // The same masks, replayed from the generator's seed, applied by hand.
  const Tensor w0 = dropout(lstm->parameter("weight_hh_l0"), p, true, replay);
  const Tensor w1 = dropout(lstm->parameter("weight_hh_l1"), p, true, replay);
  const LstmLayerResult l0 = lstm_layer(x, Tensor(), Tensor(), lstm->parameter("weight_ih_l0"), w0,
                                        lstm->parameter("bias_ih_l0"), lstm->parameter("bias_hh_l0"));
  const LstmLayerResult l1 = lstm_layer(l0.output, Tensor(), Tensor(), lstm->parameter("weight_ih_l1"), w1,
                                        lstm->parameter("bias_ih_l1"), lstm->parameter("bias_hh_l1"));
  CHECK(values(dropped.output) == values(l1.output));
  CHECK(values(dropped.output) != values(lstm->forward(x).output));

  // Gradient to the raw weight: zero exactly where the mask dropped an element.
  backward(sum(dropped.output));
  const std::vector<double> mask = values(w0), grad = values(lstm->parameter("weight_hh_l0").grad());
  int dropped_elements = 0;
  for (std::size_t i = 0; i < mask.size(); ++i) {
    if (mask[i] == 0.0) {
      ++dropped_elements;
      CHECK(grad[i] == 0.0);
    }
  }
  CHECK(dropped_elements > 0);
  CHECK(max_abs(lstm->parameter("weight_hh_l0").grad()) > 0.0);
  wd->eval();
  CHECK(values(wd->forward(x).output) == values(lstm->forward(x).output));
}

TEST_CASE("nn: LSTM dropout between layers", "[nn][lstm]") {
  Generator init(9), gen(23);
  for (bool variational : {false, true}) {
    INFO("variational " << variational);
    LSTM lstm(3, 4, 2, {.dropout = 0.5, .variational = variational}, init);
    lstm.set_generator(gen);
    gen.set_state({23, 0});
    const Tensor x = rand_uniform({5, 2, 3}, -1, 1, {}, init);
    const std::vector<double> train = values(lstm.forward(x).output);
    gen.set_state({23, 0});
    CHECK(values(lstm.forward(x).output) == train);  // reproducible from the seed
    CHECK(values(lstm.forward(x).output) != train);  // a fresh mask per call
    lstm.eval();
    const std::vector<double> eval = values(lstm.forward(x).output);
    CHECK(eval != train);
    // In eval mode the stack is the two layers applied in turn.
    const LstmLayerResult l0 = lstm_layer(x, Tensor(), Tensor(), lstm.parameter("weight_ih_l0"),
                                          lstm.parameter("weight_hh_l0"), lstm.parameter("bias_ih_l0"),
                                          lstm.parameter("bias_hh_l0"));
    const LstmLayerResult l1 = lstm_layer(l0.output, Tensor(), Tensor(), lstm.parameter("weight_ih_l1"),
                                          lstm.parameter("weight_hh_l1"), lstm.parameter("bias_ih_l1"),
                                          lstm.parameter("bias_hh_l1"));
    CHECK(eval == values(l1.output));
  }
}

// A stack big enough for the CPU recurrence to split its hidden units over a team of threads
// (B * H * 4H above its threshold) agrees with the reference. (Thread-count independence of the
// recurrence itself: tests/ops/lstm_test.cpp.)
TEST_CASE("nn: LSTM at a size that uses the CPU team agrees with the reference", "[nn][lstm]") {
  Generator gen(12);
  LSTM lstm(13, std::vector<std::int64_t>{97, 70}, {}, gen);
  const Tensor x = rand_uniform({3, 8, 13}, -1, 1, {}, gen).set_requires_grad(true);
  const auto run = [&] {
    lstm.zero_grad();
    x.set_grad(Tensor());
    const Tensor out = everything(lstm.forward(x));
    backward(sum(mul(out, out)));
    std::vector<double> all = values(out);
    for (const Tensor& t : {x.grad(), lstm.parameter("weight_hh_l0").grad(), lstm.parameter("bias_ih_l0").grad(),
                            lstm.parameter("weight_ih_l1").grad()}) {
      const std::vector<double> v = values(t);
      all.insert(all.end(), v.begin(), v.end());
    }
    return all;
  };
  const std::vector<double> fast = run();
  const std::vector<double> ref = [&] {
    kernels::CpuBackendGuard guard(kernels::Backend::Ref);
    return run();
  }();
  CHECK(define::test::compare(fast, ref, 1e-5, 1e-5).max_share <= 1.0);
}

TEST_CASE("nn: LSTM on the emulated device equals the CPU", "[nn][lstm]") {
  REQUIRE(kernels::register_devices().emu);
  Generator g1(31), g2(31);
  LSTM cpu(3, std::vector<std::int64_t>{6, 5}, {}, g1), emu(3, std::vector<std::int64_t>{6, 5}, {}, g2);
  emu.to(Device::emu());
  Generator xg(2);
  const Tensor x = rand_uniform({4, 2, 3}, -1, 1, {}, xg);
  const Tensor x_emu = copy_to_device(x, Device::emu());
  const Tensor out_cpu = everything(cpu.forward(x, cpu.zero_state(2)));
  const Tensor out_emu = everything(emu.forward(x_emu, emu.zero_state(2, {.device = Device::emu()})));
  REQUIRE(out_emu.device() == Device::emu());
  CHECK(define::test::compare(values(out_emu), values(out_cpu), 1e-5, 1e-5).max_share <= 1.0);
  backward(sum(out_cpu));
  backward(sum(out_emu));
  for (const std::string name : {"weight_ih_l0", "weight_hh_l0", "bias_hh_l0", "weight_ih_l1", "weight_hh_l1"}) {
    INFO(name);
    CHECK(define::test::compare(values(emu.parameter(name).grad()), values(cpu.parameter(name).grad()), 1e-5, 1e-5)
              .max_share <= 1.0);
  }
}

TEST_CASE("nn: LSTM named errors", "[nn][lstm]") {
  REQUIRE_THROWS_WITH(LSTM(0, 4), Contains("LSTM: input_size must be positive, got 0"));
  REQUIRE_THROWS_WITH(LSTM(3, 4, 0), Contains("LSTM: num_layers must be at least 1, got 0"));
  REQUIRE_THROWS_WITH(LSTM(3, std::vector<std::int64_t>{4, 0}), Contains("hidden size of layer 1 must be positive"));
  REQUIRE_THROWS_WITH(LSTM(3, std::vector<std::int64_t>{}), Contains("LSTM: needs at least one layer"));
  REQUIRE_THROWS_WITH(LSTM(3, 4, 2, {.dropout = 1.5}), Contains("outside [0, 1]"));
  LSTM lstm(3, std::vector<std::int64_t>{4, 2});
  REQUIRE_THROWS_WITH(lstm.forward(zeros({5, 2, 4})),
                      Contains("LSTM: expected input [T, B, 3] (time-major), got [5,2,4]"));
  REQUIRE_THROWS_WITH(lstm.forward(zeros({2, 3})), Contains("LSTM: expected input [T, B, 3]"));
  LSTMState bad = lstm.zero_state(2);
  bad.c[1] = zeros({2, 4});
  REQUIRE_THROWS_WITH(lstm.forward(zeros({5, 2, 3}), bad),
                      Contains("LSTM: state c[1] [2,4] does not match [batch, hidden] = [2,2]"));
  LSTMState short_state = lstm.zero_state(2);
  short_state.h.pop_back();
  REQUIRE_THROWS_WITH(lstm.forward(zeros({5, 2, 3}), short_state),
                      Contains("state has 1 h and 2 c tensors for 2 layers"));
}
