// Philox 4x32-10 against the known-answer vectors published with Random123, and the stream
// identity the CPU and CUDA backends rely on: element i depends only on (seed, offset + i).
#include <catch2/catch.hpp>

#include "core/factory.h"
#include "core/philox.h"

using namespace define;

TEST_CASE("philox: known-answer vectors", "[core][rng]") {
  using philox::U32x4;
  auto run = [](U32x4 c, std::uint32_t k0, std::uint32_t k1) {
    const U32x4 o = philox::philox4x32_10(c, k0, k1);
    return std::vector<std::uint32_t>{o.v[0], o.v[1], o.v[2], o.v[3]};
  };
  CHECK(run({{0, 0, 0, 0}}, 0, 0) == std::vector<std::uint32_t>{0x6627e8d5, 0xe169c58d, 0xbc57ac4c, 0x9b00dbd8});
  CHECK(run({{0xffffffff, 0xffffffff, 0xffffffff, 0xffffffff}}, 0xffffffff, 0xffffffff) ==
        std::vector<std::uint32_t>{0x408f276d, 0x41c83b0e, 0xa20bc7c6, 0x6d5451fd});
  CHECK(run({{0x243f6a88, 0x85a308d3, 0x13198a2e, 0x03707344}}, 0xa4093822, 0x299f31d0) ==
        std::vector<std::uint32_t>{0xd16cfe09, 0x94fdcceb, 0x5001e420, 0x24126ea1});
}

TEST_CASE("philox: stream depends only on (seed, offset)", "[core][rng]") {
  Generator a(42), b(42);
  Tensor x = rand_uniform({1000}, 0, 1, {}, a);
  Tensor y = rand_uniform({1000}, 0, 1, {}, b);
  CHECK(x.to_vector<float>() == y.to_vector<float>());
  CHECK(a.state().offset == 1000);
  // Drawing 10 then 990 gives the same numbers as one draw of 1000 once offsets line up
  // (every reservation is rounded to a whole Philox block of 4 words).
  Generator c(42);
  Tensor head = rand_uniform({12}, 0, 1, {}, c);
  Tensor tail = rand_uniform({988}, 0, 1, {}, c);
  const auto all = x.to_vector<float>(), h = head.to_vector<float>(), t = tail.to_vector<float>();
  CHECK(std::equal(h.begin(), h.end(), all.begin()));
  CHECK(std::equal(t.begin(), t.end(), all.begin() + 12));
  // Restoring a saved state replays the stream.
  Generator d(7);
  rand_uniform({5}, 0, 1, {}, d);
  const GeneratorState saved = d.state();
  const auto first = rand_normal({64}, 0, 1, {}, d).to_vector<float>();
  d.set_state(saved);
  CHECK(rand_normal({64}, 0, 1, {}, d).to_vector<float>() == first);
  // float64 draws are the same uniforms as float32 ones (24 random bits).
  Generator e(42);
  const auto dbl = rand_uniform({1000}, 0, 1, {DType::Float64}, e).to_vector<double>();
  for (std::size_t i = 0; i < dbl.size(); ++i) REQUIRE(static_cast<float>(dbl[i]) == all[i]);
}

TEST_CASE("philox: distribution moments", "[core][rng]") {
  Generator g(3);
  const auto u = rand_uniform({100000}, -1, 1, {DType::Float64}, g).to_vector<double>();
  const auto n = rand_normal({100000}, 2, 3, {DType::Float64}, g).to_vector<double>();
  double mu = 0, mn = 0, vn = 0;
  for (double v : u) mu += v;
  for (double v : n) mn += v;
  mu /= u.size();
  mn /= n.size();
  for (double v : n) vn += (v - mn) * (v - mn);
  vn /= n.size();
  CHECK(std::abs(mu) < 0.01);
  CHECK(std::abs(mn - 2) < 0.03);
  CHECK(std::abs(std::sqrt(vn) - 3) < 0.03);
  for (double v : u) REQUIRE((v >= -1 && v < 1));
  const auto k = rand_int({10000}, 7, {.dtype = DType::Int64}, g).to_vector<std::int64_t>();
  std::vector<int> counts(7, 0);
  for (auto v : k) {
    REQUIRE((v >= 0 && v < 7));
    ++counts[v];
  }
  for (int c : counts) CHECK(std::abs(c - 10000 / 7) < 150);
}
