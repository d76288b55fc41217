// Optimizer state (nn/optim/): state_dict round trips giving identical subsequent steps, the
// snapshot semantics and load errors naming the key, hyper-parameter errors naming the
// parameter, and Adam, SGD and clipping on the emulated CUDA device against the CPU.
#include <catch2/catch.hpp>

#include <cmath>
#include <memory>
#include <vector>

#include "kernels/devices.h"
#include "support/optim.h"

using namespace define;
using namespace define::optim;
using namespace define::test::optim_test;
using Catch::Contains;

// ---------------------------------------------------------------- state_dict

namespace {
// Runs `first` steps on one optimizer, snapshots parameters and state, runs `then` more; a second
// optimizer over the snapshot with the loaded state must reproduce those steps exactly.
template <class Opt, class Options>
void check_resume(Options options, int first, int then) {
  const std::vector<Vec> grads = {{0.5, -1.0}, {0.25, 2.0}, {-0.75, 0.1}, {1.5, -0.3}, {0.2, 0.2}, {-1, 1}};
  Tensor p = param(kStart), q = param({0.5});
  Opt a(NamedParameters{{"enc.w", p}, {"dec.b", q}}, options);
  auto step = [&](Opt& opt, const Tensor& pp, const Tensor& qq, int t) {
    set_grad(pp, grads[t]);
    if (t % 2 == 0) set_grad(qq, {grads[t][0]});  // q gets a gradient every other step
    else qq.set_grad(Tensor());
    opt.step();
  };
  for (int t = 0; t < first; ++t) step(a, p, q, t);
  const OptimizerState saved = a.state_dict();
  Tensor p2 = param(values(p)), q2 = param(values(q));
  for (int t = first; t < first + then; ++t) step(a, p, q, t);

  Opt b(NamedParameters{{"enc.w", p2}, {"dec.b", q2}}, options);
  b.load_state_dict(saved);
  for (int t = first; t < first + then; ++t) step(b, p2, q2, t);
  CHECK(values(p2) == values(p));  // bit for bit
  CHECK(values(q2) == values(q));
}
}  // namespace

TEST_CASE("optim: state_dict round trip gives identical subsequent steps", "[optim]") {
  check_resume<SGD>(SGDOptions{.lr = 0.1, .momentum = 0.9, .dampening = 0.1, .weight_decay = 0.01}, 3, 3);
  check_resume<SGD>(SGDOptions{.lr = 0.1, .momentum = 0.9, .nesterov = true}, 2, 4);
  check_resume<Adam>(AdamOptions{.lr = 0.01, .weight_decay = 0.1}, 3, 3);
  check_resume<AdamW>(AdamWOptions{.lr = 0.01}, 1, 5);
  check_resume<Adam>(AdamOptions{}, 0, 2);  // an empty state loads too

  // NT-ASGD: the trigger, the averages and the validation log come back.
  Tensor p = param(kStart);
  NTASGD a(NamedParameters{{"w", p}}, {.lr = 0.1, .nonmono = 1});
  for (double m : {3.0, 2.0, 2.5, 2.6}) a.observe(m);
  REQUIRE(a.averaging());
  set_grad(p, {1, 1});
  a.step();
  a.step();
  const auto saved = a.state_dict();
  CHECK(saved.scalars.at("optimizer.avg_steps") == 2);
  Tensor p2 = param(values(p));
  NTASGD b(NamedParameters{{"w", p2}}, {.lr = 0.1, .nonmono = 1});
  b.load_state_dict(saved);
  CHECK(b.averaging());
  CHECK(b.validation_log() == Vec{3.0, 2.0, 2.5, 2.6});
  set_grad(p2, {1, 1});
  for (NTASGD* o : {&a, &b}) o->step();
  CHECK(values(p2) == values(p));
  CHECK(values(b.averaged("w")) == values(a.averaged("w")));

  // The schedule's lr set on the optimizer is part of the state.
  Tensor r = param({1.0});
  Adam c(std::vector<Tensor>{r}, {.lr = 0.1});
  c.set_lr(0.0125);
  Adam d(std::vector<Tensor>{param({1.0})}, {.lr = 0.1});
  d.load_state_dict(c.state_dict());
  CHECK(d.lr() == 0.0125);
}

TEST_CASE("optim: state_dict is a snapshot and load_state_dict errors name the key", "[optim]") {
  Tensor p = param(kStart);
  Adam opt(NamedParameters{{"layer.weight", p}}, {.lr = 0.1});
  set_grad(p, {1, 1});
  opt.step();
  const OptimizerState saved = opt.state_dict();
  const Vec m1 = values(saved.tensors.at("state.layer.weight.exp_avg"));
  opt.step();
  CHECK(values(saved.tensors.at("state.layer.weight.exp_avg")) == m1);

  auto broken = saved;
  broken.tensors.erase("state.layer.weight.exp_avg_sq");
  REQUIRE_THROWS_WITH(opt.load_state_dict(broken), Contains("Adam.load_state_dict: missing key 'state.layer.weight.exp_avg_sq'"));
  broken = saved;
  broken.tensors["state.layer.bias.exp_avg"] = from_vector(Vec{1, 2});
  REQUIRE_THROWS_WITH(opt.load_state_dict(broken), Contains("'state.layer.bias.exp_avg' names no parameter"));
  broken = saved;
  broken.tensors["state.layer.weight.momentum_buffer"] = from_vector(Vec{1, 2});
  REQUIRE_THROWS_WITH(opt.load_state_dict(broken), Contains("unexpected key 'state.layer.weight.momentum_buffer'"));
  broken = saved;
  broken.tensors["state.layer.weight.exp_avg"] = from_vector(Vec{1, 2, 3});
  REQUIRE_THROWS_WITH(opt.load_state_dict(broken), Contains("'state.layer.weight.exp_avg' has shape [3]"));
  broken = saved;
  broken.scalars.erase("group.0.lr");
  REQUIRE_THROWS_WITH(opt.load_state_dict(broken), Contains("missing key 'group.0.lr'"));
  broken = saved;
  broken.scalars["group.0.lr"] = -1;
  REQUIRE_THROWS_WITH(opt.load_state_dict(broken), Contains("lr must be >= 0"));
  broken = saved;
  broken.scalars["group.3.lr"] = 1;
  REQUIRE_THROWS_WITH(opt.load_state_dict(broken), Contains("'group.3.lr'"));
  broken = saved;
  broken.scalars["optimizer.averaging"] = 1;
  REQUIRE_THROWS_WITH(opt.load_state_dict(broken), Contains("unexpected key 'optimizer.averaging'"));

  // A failed load changed nothing: the next step is the same as without the attempts.
  Tensor p2 = param(values(p));
  Adam twin(NamedParameters{{"layer.weight", p2}}, {.lr = 0.1});
  twin.load_state_dict(opt.state_dict());
  set_grad(p2, {1, 1});
  opt.step();
  twin.step();
  CHECK(values(p) == values(p2));

  // NT-ASGD before the trigger must not carry averages.
  Tensor w = param({1.0});
  NTASGD nt(NamedParameters{{"w", w}});
  auto sd = nt.state_dict();
  sd.tensors["state.w.ax"] = from_vector(Vec{1.0});
  REQUIRE_THROWS_WITH(nt.load_state_dict(sd), Contains("unexpected key 'state.w.ax'"));
  sd = nt.state_dict();
  sd.scalars.erase("optimizer.log_size");
  REQUIRE_THROWS_WITH(nt.load_state_dict(sd), Contains("missing key 'optimizer.log_size'"));
}

// ---------------------------------------------------------------- errors

TEST_CASE("optim: bad hyper-parameters are refused with the parameter's name", "[optim]") {
  const std::vector<Tensor> ps{param({1.0})};
  REQUIRE_THROWS_WITH(Adam(ps, {.lr = -0.1}), Contains("Adam: lr must be >= 0 (got -0.1)"));
  REQUIRE_THROWS_WITH(Adam(ps, {.betas = {1.0, 0.999}}), Contains("Adam: betas[0] must be in [0, 1) (got 1)"));
  REQUIRE_THROWS_WITH(Adam(ps, {.betas = {0.9, -0.5}}), Contains("Adam: betas[1] must be in [0, 1) (got -0.5)"));
  REQUIRE_THROWS_WITH(AdamW(ps, {.eps = -1}), Contains("AdamW: eps must be >= 0"));
  REQUIRE_THROWS_WITH(AdamW(ps, {.weight_decay = -1}), Contains("AdamW: weight_decay must be >= 0"));
  REQUIRE_THROWS_WITH(SGD(ps, {.lr = -1}), Contains("SGD: lr must be >= 0"));
  REQUIRE_THROWS_WITH(SGD(ps, {.momentum = -0.9}), Contains("SGD: momentum must be >= 0"));
  REQUIRE_THROWS_WITH(SGD(ps, {.dampening = 2}), Contains("SGD: dampening must be in [0, 1]"));
  REQUIRE_THROWS_WITH(SGD(ps, {.nesterov = true}), Contains("SGD: nesterov needs momentum > 0"));
  REQUIRE_THROWS_WITH(NTASGD(ps, {.nonmono = 0}), Contains("NTASGD: nonmono must be >= 1"));
  REQUIRE_THROWS_WITH(SGD(std::vector<Tensor>{}), Contains("SGD: got an empty parameter list"));
  REQUIRE_THROWS_WITH(SGD(std::vector<Tensor>{ps[0], ps[0]}), Contains("is the same tensor as 'param.0'"));
  REQUIRE_THROWS_WITH(SGD(NamedParameters{{"w", ps[0]}, {"w", param({2.0})}}), Contains("name 'w' appears twice"));
  REQUIRE_THROWS_WITH(SGD(std::vector<Tensor>{from_vector(std::vector<std::int64_t>{1})}), Contains("dtype int64"));
  REQUIRE_THROWS_WITH(SGD(std::vector<GroupSpec>{{{{"a", ps[0]}}, {}, {}}, {{{"b", param({1.0})}}, -2.0, {}}}),
                      Contains("SGD: param group 1 lr must be >= 0 (got -2)"));
  SGD opt(ps);
  REQUIRE_THROWS_WITH(opt.set_lr(-1), Contains("SGD: lr must be >= 0"));
  REQUIRE_THROWS_WITH(opt.lr(3), Contains("no param group 3"));

  REQUIRE_THROWS_WITH(StepDecay(0.1, 0), Contains("StepDecay: step_size must be > 0"));
  REQUIRE_THROWS_WITH(WarmupCosine({.peak_lr = 1, .warmup_steps = 10, .total_steps = 10}),
                      Contains("WarmupCosine: total_steps must be > warmup_steps"));
  REQUIRE_THROWS_WITH(WarmupCosine({.peak_lr = 1, .total_steps = 10, .min_lr = 2}), Contains("WarmupCosine: min_lr"));
  REQUIRE_THROWS_WITH(InverseSqrt({.peak_lr = -1}), Contains("InverseSqrt: peak_lr must be >= 0"));
  REQUIRE_THROWS_WITH(ReduceOnPlateau(1.0, {.factor = 1.0}), Contains("ReduceOnPlateau: factor must be in (0, 1)"));
  REQUIRE_THROWS_WITH(ReduceOnPlateau(1.0, {.patience = -1}), Contains("ReduceOnPlateau: patience must be >= 0"));
}

// ---------------------------------------------------------------- emulated device

TEST_CASE("optim: Adam, SGD and clipping on the emulated CUDA device match the CPU", "[optim]") {
  REQUIRE(kernels::register_devices().emu);
  const std::vector<float> start = {1.0f, -2.0f, 0.5f, 3.0f, -0.25f, 0.0f};
  const std::vector<std::vector<float>> grads = {
      {0.5f, -1.0f, 2.0f, 0.1f, -0.3f, 1.0f}, {0.25f, 2.0f, -1.0f, 0.0f, 0.7f, -0.2f}, {-0.75f, 0.1f, 0.4f, -2.0f, 0.2f, 0.3f}};
  auto run = [&](Device dev, bool adam) {
    Tensor p = from_vector(start, {2, 3}, dev).set_requires_grad();
    std::unique_ptr<Optimizer> opt;
    if (adam) opt = std::make_unique<Adam>(std::vector<Tensor>{p}, AdamOptions{.lr = 0.01, .weight_decay = 0.1});
    else opt = std::make_unique<SGD>(std::vector<Tensor>{p}, SGDOptions{.lr = 0.1, .momentum = 0.9, .nesterov = true});
    std::vector<double> norms;
    for (const auto& g : grads) {
      p.set_grad(from_vector(g, {2, 3}, dev));
      norms.push_back(clip_grad_norm(std::vector<Tensor>{p}, 2.0));
      opt->step();
    }
    CHECK(p.device() == dev);
    const auto st = opt->state_dict();
    CHECK(st.tensors.size() == (adam ? 2u : 1u));
    for (const auto& kv : st.tensors) CHECK(kv.second.device() == dev);  // state lives beside p
    return std::make_pair(values(p), norms);
  };
  for (bool adam : {true, false}) {
    CAPTURE(adam);
    const auto [cpu, cpu_norms] = run(Device::cpu(), adam);
    const auto [emu, emu_norms] = run(Device::emu(), adam);
    check_close(emu, cpu, 1e-7, 1e-6);
    check_close(emu_norms, cpu_norms, 0, 1e-6);
  }

  // A state saved on the CPU loads onto emulated-device parameters and continues identically.
  Tensor pc = from_vector(start, {2, 3}).set_requires_grad();
  Adam cpu_opt(NamedParameters{{"w", pc}}, {.lr = 0.01});
  pc.set_grad(from_vector(grads[0], {2, 3}));
  cpu_opt.step();
  Tensor pe = copy_to_device(pc, Device::emu()).set_requires_grad();
  Adam emu_opt(NamedParameters{{"w", pe}}, {.lr = 0.01});
  emu_opt.load_state_dict(cpu_opt.state_dict());
  CHECK(emu_opt.state_dict().tensors.at("state.w.exp_avg").device() == Device::emu());
  pc.set_grad(from_vector(grads[1], {2, 3}));
  pe.set_grad(from_vector(grads[1], {2, 3}, Device::emu()));
  cpu_opt.step();
  emu_opt.step();
  check_close(values(pe), values(pc), 1e-7, 1e-6);
}
