// A small model moved to the emulated CUDA device with to(): same outputs and gradients as on the
// CPU (the dropout masks come from the same Philox stream on both), and back again.
#include <catch2/catch.hpp>

#include "harness/op_harness.h"
#include "kernels/devices.h"
#include "nn/nn.h"
#include "support/gradients.h"

using namespace define;
using namespace define::nn;
using define::test::values;

namespace {

// Every layer of this issue in one forward: idx [T, B] -> logits [T, B, V].
struct TinyLM : Module {
  std::shared_ptr<ProjectiveEmbedding> embed;
  std::shared_ptr<EmbeddingDropout> edrop;
  std::shared_ptr<LockedDropout> lockdrop;
  std::shared_ptr<LayerNorm> norm;
  std::shared_ptr<WeightDrop<Linear>> hidden;
  std::shared_ptr<Dropout> drop;
  std::shared_ptr<Linear> out;
  explicit TinyLM(Generator& gen) : Module("TinyLM") {
    embed = register_module("embed", std::make_shared<ProjectiveEmbedding>(
                                         20, 6, 8, ProjectiveEmbeddingOptions{.padding_idx = 0, .projection_bias = true}, gen));
    edrop = register_module("edrop", std::make_shared<EmbeddingDropout>(0.2));
    lockdrop = register_module("lockdrop", std::make_shared<LockedDropout>(0.3));
    norm = register_module("norm", std::make_shared<LayerNorm>(8));
    hidden = register_module("hidden", weight_drop(std::make_shared<Linear>(8, 8, LinearOptions{}, gen), {"weight"}, 0.4));
    drop = register_module("drop", std::make_shared<Dropout>(0.1));
    out = register_module("out", std::make_shared<Linear>(8, 20, LinearOptions{.init = LinearInit::KaimingUniform}, gen));
  }
  Tensor forward(const Tensor& idx) {
    Tensor h = edrop->forward(*embed, idx, "embedding.weight");
    h = norm->forward(lockdrop->forward(h));
    h = drop->forward(tanh(hidden->forward(h)));
    return out->forward(h);
  }
};

struct Run {
  std::vector<double> out;
  std::vector<std::vector<double>> grads;
};

Run run(TinyLM& m, Generator& dropgen, Device device) {
  dropgen.set_state({77, 0});
  m.zero_grad();
  Generator tg(3);
  const Tensor idx = copy_to_device(rand_int({5, 3}, 20, {.dtype = DType::Int64}, tg), device);
  const Tensor y = m.forward(idx);
  REQUIRE(y.device() == device);
  Generator ug(4);
  backward(sum(mul(y, copy_to_device(rand_uniform(y.shape(), -1, 1, {}, ug), device))));
  Run r{values(y), {}};
  for (const Tensor& p : m.parameters()) r.grads.push_back(values(p.grad()));
  return r;
}

}  // namespace

TEST_CASE("nn: a model moved to the emulated device computes what it computes on the CPU", "[nn]") {
  REQUIRE(kernels::register_devices().emu);
  Generator init(1), dropgen(77);
  TinyLM m(init);
  m.set_generator(dropgen);
  const Run cpu = run(m, dropgen, Device::cpu());

  const std::vector<Tensor> handles = m.parameters();
  m.to(Device::emu());
  for (const auto& [name, p] : m.named_parameters()) {
    INFO(name);
    CHECK(p.device() == Device::emu());
    CHECK(p.requires_grad());
  }
  for (std::size_t i = 0; i < handles.size(); ++i) CHECK(handles[i].device() == Device::emu());  // same tensors
  const Run emu = run(m, dropgen, Device::emu());
  CHECK(define::test::compare(emu.out, cpu.out, 1e-5, 1e-5).max_share <= 1.0);
  REQUIRE(emu.grads.size() == cpu.grads.size());
  const std::vector<std::string> names = m.named_parameters().keys();
  for (std::size_t i = 0; i < cpu.grads.size(); ++i) {
    INFO(names[i]);
    CHECK(define::test::compare(emu.grads[i], cpu.grads[i], 1e-4, 1e-4).max_share <= 1.0);
  }

  // Gradients travel with the parameters, and the model comes back to the CPU intact.
  m.to(Device::cpu());
  for (const Tensor& p : m.parameters()) {
    CHECK(p.device().is_cpu());
    CHECK(p.grad().device().is_cpu());
  }
  const Run back = run(m, dropgen, Device::cpu());
  CHECK(define::test::compare(back.out, cpu.out, 1e-5, 1e-5).max_share <= 1.0);
}
