// safetensors files and checkpoints (nn/safetensors.h, nn/checkpoint.h): exact round trips of
// every dtype, the on-disk layout a Python reader expects, atomic replacement, and refusal of
// truncated, altered and foreign files with a clear error. A checkpoint restores a model and its
// optimizer so that training continues with bit-identical updates.
// Option structs are filled with designated initializers that leave fields at their defaults.
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

#include <catch2/catch.hpp>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <string>

#include "autograd/ops.h"
#include "nn/checkpoint.h"
#include "nn/linear.h"
#include "nn/optim/adam.h"
#include "nn/safetensors.h"
#include "support/common.h"

using namespace define;
using namespace define::nn;
using Catch::Contains;
using define::test::read_all;

namespace {

void write_all(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

struct TempFile {
  std::string path;
  explicit TempFile(const std::string& name) : path(name) { std::remove(path.c_str()); }
  ~TempFile() { std::remove(path.c_str()); }
};

}  // namespace

TEST_CASE("safetensors: exact round trip of every dtype, names and metadata", "[nn][checkpoint]") {
  TempFile f("st_roundtrip.safetensors");
  const Tensor a = from_vector<float>({1.5f, -2.25f, 3.0f, 1e-30f, 7.0f, 8.0f}, {2, 3});
  const Tensor b = from_vector<double>({0.1, -0.2}, {2});
  const Tensor c = from_vector<std::int64_t>({-5, 1LL << 40}, {1, 2});
  const Tensor d = from_vector<std::int32_t>({42}, {});
  const Tensor t = transpose(a, 0, 1);  // non-contiguous input is written as its values
  save_safetensors(f.path, {{"layer.weight", a}, {"b", b}, {"c", c}, {"scalar", d}, {"at", t}}, {{"note", "hi"}});
  const SafetensorsContents got = load_safetensors(f.path);
  REQUIRE(got.tensors.size() == 5);
  CHECK(got.tensors[0].first == "layer.weight");
  CHECK(got.tensors[0].second.shape() == Shape{2, 3});
  CHECK(got.tensors[0].second.to_vector<float>() == a.to_vector<float>());
  CHECK(got.tensors[1].second.to_vector<double>() == b.to_vector<double>());
  CHECK(got.tensors[2].second.to_vector<std::int64_t>() == c.to_vector<std::int64_t>());
  CHECK(got.tensors[3].second.dim() == 0);
  CHECK(got.tensors[3].second.to_vector<std::int32_t>() == std::vector<std::int32_t>{42});
  CHECK(got.tensors[4].second.shape() == Shape{3, 2});
  CHECK(got.tensors[4].second.to_vector<float>() == std::vector<float>{1.5f, 1e-30f, -2.25f, 7.0f, 3.0f, 8.0f});
  CHECK(got.metadata.at("note") == "hi");
  CHECK(got.metadata.count("define.crc32") == 0);  // consumed by the check

  // The layout Python's safetensors reads: u64 header length, JSON header (8-byte aligned), data.
  const std::string bytes = read_all(f.path);
  std::uint64_t header_len = 0;
  std::memcpy(&header_len, bytes.data(), 8);
  CHECK(header_len % 8 == 0);
  CHECK(bytes.size() == 8 + header_len + (6 * 4 + 2 * 8 + 2 * 8 + 4 + 6 * 4));
  CHECK_THAT(bytes.substr(8, header_len), Contains("\"dtype\":\"F32\""));
  CHECK_THAT(bytes.substr(8, header_len), Contains("\"data_offsets\":[0,24]"));
}

TEST_CASE("safetensors: truncated, altered and malformed files are refused", "[nn][checkpoint]") {
  TempFile f("st_corrupt.safetensors");
  save_safetensors(f.path, {{"w", from_vector<float>({1, 2, 3, 4})}});
  const std::string good = read_all(f.path);

  write_all(f.path, good.substr(0, good.size() - 3));
  CHECK_THROWS_WITH(load_safetensors(f.path), Contains("is corrupt: CRC-32"));
  write_all(f.path, good.substr(0, 20));
  CHECK_THROWS_WITH(load_safetensors(f.path), Contains("is truncated"));
  write_all(f.path, good.substr(0, 5));
  CHECK_THROWS_WITH(load_safetensors(f.path), Contains("is truncated"));

  std::string flipped = good;
  flipped[flipped.size() - 2] ^= 0x10;  // one bit of the data
  write_all(f.path, flipped);
  CHECK_THROWS_WITH(load_safetensors(f.path), Contains("does not match the stored"));
  flipped = good;
  const std::size_t at = flipped.find("\"w\"");
  REQUIRE(at != std::string::npos);
  flipped[at + 1] = 'v';  // one byte of the header (a tensor's name)
  write_all(f.path, flipped);
  CHECK_THROWS_WITH(load_safetensors(f.path), Contains("does not match the stored"));

  // A file written by another tool (no checksum) is structurally validated instead.
  const std::string header = R"({"x":{"dtype":"F32","shape":[3],"data_offsets":[0,12]}})";
  std::string foreign(8, '\0');
  const std::uint64_t n = header.size();
  std::memcpy(foreign.data(), &n, 8);
  foreign += header + std::string(8, 'z');  // 8 data bytes where 12 are needed
  write_all(f.path, foreign);
  CHECK_THROWS_WITH(load_safetensors(f.path), Contains("tensor 'x' spans bytes [0, 12) of a 8-byte data section"));
  CHECK_THROWS_WITH(load_safetensors("/nonexistent/model.safetensors"), Contains("cannot open"));
}

// Found by review while writing the safetensors fuzzer (tests/fuzz/fuzz_safetensors.cpp, inputs in
// tests/fuzz/regressions/fuzz_safetensors/): headers whose numbers let an nlohmann exception or
// undefined behaviour (a float converted to an integer out of range, a shape whose size overflows)
// through instead of a define::Error.
TEST_CASE("safetensors: shapes and offsets must be integers a tensor can hold", "[nn][checkpoint]") {
  TempFile f("st_numbers.safetensors");
  const auto write_header = [&](const std::string& header) {
    std::string bytes(8, '\0');
    const std::uint64_t n = header.size();
    std::memcpy(bytes.data(), &n, 8);
    write_all(f.path, bytes + header);
  };
  const auto entry = [](const std::string& shape, const std::string& offsets) {
    return R"({"x":{"dtype":"F32","shape":)" + shape + R"(,"data_offsets":)" + offsets + "}}";
  };
  write_header(entry("[1e300]", "[0,0]"));
  CHECK_THROWS_WITH(load_safetensors(f.path), Contains("tensor 'x' has a malformed shape or data_offsets"));
  write_header(entry("[1.5]", "[0,0]"));  // would have been read as [1]
  CHECK_THROWS_WITH(load_safetensors(f.path), Contains("malformed shape"));
  write_header(entry("[1]", "[-4,0]"));
  CHECK_THROWS_WITH(load_safetensors(f.path), Contains("malformed shape or data_offsets"));
  write_header(entry("[-1]", "[0,0]"));
  CHECK_THROWS_WITH(load_safetensors(f.path), Contains("negative dimension"));
  write_header(entry("[1e400]", "[0,0]"));
  CHECK_THROWS_WITH(load_safetensors(f.path), Contains("has a corrupt header"));
  // Zero bytes of data, as the wrapped-around size (2^64) or the zero dimension says, but sizes
  // and strides past int64.
  write_header(entry("[4294967296,4294967296]", "[0,0]"));
  CHECK_THROWS_WITH(load_safetensors(f.path), Contains("has a shape [4294967296,4294967296] too large for a tensor"));
  write_header(entry("[0,4611686018427387904,4]", "[0,0]"));
  CHECK_THROWS_WITH(load_safetensors(f.path), Contains("too large for a tensor"));
  write_header(entry("[2305843009213693952]", "[0,0]"));  // 2^61 float32: 2^63 bytes
  CHECK_THROWS_WITH(load_safetensors(f.path), Contains("too large for a tensor"));
  write_header(entry("[0,1024,3]", "[0,0]"));  // an empty tensor of a reasonable shape is fine
  CHECK(load_safetensors(f.path).tensors.at(0).second.shape() == Shape{0, 1024, 3});
  // The writer's side: the header is JSON, so names and metadata must be UTF-8 (a vocabulary in
  // metadata may come from a Latin-1 corpus).
  CHECK_THROWS_WITH(save_safetensors(f.path, {{"w", from_vector<float>({1})}}, {{"vocab", "caf\xe9\n"}}),
                    Contains("is not valid UTF-8"));
}

TEST_CASE("safetensors: a failed save leaves the old file intact", "[nn][checkpoint]") {
  TempFile f("st_atomic.safetensors");
  save_safetensors(f.path, {{"w", from_vector<float>({1, 2})}});
  const std::string before = read_all(f.path);
  CHECK_THROWS_WITH(save_safetensors(f.path, {{"w", from_vector<float>({3})}, {"w", from_vector<float>({4})}}),
                    Contains("duplicate tensor name 'w'"));
  CHECK(read_all(f.path) == before);
  CHECK_THROWS(save_safetensors("/nonexistent-dir/x.safetensors", {{"w", from_vector<float>({1})}}));
  // No temporary files are left behind next to the target.
  for (const auto& e : std::filesystem::directory_iterator("."))
    CHECK(e.path().filename().string().find(".st_atomic.safetensors.tmp") == std::string::npos);
}

TEST_CASE("checkpoint: model + Adam state resume gives bit-identical training", "[nn][checkpoint]") {
  TempFile f("ckpt_resume.safetensors");
  auto make = [] {
    Generator gen(11);
    return std::make_shared<Linear>(4, 3, LinearOptions{}, gen);
  };
  Generator xgen(3);
  const Tensor x = rand_normal({5, 4}, 0, 1, {}, xgen);
  auto train_step = [&](Linear& m, optim::Adam& opt) {
    opt.zero_grad();
    Tensor loss = sum(mul(m.forward(x), m.forward(x)));
    backward(loss);
    opt.step();
  };
  // Uninterrupted: 5 steps.
  auto ref = make();
  optim::Adam ref_opt(ref->named_parameters(), {.lr = 0.01});
  for (int i = 0; i < 5; ++i) train_step(*ref, ref_opt);

  // Interrupted after 2 steps, saved, restored into fresh objects, 3 more steps.
  auto a = make();
  optim::Adam a_opt(a->named_parameters(), {.lr = 0.01});
  for (int i = 0; i < 2; ++i) train_step(*a, a_opt);
  save_checkpoint(f.path, make_checkpoint(*a, &a_opt, {{"step", "2"}}));

  auto b = make();
  optim::Adam b_opt(b->named_parameters(), {.lr = 0.01});
  const Checkpoint ck = load_checkpoint(f.path);
  CHECK(ck.run.at("step") == "2");
  CHECK(ck.optimizer_name == "Adam");
  restore_checkpoint(ck, *b, &b_opt);
  for (int i = 0; i < 3; ++i) train_step(*b, b_opt);
  CHECK(b->weight().to_vector<float>() == ref->weight().to_vector<float>());
  CHECK(b->bias().to_vector<float>() == ref->bias().to_vector<float>());
}

TEST_CASE("checkpoint: foreign files and mismatched models are refused", "[nn][checkpoint]") {
  TempFile f("ckpt_foreign.safetensors");
  save_safetensors(f.path, {{"w", from_vector<float>({1})}});
  CHECK_THROWS_WITH(load_checkpoint(f.path), Contains("not a define checkpoint"));

  Generator gen(1);
  Linear small(2, 2, {}, gen), big(3, 2, {}, gen);
  save_checkpoint(f.path, make_checkpoint(small, nullptr));
  CHECK_THROWS_WITH(restore_checkpoint(load_checkpoint(f.path), big, nullptr), Contains("weight"));
}
