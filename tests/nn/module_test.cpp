// Module: registration rules, hierarchical names and their order, traversal, modes, counts,
// gradients, dtype moves, and state dict save / load with its named errors.
#include <catch2/catch.hpp>

#include "harness/op_harness.h"
#include "nn/nn.h"
#include "support/gradients.h"

using namespace define;
using namespace define::nn;
using Catch::Contains;
using define::test::values;

namespace {

struct Block : Module {
  std::shared_ptr<LayerNorm> norm;
  std::shared_ptr<Linear> ff;
  explicit Block(Generator& gen) : Module("Block") {
    norm = register_module("norm", std::make_shared<LayerNorm>(4));
    ff = register_module("ff", std::make_shared<Linear>(4, 4, LinearOptions{}, gen));
  }
  Tensor forward(const Tensor& x) const { return ff->forward(norm->forward(x)); }
};

// Own parameter and buffer, a leaf child, a list of nested blocks, a head.
struct Net : Module {
  Tensor* scale;
  std::shared_ptr<Embedding> embed;
  std::shared_ptr<ModuleList> layers;
  std::shared_ptr<Linear> out;
  explicit Net(std::uint64_t seed = 1) : Module("Net") {
    Generator gen(seed);
    scale = &register_parameter("scale", full({1}, 1.5));
    register_buffer("steps", zeros({1}, {.dtype = DType::Int64}));
    embed = register_module("embed", std::make_shared<Embedding>(10, 4, EmbeddingOptions{}, gen));
    layers = register_module("layers", std::make_shared<ModuleList>());
    for (int i = 0; i < 2; ++i) layers->push_back(std::make_shared<Block>(gen));
    out = register_module("out", std::make_shared<Linear>(4, 10, LinearOptions{.bias = false}, gen));
  }
  Tensor forward(const Tensor& idx) const {
    Tensor h = mul(embed->forward(idx), *scale);
    for (const auto& layer : *layers) h = static_cast<const Block&>(*layer).forward(h);
    return out->forward(h);
  }
};

Tensor tokens() { return from_vector<std::int64_t>({1, 4, 4, 9, 0, 2}, {2, 3}); }

struct OneWeight : Module {
  explicit OneWeight(Shape s) : Module("OneWeight") { register_parameter("w", zeros(s)); }
};

}  // namespace

TEST_CASE("nn: OrderedDict keeps insertion order and refuses duplicates", "[nn]") {
  OrderedDict<int> d;
  d.insert("b", 1);
  d.insert("a", 2);
  d.insert("c", 3);
  CHECK(d.keys() == std::vector<std::string>{"b", "a", "c"});
  REQUIRE_THROWS_WITH(d.insert("a", 4), Contains("OrderedDict: duplicate key 'a'"));
  CHECK(d.erase("a"));
  CHECK_FALSE(d.erase("a"));
  CHECK(d.keys() == std::vector<std::string>{"b", "c"});
  CHECK(d.at("c") == 3);
  REQUIRE_THROWS_WITH(d.at("a"), Contains("OrderedDict: no key 'a'"));
  CHECK(format_count(461150) == "461,150");
  CHECK(format_count(999) == "999");
  CHECK(format_count(1000) == "1,000");
  CHECK(format_count(0) == "0");
}

TEST_CASE("nn: named_parameters, buffers and modules of a nested model, in order", "[nn]") {
  Net net;
  const std::vector<std::string> params = {
      "scale",          "embed.weight",        "layers.0.norm.weight", "layers.0.norm.bias",
      "layers.0.ff.weight", "layers.0.ff.bias", "layers.1.norm.weight", "layers.1.norm.bias",
      "layers.1.ff.weight", "layers.1.ff.bias", "out.weight"};
  CHECK(net.named_parameters().keys() == params);
  CHECK(net.parameters().size() == params.size());
  CHECK(net.named_buffers().keys() == std::vector<std::string>{"steps"});
  std::vector<std::string> state = params;
  state.insert(state.begin() + 1, "steps");  // own buffers follow own parameters
  CHECK(net.state_dict().keys() == state);

  std::vector<std::string> modules;
  for (const auto& [name, m] : net.named_modules()) modules.push_back(name + ":" + m->type_name());
  CHECK(modules == std::vector<std::string>{":Net", "embed:Embedding", "layers:ModuleList", "layers.0:Block",
                                            "layers.0.norm:LayerNorm", "layers.0.ff:Linear", "layers.1:Block",
                                            "layers.1.norm:LayerNorm", "layers.1.ff:Linear", "out:Linear"});

  // Lookup by dotted path.
  CHECK(&net.submodule("layers.1.ff") == net.layers->at<Block>(1)->ff.get());
  CHECK(&net.submodule("") == &net);
  CHECK(net.submodule_as<Linear>("layers.0.ff").out_features() == 4);
  CHECK(net.parameter("layers.1.ff.bias").impl() == net.layers->at<Block>(1)->ff->bias().impl());
  CHECK(net.has_parameter("out.weight"));
  CHECK_FALSE(net.has_parameter("out.bias"));
  REQUIRE_THROWS_WITH(net.submodule("layers.5"), Contains("submodule: no module 'layers.5' in Net"));
  REQUIRE_THROWS_WITH(net.submodule_as<Linear>("layers.0"), Contains("module 'layers.0' is a Block"));
  REQUIRE_THROWS_WITH(net.parameter("layers.0.ff.gamma"), Contains("parameter: no parameter 'layers.0.ff.gamma' in Net"));
  REQUIRE_THROWS_WITH(net.layers->at<Linear>(0), Contains("ModuleList: module 0 is a Block"));
  REQUIRE_THROWS_WITH(net.layers->at(2), Contains("ModuleList: index 2 out of range for 2 modules"));
}

TEST_CASE("nn: parameter counts, per child and in total", "[nn]") {
  Net net;
  // scale 1, embed 10*4, two blocks of (LayerNorm 8 + Linear 4*4+4), head 4*10.
  CHECK(net.num_parameters() == 1 + 40 + 2 * (8 + 20) + 40);
  CHECK(net.layers->num_parameters() == 56);
  CHECK(net.submodule("layers.1").num_parameters() == 28);
  using Counts = std::vector<std::pair<std::string, std::int64_t>>;
  CHECK(net.parameter_breakdown() == Counts{{"scale", 1}, {"embed", 40}, {"layers", 56}, {"out", 40}});
  CHECK(net.layers->parameter_breakdown() == Counts{{"0", 28}, {"1", 28}});
  Tensor(net.layers->at<Block>(0)->ff->weight()).set_requires_grad(false);  // freeze one weight
  CHECK(net.num_parameters(true) == 137 - 16);
  const std::string s = net.summary();
  CHECK_THAT(s, Contains("Net: 137\n"));
  CHECK_THAT(s, Contains("  layers (ModuleList): 56\n"));
  CHECK_THAT(s, Contains("      ff (Linear): 20\n"));
  CHECK_THAT(net.summary(1), !Contains("ff (Linear)"));
}

TEST_CASE("nn: registration rules", "[nn]") {
  Module m("Thing");
  m.register_parameter("w", zeros({2}));
  REQUIRE_THROWS_WITH(m.register_parameter("w", zeros({2})), Contains("register_parameter: 'w' is already registered in Thing"));
  REQUIRE_THROWS_WITH(m.register_buffer("w", zeros({2})), Contains("register_buffer: 'w' is already registered"));
  REQUIRE_THROWS_WITH(m.register_module("w", std::make_shared<Dropout>()), Contains("register_module: 'w' is already"));
  REQUIRE_THROWS_WITH(m.register_parameter("a.b", zeros({2})), Contains("name 'a.b' must not contain '.'"));
  REQUIRE_THROWS_WITH(m.register_parameter("", zeros({2})), Contains("register_parameter: empty name"));
  REQUIRE_THROWS_WITH(m.register_parameter("i", zeros({2}, {.dtype = DType::Int64})), Contains("must be a floating tensor"));
  Tensor leaf = zeros({2}).set_requires_grad();
  REQUIRE_THROWS_WITH(m.register_parameter("y", mul(leaf, 2.0)), Contains("'y' must be a leaf tensor"));
  REQUIRE_THROWS_WITH(m.register_module("n", std::shared_ptr<Linear>()), Contains("'n' is a null module"));
  // Frozen parameters are still parameters.
  m.register_parameter("frozen", zeros({3}), false);
  CHECK(m.num_parameters() == 5);
  CHECK(m.num_parameters(true) == 2);
  // A module cannot contain itself.
  auto outer = std::make_shared<Sequential>();
  auto inner = outer->push_back(std::make_shared<Sequential>());
  REQUIRE_THROWS_WITH(inner->register_module("loop", outer), Contains("would make a cycle"));
}

TEST_CASE("nn: train / eval reach every descendant", "[nn]") {
  auto seq = std::make_shared<Sequential>();
  auto lin = seq->push_back(std::make_shared<Linear>(3, 3));
  auto drop = seq->push_back(std::make_shared<Dropout>(0.5));
  CHECK(seq->is_training());
  CHECK(drop->is_training());
  seq->eval();
  CHECK_FALSE(seq->is_training());
  CHECK_FALSE(lin->is_training());
  CHECK_FALSE(drop->is_training());
  const Tensor x = rand_uniform({4, 3}, -1, 1);
  CHECK(values(seq->forward(x)) == values(lin->forward(x)));  // dropout is the identity in eval
  seq->train();
  CHECK(drop->is_training());
  CHECK(values(seq->forward(x)) != values(lin->forward(x)));
}

TEST_CASE("nn: zero_grad drops or zeroes gradients", "[nn]") {
  Net net;
  backward(sum(net.forward(tokens())));
  for (const Tensor& p : net.parameters()) CHECK(p.grad().defined());
  net.zero_grad(false);
  for (const Tensor& p : net.parameters()) {
    REQUIRE(p.grad().defined());
    for (double v : values(p.grad())) CHECK(v == 0.0);
  }
  net.zero_grad();
  for (const Tensor& p : net.parameters()) CHECK_FALSE(p.grad().defined());
}

TEST_CASE("nn: to(dtype) converts in place, keeping every handle", "[nn]") {
  Net net;
  const std::vector<Tensor> before = net.parameters();
  const std::vector<double> y32 = values(net.forward(tokens()));
  backward(sum(net.forward(tokens())));
  net.to(DType::Float64);
  const std::vector<Tensor> after = net.parameters();
  REQUIRE(after.size() == before.size());
  for (std::size_t i = 0; i < after.size(); ++i) {
    CHECK(after[i].impl() == before[i].impl());
    CHECK(before[i].dtype() == DType::Float64);
    CHECK(before[i].requires_grad());
    CHECK(before[i].grad().dtype() == DType::Float64);
  }
  CHECK(net.named_buffers().at("steps").dtype() == DType::Int64);  // integer buffers stay
  const std::vector<double> y64 = values(net.forward(tokens()));
  CHECK(define::test::compare(y64, y32, 1e-5, 1e-5).max_share <= 1.0);
  REQUIRE_THROWS_WITH(net.to(DType::Int32), Contains("Module::to: target dtype must be floating"));
}

TEST_CASE("nn: state_dict round trip gives identical outputs", "[nn]") {
  Net a(1), b(2);
  CHECK(values(a.forward(tokens())) != values(b.forward(tokens())));
  const std::vector<Tensor> b_params = b.parameters();
  const LoadResult r = b.load_state_dict(a.state_dict());
  CHECK(r.missing_keys.empty());
  CHECK(r.unexpected_keys.empty());
  CHECK(values(a.forward(tokens())) == values(b.forward(tokens())));
  for (std::size_t i = 0; i < b_params.size(); ++i) CHECK(b.parameters()[i].impl() == b_params[i].impl());

  // State dict values are detached aliases (later steps show through); deep_copy snapshots.
  const StateDict live = a.state_dict(), snap = deep_copy(a.state_dict());
  CHECK_FALSE(live.at("scale").requires_grad());
  {
    NoGradGuard g;
    fill_(*a.scale, 3.0);
  }
  CHECK(values(live.at("scale")) == std::vector<double>{3.0});
  CHECK(values(snap.at("scale")) == std::vector<double>{1.5});

  // A float64 checkpoint loads into a float32 model (cast on copy).
  Net c(3);
  StateDict wide;
  for (const auto& [k, v] : a.state_dict()) wide.insert(k, is_floating(v.dtype()) ? to_dtype(v, DType::Float64) : v);
  c.load_state_dict(wide);
  CHECK(c.parameter("out.weight").dtype() == DType::Float32);
  CHECK(values(c.forward(tokens())) == values(a.forward(tokens())));
}

TEST_CASE("nn: load_state_dict names the offending key", "[nn]") {
  Net a(1), b(2);
  const std::vector<double> b_out = values(b.forward(tokens()));
  StateDict missing = a.state_dict();
  missing.erase("embed.weight");
  REQUIRE_THROWS_WITH(b.load_state_dict(missing), "load_state_dict: missing key 'embed.weight'");
  missing.erase("out.weight");
  REQUIRE_THROWS_WITH(b.load_state_dict(missing),
                      "load_state_dict: missing key 'embed.weight' (and 1 more: 'out.weight')");

  StateDict extra = a.state_dict();
  extra.insert("decoder.weight", zeros({2}));
  REQUIRE_THROWS_WITH(b.load_state_dict(extra), "load_state_dict: unexpected key 'decoder.weight'");

  OneWeight m({4, 4});
  StateDict bad;
  bad.insert("w", zeros({3, 4}));
  REQUIRE_THROWS_WITH(m.load_state_dict(bad), "load_state_dict: shape mismatch for 'w': checkpoint [3,4] vs model [4,4]");
  REQUIRE_THROWS_WITH(m.load_state_dict(bad, false), Contains("shape mismatch for 'w'"));  // even when not strict
  StateDict ints;
  ints.insert("w", zeros({4, 4}, {.dtype = DType::Int64}));
  REQUIRE_THROWS_WITH(m.load_state_dict(ints), Contains("dtype mismatch for 'w': checkpoint int64 vs model float32"));

  // A failed load changes nothing, even where keys before the bad one matched.
  StateDict late_bad = a.state_dict();
  late_bad.at("out.weight") = zeros({3, 3});
  REQUIRE_THROWS(b.load_state_dict(late_bad));
  CHECK(values(b.forward(tokens())) == b_out);

  // Not strict: loads what matches and reports the rest.
  StateDict partial = a.state_dict();
  partial.erase("scale");
  partial.insert("junk", zeros({1}));
  const LoadResult r = b.load_state_dict(partial, false);
  CHECK(r.missing_keys == std::vector<std::string>{"scale"});
  CHECK(r.unexpected_keys == std::vector<std::string>{"junk"});
  CHECK(values(b.parameter("out.weight")) == values(a.parameter("out.weight")));
  CHECK(values(*b.scale) == std::vector<double>{1.5});  // its own value, kept
}

TEST_CASE("nn: tied weights are one parameter with two names", "[nn]") {
  auto model = std::make_shared<Module>("Tied");
  auto emb = model->register_module("embed", std::make_shared<Embedding>(6, 3));
  auto head = model->register_module("head", std::make_shared<Module>("Head"));
  head->register_parameter("weight", emb->weight());
  CHECK(model->num_parameters() == 18);
  CHECK(model->named_parameters().keys() == std::vector<std::string>{"embed.weight"});
  CHECK(model->parameter_breakdown() == std::vector<std::pair<std::string, std::int64_t>>{{"embed", 18}, {"head", 0}});
  CHECK(model->state_dict().keys() == std::vector<std::string>{"embed.weight", "head.weight"});
  model->to(DType::Float64);
  CHECK(head->parameter("weight").impl() == emb->weight().impl());  // still tied
  CHECK(emb->weight().dtype() == DType::Float64);
}

TEST_CASE("nn: ParameterSwap substitutes a parameter for a scope", "[nn]") {
  Linear lin(3, 2);
  {
    NoGradGuard g;
    fill_(lin.bias(), 0.5);
  }
  const Tensor raw = lin.weight();
  const Tensor x = ones({1, 3});
  {
    ParameterSwap swap(lin, "weight", zeros({2, 3}));
    CHECK(values(lin.forward(x)) == std::vector<double>{0.5, 0.5});
  }
  CHECK(lin.weight().impl() == raw.impl());
  REQUIRE_THROWS_WITH(ParameterSwap(lin, "weight", zeros({3, 2})),
                      Contains("ParameterSwap: 'weight' has shape [2,3]; the replacement has [3,2]"));
  REQUIRE_THROWS_WITH(ParameterSwap(lin, "gain", zeros({2})), Contains("ParameterSwap: no parameter 'gain' in Linear"));
}
