// `define plot` against hand-written logs: the series read from metrics.jsonl, every point of the
// SVG read back through its panel's axis transform and compared with the log's numbers (read here
// independently), the tick labels where they claim to be, the PNG drawing the same lines, and the
// errors a bad run folder gives.
#include <catch2/catch.hpp>

#include <png.h>

#include <nlohmann/json.hpp>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <map>
#include <regex>
#include <sstream>
#include <string>
#include <vector>

#include "support/common.h"
#include "support/trained_run.h"
#include "tools/command.h"
#include "tools/dispatch.h"
#include "tools/plot.h"

using namespace define;
using Catch::Contains;
using define::cli::Point;
namespace fs = std::filesystem;

namespace {

// Two runs as train/training_loop.cpp logs them, plus what it may also write: other events, a
// non-finite loss (as the string "nan"), a blank line. "alpha" has a DeFINE part, "beta" an
// embedding part and a learning rate two decades lower; wall time reaches 900 s (minutes).
constexpr const char* kAlpha =
    R"({"elapsed_s":30.0,"epoch":1.0,"event":"train","grad_norm":2.5,"grad_norm DeFINE":0.31,"grad_norm context model":1.7,"loss":6.5,"lr":0.001,"perplexity":665.14,"step":10.0,"tokens_per_s":12000.0}
{"elapsed_s":61.5,"epoch":1.0,"event":"train","grad_norm":1.9,"grad_norm DeFINE":0.22,"grad_norm context model":1.1,"loss":5.9,"lr":0.0005,"step":20.0,"tokens_per_s":12500.0}
{"event":"overflow","loss_scale":32768.0,"reason":"the loss itself was inf","step":20.0}

{"elapsed_s":70.0,"epoch":1.0,"event":"valid","loss":5.7,"perplexity":298.87,"step":20.0}
{"elapsed_s":101.0,"epoch":2.0,"event":"train","grad_norm":1.2,"grad_norm DeFINE":0.15,"grad_norm context model":0.9,"loss":"nan","lr":0.0002,"step":30.0,"tokens_per_s":11800.0}
{"elapsed_s":140.0,"epoch":2.0,"event":"train","grad_norm":0.8,"grad_norm DeFINE":0.12,"grad_norm context model":0.6,"loss":4.8,"lr":0.0001,"step":40.0,"tokens_per_s":12100.0}
{"elapsed_s":150.0,"end_of_budget":1.0,"epoch":2.0,"event":"valid","loss":5.1,"perplexity":164.02,"step":40.0}
{"event":"final","seconds":150.0,"steps":40.0,"test_perplexity":170.5,"valid_perplexity":164.02}
)";
constexpr const char* kBeta =
    R"({"elapsed_s":200.0,"epoch":1.0,"event":"train","grad_norm":4.0,"grad_norm context model":3.0,"grad_norm embedding":0.05,"loss":7.0,"lr":0.00001,"step":15.0,"tokens_per_s":3000.0}
{"elapsed_s":410.0,"epoch":1.0,"event":"train","grad_norm":3.5,"grad_norm context model":2.5,"grad_norm embedding":0.04,"loss":6.8,"lr":0.00001,"step":30.0,"tokens_per_s":2900.0}
{"elapsed_s":480.0,"epoch":1.0,"event":"valid","loss":6.6,"perplexity":735.1,"step":30.0}
{"elapsed_s":700.0,"epoch":2.0,"event":"train","grad_norm":3.1,"grad_norm context model":2.0,"grad_norm embedding":0.03,"loss":6.6,"lr":0.00001,"step":45.0,"tokens_per_s":3100.0}
{"elapsed_s":900.0,"epoch":2.0,"event":"valid","loss":6.4,"perplexity":601.8,"step":45.0}
)";

struct Runs {
  test::TempDir tmp;
  std::string alpha, beta;
  Runs() {
    alpha = (tmp.path() / "alpha").string();
    beta = (tmp.path() / "beta").string();
    fs::create_directories(alpha);
    fs::create_directories(beta);
    tmp.write("alpha/metrics.jsonl", kAlpha);
    tmp.write("beta/metrics.jsonl", kBeta);
  }
};

// The log's (x, y) pairs read here with nlohmann::json, apart from tools/run_metrics.cpp.
std::vector<Point> from_log(const std::string& text, const std::string& event, const std::string& xk,
                            const std::string& yk) {
  std::vector<Point> out;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) {
    if (line.empty()) continue;
    const nlohmann::json j = nlohmann::json::parse(line);
    if (j["event"] != event || !j.contains(xk) || !j.contains(yk)) continue;
    if (!j[xk].is_number() || !j[yk].is_number()) continue;  // "nan" is not drawn
    out.push_back({j[xk].get<double>(), j[yk].get<double>()});
  }
  return out;
}

std::map<std::string, std::string> attributes(const std::string& tag) {
  std::map<std::string, std::string> a;
  static const std::regex kAttr(R"(([\w-]+)="([^"]*)\")");
  for (std::sregex_iterator it(tag.begin(), tag.end(), kAttr), end; it != end; ++it) a[(*it)[1]] = (*it)[2];
  return a;
}

// The opening tags <NAME ...> in `svg`, each as its attributes, and the text of <text> elements.
struct Element {
  std::map<std::string, std::string> attr;
  std::string text;
};
std::vector<Element> elements(const std::string& svg, const std::string& name) {
  std::vector<Element> out;
  const std::regex re("<" + name + R"(\s([^>]*)>([^<]*))");
  for (std::sregex_iterator it(svg.begin(), svg.end(), re), end; it != end; ++it)
    out.push_back({attributes((*it)[1]), (*it)[2]});
  return out;
}

// A panel's axis transform, read from its group's data-* attributes.
struct PanelAxes {
  double left, top, width, height, xlo, xhi, ylo, yhi, x_unit;
  bool ylog;
  explicit PanelAxes(const std::map<std::string, std::string>& a)
      : left(std::stod(a.at("data-left"))),
        top(std::stod(a.at("data-top"))),
        width(std::stod(a.at("data-width"))),
        height(std::stod(a.at("data-height"))),
        xlo(std::stod(a.at("data-x-lo"))),
        xhi(std::stod(a.at("data-x-hi"))),
        ylo(std::stod(a.at("data-y-lo"))),
        yhi(std::stod(a.at("data-y-hi"))),
        x_unit(std::stod(a.at("data-x-unit"))),
        ylog(a.at("data-y-log") == "1") {
    REQUIRE(a.at("data-x-log") == "0");
  }
  // Pixels back to the log's units.
  double x_of(double px) const { return (xlo + (px - left) / width * (xhi - xlo)) * x_unit; }
  double y_of(double py) const {
    const double f = (top + height - py) / height;
    return ylog ? ylo * std::pow(yhi / ylo, f) : ylo + f * (yhi - ylo);
  }
  double px_of(double x) const { return left + (x - xlo) / (xhi - xlo) * width; }
  double py_of(double y) const {
    const double f = ylog ? std::log(y / ylo) / std::log(yhi / ylo) : (y - ylo) / (yhi - ylo);
    return top + (1 - f) * height;
  }
};

std::vector<Point> polyline_points(const std::string& s) {
  std::vector<Point> out;
  std::istringstream in(s);
  for (std::string pair; in >> pair;) {
    const std::size_t comma = pair.find(',');
    REQUIRE(comma != std::string::npos);
    out.push_back({std::stod(pair.substr(0, comma)), std::stod(pair.substr(comma + 1))});
  }
  return out;
}

// "1.5k" -> 1500, "2M", "3e-4", "0.25".
double tick_value(const std::string& s) {
  const char last = s.back();
  if (last == 'k') return std::stod(s.substr(0, s.size() - 1)) * 1e3;
  if (last == 'M') return std::stod(s.substr(0, s.size() - 1)) * 1e6;
  return std::stod(s);
}

struct Panels {
  std::vector<std::string> titles;
  std::map<std::string, std::string> body;  // title -> the panel group's text
};
Panels split_panels(const std::string& svg) {
  Panels p;
  for (std::size_t at = svg.find("<g class=\"panel\""); at != std::string::npos;) {
    const std::size_t end = svg.find("</g>", at);
    REQUIRE(end != std::string::npos);
    const std::string body = svg.substr(at, end - at);
    const std::string title = attributes(body.substr(0, body.find('>')))["data-title"];
    p.titles.push_back(title);
    p.body[title] = body;
    at = svg.find("<g class=\"panel\"", end);
  }
  return p;
}

struct Expected {
  std::string event, x, y;
};

// What each panel draws, spelt out here from the issue's list.
std::map<std::string, Expected> expected_panels() {
  return {
      {"Training loss against steps", {"train", "step", "loss"}},
      {"Training loss against wall time", {"train", "elapsed_s", "loss"}},
      {"Validation perplexity against steps", {"valid", "step", "perplexity"}},
      {"Validation perplexity against wall time", {"valid", "elapsed_s", "perplexity"}},
      {"Learning rate", {"train", "step", "lr"}},
      {"Throughput (mean over each log interval)", {"train", "step", "tokens_per_s"}},
      {"Gradient norm: all parameters (log-interval mean)", {"train", "step", "grad_norm"}},
      {"Gradient norm: DeFINE (the logged step)", {"train", "step", "grad_norm DeFINE"}},
      {"Gradient norm: context model (the logged step)", {"train", "step", "grad_norm context model"}},
      {"Gradient norm: embedding (the logged step)", {"train", "step", "grad_norm embedding"}},
  };
}

struct Rgb {
  std::uint32_t width = 0, height = 0;
  std::vector<std::uint8_t> px;
  const std::uint8_t* at(int x, int y) const { return &px[(static_cast<std::size_t>(y) * width + x) * 3]; }
};

// Decoded by libpng itself, as RGB.
Rgb decode_png(const fs::path& p) {
  png_image img;
  std::memset(&img, 0, sizeof img);
  img.version = PNG_IMAGE_VERSION;
  REQUIRE(png_image_begin_read_from_file(&img, p.c_str()) != 0);
  img.format = PNG_FORMAT_RGB;
  Rgb d;
  d.width = img.width;
  d.height = img.height;
  d.px.resize(PNG_IMAGE_SIZE(img));
  REQUIRE(png_image_finish_read(&img, nullptr, d.px.data(), 0, nullptr) != 0);
  return d;
}

}  // namespace

TEST_CASE("plot: metrics.jsonl read into series, non-finite values and other events left out", "[cli][plot]") {
  Runs runs;
  const cli::RunMetrics a = cli::read_run_metrics(runs.alpha + "/");
  CHECK(a.name == "alpha");
  CHECK(a.records.size() == 8);  // the blank line is no record
  const auto loss = cli::extract_series(a, "train", "step", "loss");
  REQUIRE(loss.size() == 3);  // step 30's loss was "nan"
  const double want[][2] = {{10, 6.5}, {20, 5.9}, {40, 4.8}};
  for (std::size_t i = 0; i < 3; ++i) {
    CHECK(loss[i].x == want[i][0]);
    CHECK(loss[i].y == want[i][1]);
  }
  const auto valid = cli::extract_series(a, "valid", cli::kWallTimeKey, "perplexity");
  REQUIRE(valid.size() == 2);
  CHECK(valid[0].x == 70.0);
  CHECK(valid[0].y == 298.87);
  CHECK(valid[1].x == 150.0);
  CHECK(valid[1].y == 164.02);
  CHECK(cli::extract_series(a, "train", "step", "grad_norm DeFINE").size() == 4);
  CHECK(cli::extract_series(a, "train", "step", "no such field").empty());
  CHECK(cli::grad_norm_parts(a) == std::vector<std::string>{"DeFINE", "context model"});
  CHECK(cli::grad_norm_parts(cli::read_run_metrics(runs.beta)) ==
        std::vector<std::string>{"context model", "embedding"});
}

TEST_CASE("plot: every SVG point, read back through its axes, is the log's number", "[cli][plot]") {
  Runs runs;
  const fs::path svg_path = runs.tmp.path() / "curves.svg";
  CHECK_THAT(test::capture(cli::run_plot, {"--run", runs.alpha, "--run", runs.beta, "--out", svg_path.string()}),
             Contains("10 panels, 2 runs"));
  const std::string svg = test::read_all(svg_path);
  const std::map<std::string, std::string> logs = {{"alpha", kAlpha}, {"beta", kBeta}};

  // The legend names both runs.
  CHECK_THAT(svg, Contains(">alpha</text>"));
  CHECK_THAT(svg, Contains(">beta</text>"));

  const Panels panels = split_panels(svg);
  const auto expected = expected_panels();
  REQUIRE(panels.titles.size() == expected.size());
  for (const std::string& title : panels.titles) {
    INFO("panel: " << title);
    REQUIRE(expected.count(title) == 1);
    const Expected& e = expected.at(title);
    const std::string& body = panels.body.at(title);
    const PanelAxes axes(attributes(body.substr(0, body.find('>'))));
    // Units and scales on the axes.
    const bool wall = e.x == "elapsed_s";
    CHECK(axes.x_unit == (wall ? 60.0 : 1.0));
    CHECK_THAT(body, Contains(wall ? ">wall time (min)</text>" : ">step</text>"));
    const bool want_log = e.y == "perplexity" || e.y.rfind("grad_norm", 0) == 0;
    CHECK(axes.ylog == want_log);
    if (want_log) CHECK_THAT(body, Contains("(log scale)</text>"));

    const std::vector<Element> lines = elements(body, "polyline");
    const std::vector<Element> markers = elements(body, "circle");
    std::size_t runs_drawn = 0;
    for (const auto& [run, log] : logs) {
      INFO("run: " << run);
      const std::vector<Point> want = from_log(log, e.event, e.x, e.y);
      std::vector<Point> got;
      for (const Element& l : lines)
        if (l.attr.at("data-run") == run) {
          CHECK(l.attr.at("data-series") == e.event + " " + e.y);
          got = polyline_points(l.attr.at("points"));
        }
      REQUIRE(got.size() == want.size());
      if (!want.empty()) ++runs_drawn;
      const double xtol = 1e-4 * (axes.xhi - axes.xlo) * axes.x_unit;
      for (std::size_t i = 0; i < want.size(); ++i) {
        CHECK(std::abs(axes.x_of(got[i].x) - want[i].x) <= xtol);
        if (axes.ylog)
          CHECK(std::abs(std::log(axes.y_of(got[i].y) / want[i].y)) <= 1e-4 * std::log(axes.yhi / axes.ylo));
        else
          CHECK(std::abs(axes.y_of(got[i].y) - want[i].y) <= 1e-4 * (axes.yhi - axes.ylo));
        // Inside the plotting area.
        CHECK(got[i].x >= axes.left - 0.01);
        CHECK(got[i].x <= axes.left + axes.width + 0.01);
        CHECK(got[i].y >= axes.top - 0.01);
        CHECK(got[i].y <= axes.top + axes.height + 0.01);
      }
      // Validation records are marked, one marker on each point.
      std::vector<Point> marked;
      for (const Element& m : markers)
        if (m.attr.at("data-run") == run) marked.push_back({std::stod(m.attr.at("cx")), std::stod(m.attr.at("cy"))});
      if (e.event == "valid") {
        REQUIRE(marked.size() == got.size());
        for (std::size_t i = 0; i < got.size(); ++i) {
          CHECK(marked[i].x == got[i].x);
          CHECK(marked[i].y == got[i].y);
        }
      } else {
        CHECK(marked.empty());
      }
    }
    CHECK(runs_drawn == (e.y == "grad_norm DeFINE" || e.y == "grad_norm embedding" ? 1u : 2u));

    // Every tick label sits where its number is (text baselines 16 px below the x axis, 4 px
    // below a y tick), and there are at least two on each axis.
    const std::vector<Element> texts = elements(body, "text");
    int xticks = 0, yticks = 0;
    for (const Element& t : texts) {
      const auto cls = t.attr.find("class");
      if (cls == t.attr.end()) continue;
      const double v = tick_value(t.text);
      if (cls->second == "tick-x") {
        ++xticks;
        CHECK(std::abs(std::stod(t.attr.at("x")) - axes.px_of(v)) <= 0.5);
        CHECK(std::abs(std::stod(t.attr.at("y")) - (axes.top + axes.height + 16)) <= 0.01);
      } else if (cls->second == "tick-y") {
        ++yticks;
        INFO("tick " << t.text);
        CHECK(std::abs(std::stod(t.attr.at("y")) - 4 - axes.py_of(v)) <= 0.5);
      }
    }
    CHECK(xticks >= 2);
    CHECK(yticks >= 2);
  }
}

TEST_CASE("plot: the PNG draws the same figure, each run's line in its colour", "[cli][plot]") {
  Runs runs;
  const fs::path svg_path = runs.tmp.path() / "c.svg", png_path = runs.tmp.path() / "c.PNG";
  test::capture(cli::run_plot, {"--run", runs.alpha, "--run", runs.beta, "--out", svg_path.string()});
  test::capture(cli::run_plot, {"--run", runs.alpha, "--run", runs.beta, "--out", png_path.string()});
  const std::string svg = test::read_all(svg_path);
  const Rgb png = decode_png(png_path);
  const auto root = attributes(svg.substr(svg.find("<svg"), svg.find('>', svg.find("<svg")) - svg.find("<svg")));
  CHECK(png.width == std::stoul(root.at("width")));
  CHECK(png.height == std::stoul(root.at("height")));

  // Near every vertex of the loss lines (the SVG's coordinates) the PNG has that run's colour.
  const Panels panels = split_panels(svg);
  const std::map<std::string, cli::Colour> colour = {{"alpha", cli::run_colour(0)}, {"beta", cli::run_colour(1)}};
  int checked = 0;
  for (const Element& l : elements(panels.body.at("Training loss against steps"), "polyline")) {
    const cli::Colour c = colour.at(l.attr.at("data-run"));
    for (const Point& q : polyline_points(l.attr.at("points"))) {
      bool found = false;
      for (int dy = -2; dy <= 2 && !found; ++dy)
        for (int dx = -2; dx <= 2 && !found; ++dx) {
          const std::uint8_t* p = png.at(static_cast<int>(q.x) + dx, static_cast<int>(q.y) + dy);
          found = std::abs(p[0] - c.r) + std::abs(p[1] - c.g) + std::abs(p[2] - c.b) < 40;
        }
      CHECK(found);
      ++checked;
    }
  }
  CHECK(checked == 6);  // 3 finite losses each
  // Text is drawn too: the dark pixels of the labels.
  std::size_t dark = 0;
  for (std::size_t i = 0; i + 2 < png.px.size(); i += 3)
    dark += png.px[i] < 0x40 && png.px[i + 1] < 0x40 && png.px[i + 2] < 0x40;
  CHECK(dark > 2000);
}

TEST_CASE("plot: runs of the same folder name are told apart by their paths", "[cli][plot]") {
  test::TempDir tmp;
  for (const char* d : {"a/run", "b/run"}) {
    fs::create_directories(tmp.path() / d);
    tmp.write(std::string(d) + "/metrics.jsonl", kBeta);
  }
  const std::string a = (tmp.path() / "a/run").string(), b = (tmp.path() / "b/run").string();
  test::capture(cli::run_plot, {"--run", a, "--run", b, "--out", (tmp.path() / "x.svg").string()});
  const std::string svg = test::read_all(tmp.path() / "x.svg");
  CHECK_THAT(svg, Contains("data-run=\"" + a + "\""));
  CHECK_THAT(svg, Contains("data-run=\"" + b + "\""));
}

TEST_CASE("plot: values at the limits of a double draw without a hang or a crash", "[cli][plot]") {
  test::TempDir tmp;
  fs::create_directories(tmp.path() / "extreme");
  tmp.write(
      "extreme/metrics.jsonl",
      R"({"event":"train","step":1e18,"loss":1e308,"lr":5e-324,"grad_norm":1e-260,"tokens_per_s":-1e308,"elapsed_s":1e300}
{"event":"train","step":1.0000000000000002e18,"loss":-1e308,"lr":1e300,"grad_norm":1.7e308,"tokens_per_s":1e308,"elapsed_s":0}
{"event":"train","step":5,"loss":1e20,"lr":1e20,"grad_norm":1e20,"tokens_per_s":1e20,"elapsed_s":1e20}
{"event":"train","step":6,"loss":1.0000000000000002e20,"lr":1.0000000000000002e20,"grad_norm":1.0000000000000002e20}
{"event":"valid","step":3,"perplexity":1e-320,"elapsed_s":1}
{"event":"valid","step":4,"perplexity":1.0000000000000002,"elapsed_s":2}
)");
  const std::string run = (tmp.path() / "extreme").string();
  for (const char* out : {"x.svg", "x.png"})
    CHECK(cli::run_command("plot", {"--run", run, "--out", (tmp.path() / out).string()}) == 0);
}

TEST_CASE("plot: a bad run folder or log is a clear error, never a crash", "[cli][plot]") {
  test::TempDir tmp;
  auto run_with = [&](const std::string& name, const std::string& log) {
    fs::create_directories(tmp.path() / name);
    tmp.write(name + "/metrics.jsonl", log);
    return (tmp.path() / name).string();
  };
  const std::string out = (tmp.path() / "out.svg").string();
  auto plot_error = [&](const std::string& run) {
    return test::error_of([&] { cli::run_plot({"--run", run, "--out", out}); });
  };
  const std::string line1 = std::string(kBeta).substr(0, std::string(kBeta).find('\n') + 1);

  CHECK_THAT(plot_error((tmp.path() / "nowhere").string()), Contains("plot: run folder") && Contains("does not exist"));
  fs::create_directories(tmp.path() / "empty");
  CHECK_THAT(plot_error((tmp.path() / "empty").string()), Contains("has no metrics.jsonl"));
  CHECK_THAT(plot_error(run_with("damaged", line1 + "{\"event\":\"train\",\"loss\":5.\n" + line1)),
             Contains("damaged/metrics.jsonl:2: damaged line, not JSON"));
  CHECK_THAT(plot_error(run_with("array", line1 + "\n[1, 2]\n")),
             Contains("array/metrics.jsonl:3: damaged line, not a JSON object"));
  CHECK_THAT(plot_error(run_with("noevent", "{\"step\": 1, \"loss\": 2}\n")),
             Contains("noevent/metrics.jsonl:1: damaged line"));
  CHECK_THAT(plot_error(run_with("nothing", "")), Contains("holds no training or validation records"));
  CHECK_THAT(plot_error(run_with("finalonly", "{\"event\":\"final\",\"steps\":3}\n")),
             Contains("finalonly/metrics.jsonl holds no training or validation records"));
  // A last line still being written is left out; the rest is drawn.
  const std::string live = run_with("live", line1 + "{\"elapsed_s\":9.5,\"event\":\"tr");
  CHECK(cli::read_run_metrics(live).records.size() == 1);
  CHECK(plot_error(live).empty());

  const std::string good = run_with("good", kBeta);
  CHECK_THAT(test::error_of([&] {
               cli::run_plot({"--run", good, "--out", (tmp.path() / "x.pdf").string()});
             }),
             Contains("must end in .svg or .png"));
  CHECK_THAT(test::error_of([&] { cli::run_plot({"--out", out}); }), Contains("--run is required"));
  CHECK_THAT(test::error_of([&] { cli::run_plot({"--run", good}); }), Contains("--out is required"));
  // Through the dispatch, as the binary runs it: an error is exit status 2, not a crash (3).
  CHECK(cli::run_command("plot", {"--run", run_with("damaged2", "{\n"), "--out", out}) == 2);
  CHECK(cli::run_command("plot", {"--run", good, "--out", out}) == 0);
}
