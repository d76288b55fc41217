// `define corrmap --run DIR [--checkpoint F] --out map.png [--layer NAME|all] [--size PX]
//                 [--colour gray|heat]`
// The correlation map of a token representation, as in the DeFINE paper's Appendix B: with R the
// [V, f] representation of all V vocabulary words (models/token_cache.h: `map` = the table E,
// `unit.<i>` = layer i of the DeFINE unit, `out` = the unit's output),
//
//     C = R^T R   (f x f),   A = |C|,   image = (A - min A) / (max A - min A)   in [0, 1].
//
// Magnitudes, because the map shows how strongly features are correlated, whatever the sign
// (a strongly negative correlation is as redundant as a positive one); min-max over the whole
// matrix, diagonal included, so 0 is black and the largest |C_ij| white. The matrix is resampled
// to PX x PX pixels: nearest cell when PX >= f (every cell shows), the mean of the covered cells
// when PX < f. --layer all writes one PNG per representation, named <out stem>.<layer><ext>.
#include <fmt/format.h>
#include <fmt/ranges.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <string>
#include <vector>

#include "autograd/ops.h"
#include "core/error.h"
#include "models/token_cache.h"
#include "tools/command.h"
#include "tools/options.h"
#include "tools/png_writer.h"
#include "train/run_loader.h"

namespace define::cli {
namespace {

constexpr const char* kOp = "corrmap";

// |C| min-max normalised, row-major f x f. A constant matrix maps to zeros.
std::vector<double> normalised_magnitudes(const Tensor& gram, double& lo, double& hi) {
  std::vector<double> a = contiguous(gram).to_vector<double>();
  for (double& x : a) x = std::abs(x);
  lo = *std::min_element(a.begin(), a.end());
  hi = *std::max_element(a.begin(), a.end());
  const double range = hi - lo;
  for (double& x : a) x = range > 0 ? (x - lo) / range : 0.0;
  return a;
}

// The value of output pixel p along one axis: its cell range [first, last) in the f cells.
void cell_range(std::int64_t p, std::int64_t px, std::int64_t f, std::int64_t& first, std::int64_t& last) {
  if (px >= f) {
    first = std::min(f - 1, static_cast<std::int64_t>((static_cast<double>(p) + 0.5) * static_cast<double>(f) /
                                                      static_cast<double>(px)));
    last = first + 1;
  } else {
    first = p * f / px;
    last = std::max(first + 1, (p + 1) * f / px);
  }
}

// Black -> red -> yellow -> white.
void heat(double t, std::uint8_t* rgb) {
  for (int c = 0; c < 3; ++c) {
    const double v = std::clamp(3.0 * t - c, 0.0, 1.0);
    rgb[c] = static_cast<std::uint8_t>(std::lround(v * 255.0));
  }
}

Image render(const std::vector<double>& a, std::int64_t f, std::int64_t px, bool colour) {
  Image img;
  img.width = img.height = px;
  img.channels = colour ? 3 : 1;
  img.pixels.resize(static_cast<std::size_t>(px * px * img.channels));
  for (std::int64_t y = 0; y < px; ++y) {
    std::int64_t r0, r1;
    cell_range(y, px, f, r0, r1);
    for (std::int64_t x = 0; x < px; ++x) {
      std::int64_t c0, c1;
      cell_range(x, px, f, c0, c1);
      double sum = 0;
      for (std::int64_t r = r0; r < r1; ++r)
        for (std::int64_t c = c0; c < c1; ++c) sum += a[static_cast<std::size_t>(r * f + c)];
      const double t = sum / static_cast<double>((r1 - r0) * (c1 - c0));
      std::uint8_t* dst = &img.pixels[static_cast<std::size_t>((y * px + x) * img.channels)];
      if (colour) heat(t, dst);
      else *dst = static_cast<std::uint8_t>(std::lround(std::clamp(t, 0.0, 1.0) * 255.0));
    }
  }
  return img;
}

std::string suffixed(const std::string& out, const std::string& layer) {
  const std::filesystem::path p(out);
  return (p.parent_path() / (p.stem().string() + "." + layer + p.extension().string())).string();
}

}  // namespace

int run_corrmap(const std::vector<std::string>& args) {
  const Options opts = parse_options(
      kOp, args, {.required = {"run", "out"}, .repeated = {}, .optional = {"checkpoint", "layer", "size", "colour"}, .flags = {}});
  if (opts.help) {
    fmt::print(
        "usage: define corrmap --run DIR [--checkpoint F] --out map.png [--layer NAME|all] [--size PX]\n"
        "                      [--colour gray|heat]\n"
        "Writes the correlation map |R^T R| (min-max normalised to [0, 1]) of a representation R of\n"
        "all vocabulary words as a PX x PX PNG (paper, Appendix B).\n"
        "  --layer NAME  map (the embedding table), unit.<i> (layer i of the DeFINE unit), out (the\n"
        "                unit's output), or all (one file per layer: <stem>.<layer>.png); default out\n"
        "                when the input has a unit, else map\n"
        "  --size PX     image side in pixels (default 512)\n"
        "  --colour C    gray (default) or heat (black-red-yellow-white)\n");
    return 0;
  }
  const std::int64_t px = opts.has("size") ? opts.get_int("size") : 512;
  if (px < 1 || px > 16384) fail(kOp, "--size must be in [1, 16384] pixels, got {}", px);
  const std::string colour = opts.has("colour") ? opts.get("colour") : "gray";
  if (colour != "gray" && colour != "heat") fail(kOp, "--colour must be gray or heat, got '{}'", colour);

  const train::LoadedRun run = train::load_run(opts.get("run"), opts.has("checkpoint") ? opts.get("checkpoint") : "");
  const models::TokenInput& input = run.token_input();
  const std::vector<std::string> available = models::representation_names(input);
  if (available.empty())
    fail(kOp, "input type '{}' has no single table or unit output to map", models::to_string(input.config().kind));
  const std::string layer = opts.has("layer") ? opts.get("layer") : (input.has_unit() ? "out" : "map");
  std::vector<std::string> layers;
  if (layer == "all") {
    layers = available;
  } else {
    if (std::find(available.begin(), available.end(), layer) == available.end())
      fail(kOp, "--layer '{}' does not exist for input type '{}' (available: {}, all)", layer,
           models::to_string(input.config().kind), fmt::join(available, ", "));
    layers = {layer};
  }
  const std::string out = opts.get("out");
  for (const std::string& name : layers) {
    const Tensor gram = models::representation_gram(input, name);
    const std::int64_t f = gram.size(0);
    double lo = 0, hi = 0;
    const std::vector<double> a = normalised_magnitudes(gram, lo, hi);
    const std::string path = layer == "all" ? suffixed(out, name) : out;
    write_png(path, render(a, f, px, colour == "heat"));
    fmt::print("wrote {}: {} ({} features, {} words), |C| in [{:.4g}, {:.4g}], {}x{} pixels\n", path, name, f,
               input.config().vocab, lo, hi, px, px);
  }
  return 0;
}

}  // namespace define::cli
