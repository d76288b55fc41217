// `define corrmap` on a tiny trained run (support/trained_run.h): the PNG of the normalised |E^T E|
// of the map and of every unit layer, every pixel checked against the Gram matrix computed here
// independently, and the layer path reproducing the unit.
#include <catch2/catch.hpp>

#include <png.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <string>
#include <vector>

#include "autograd/ops.h"
#include "support/trained_run.h"
#include "models/token_cache.h"
#include "nn/define_unit.h"
#include "tools/command.h"
#include "train/run_loader.h"

using namespace define;
using define::test::capture;
using define::test::define_run;
using define::test::read_all;
using define::test::TrainedRun;
using Catch::Contains;
namespace fs = std::filesystem;

namespace {

std::uint32_t big_endian(const std::string& s, std::size_t at) {
  std::uint32_t v = 0;
  for (std::size_t i = 0; i < 4; ++i) v = (v << 8) | static_cast<unsigned char>(s[at + i]);
  return v;
}

struct Decoded {
  std::uint32_t width = 0, height = 0;
  std::vector<std::uint8_t> gray;
};

// Decoded by libpng itself (independent of the writer), converted to 8-bit gray.
Decoded decode_png(const fs::path& p) {
  png_image img;
  std::memset(&img, 0, sizeof img);
  img.version = PNG_IMAGE_VERSION;
  REQUIRE(png_image_begin_read_from_file(&img, p.c_str()) != 0);
  img.format = PNG_FORMAT_GRAY;
  Decoded d;
  d.width = img.width;
  d.height = img.height;
  d.gray.resize(PNG_IMAGE_SIZE(img));
  REQUIRE(png_image_finish_read(&img, nullptr, d.gray.data(), 0, nullptr) != 0);
  return d;
}

// |Y^T Y| of rows Y [V, f], min-max normalised to [0, 1], in double, row-major [f, f].
std::vector<double> normalised_abs_gram(const Tensor& y) {
  const std::int64_t v = y.size(0), f = y.size(1);
  const std::vector<float> a = contiguous(y).to_vector<float>();
  std::vector<double> g(static_cast<std::size_t>(f * f), 0.0);
  for (std::int64_t i = 0; i < f; ++i)
    for (std::int64_t j = 0; j < f; ++j) {
      double s = 0;
      for (std::int64_t r = 0; r < v; ++r) s += double(a[static_cast<std::size_t>(r * f + i)]) * a[static_cast<std::size_t>(r * f + j)];
      g[static_cast<std::size_t>(i * f + j)] = std::abs(s);
    }
  const double lo = *std::min_element(g.begin(), g.end()), hi = *std::max_element(g.begin(), g.end());
  for (double& x : g) x = (x - lo) / (hi - lo);
  return g;
}

}  // namespace

TEST_CASE("corrmap: PNG of the normalised |E^T E|, one per layer, and the layer path reproduces the unit", "[cli][commands]") {
  const TrainedRun& run = define_run();
  const fs::path png = run.root / "map.png";
  // Size = n = 8: one pixel per entry, so pixels can be checked against the formula.
  CHECK_THAT(capture(cli::run_corrmap, {"--run", run.dir, "--out", png.string(), "--layer", "map", "--size", "8"}),
             Contains("map (8 features, 41 words)"));
  const std::string bytes = read_all(png);
  REQUIRE(bytes.size() > 33);
  CHECK(bytes.substr(0, 8) == std::string("\x89PNG\r\n\x1a\n", 8));
  CHECK(bytes.substr(12, 4) == "IHDR");
  CHECK(big_endian(bytes, 16) == 8);             // width
  CHECK(big_endian(bytes, 20) == 8);             // height
  CHECK(static_cast<int>(bytes[24]) == 8);       // bit depth
  CHECK(static_cast<int>(bytes[25]) == 0);       // colour type: gray

  // |C| = |E^T E| from the table, min-max normalised, computed here in double.
  const train::LoadedRun loaded = train::load_run(run.dir);
  const models::TokenInput& input = loaded.token_input();
  const std::vector<float> e = input.table().to_vector<float>();
  std::vector<double> c(64, 0.0);
  for (int i = 0; i < 8; ++i)
    for (int j = 0; j < 8; ++j) {
      for (int v = 0; v < 41; ++v) c[i * 8 + j] += static_cast<double>(e[v * 8 + i]) * e[v * 8 + j];
      c[i * 8 + j] = std::abs(c[i * 8 + j]);
    }
  const double lo = *std::min_element(c.begin(), c.end()), hi = *std::max_element(c.begin(), c.end());
  const Decoded d = decode_png(png);
  REQUIRE(d.width == 8);
  REQUIRE(d.height == 8);
  for (int k = 0; k < 64; ++k) CHECK(d.gray[k] == std::lround(255.0 * (c[k] - lo) / (hi - lo)));
  const Tensor gram = models::representation_gram(input, "map");
  CHECK(std::abs(std::abs(gram.to_vector<double>()[9]) - c[9]) <= 1e-9 * hi);

  // All layers, upscaled to 30 px: pixel (y, x) shows cell (floor((y + 0.5) f / 30), ...) of the
  // layer's normalised |Y^T Y| over the 41 words, Y computed here from the unit's layers.
  const fs::path all = run.root / "layers.png";
  capture(cli::run_corrmap, {"--run", run.dir, "--out", all.string(), "--layer", "all", "--size", "30"});
  const Tensor every_id = arange(41, {.dtype = DType::Int64});
  const std::vector<Tensor> unit_layers = models::define_layer_outputs(input, every_id);
  const std::vector<std::pair<std::string, Tensor>> outputs{
      {"map", input.table()},
      {"unit.0", unit_layers.at(0)},
      {"unit.1", unit_layers.at(1)},
      {"out", reshape(input.forward(reshape(every_id, {41, 1})), {41, 12})}};
  for (const auto& [layer, y] : outputs) {
    INFO("layer " << layer);
    const fs::path p = run.root / ("layers." + layer + ".png");
    REQUIRE(fs::exists(p));
    const Decoded img = decode_png(p);
    REQUIRE(img.width == 30);
    REQUIRE(img.height == 30);
    const std::int64_t f = y.size(1);
    const std::vector<double> want = normalised_abs_gram(y);
    int wrong = 0;
    for (int py = 0; py < 30; ++py)
      for (int px = 0; px < 30; ++px) {
        const auto cell = [&](int q) { return std::min<std::int64_t>(f - 1, std::int64_t((q + 0.5) * double(f) / 30.0)); };
        const double v = want[static_cast<std::size_t>(cell(py) * f + cell(px))];
        wrong += std::abs(int(img.gray[static_cast<std::size_t>(py * 30 + px)]) - int(std::lround(255.0 * v))) > 1;
      }
    CHECK(wrong == 0);
  }
  const fs::path small = run.root / "small.png";
  capture(cli::run_corrmap, {"--run", run.dir, "--out", small.string(), "--layer", "unit.1", "--size", "5", "--colour", "heat"});
  const std::string heat = read_all(small);
  CHECK(big_endian(heat, 16) == 5);
  CHECK(static_cast<int>(heat[25]) == 2);  // colour type: RGB

  // Layer i of the unit, recomputed layer by layer, leads to the unit's own output.
  const Tensor ids = from_vector(std::vector<std::int64_t>{0, 5, 40}, {3});
  const std::vector<Tensor> layers = models::define_layer_outputs(input, ids);
  REQUIRE(layers.size() == 2);
  // o_1 = n + (k - n) / N = 12 rounded up to a multiple of 8; o_2 = k.
  CHECK(layers[0].shape() == Shape{3, 16});
  CHECK(layers[1].shape() == Shape{3, 16});
  const auto& unit = dynamic_cast<const nn::DefineUnit&>(input.submodule("unit"));
  const std::vector<float> via_layers = unit.reduce()->forward(layers[1]).to_vector<float>();
  const std::vector<float> direct = reshape(input.forward(reshape(ids, {3, 1})), {3, 12}).to_vector<float>();
  for (std::size_t k = 0; k < direct.size(); ++k) CHECK(via_layers[k] == Approx(direct[k]).margin(1e-6));

  CHECK_THROWS_WITH(cli::run_corrmap({"--run", run.dir, "--out", png.string(), "--layer", "unit.2"}),
                    Contains("--layer 'unit.2' does not exist for input type 'define' (available: map, unit.0, unit.1, out, all)"));
  CHECK_THROWS_WITH(cli::run_corrmap({"--run", run.dir, "--out", png.string(), "--size", "0"}), Contains("--size must be in"));
}
