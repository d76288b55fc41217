// `define plot --run DIR [--run DIR ...] --out curves.svg|curves.png`
// Reads each run's metrics.jsonl (tools/run_metrics.h) and draws its curves, the runs overlaid in
// one colour each, so that two runs compare at a glance (tools/plot_figure.h draws, tools/plot_svg.cpp
// and tools/plot_raster.cpp write).
#include "tools/plot.h"

#include <fmt/format.h>

#include <algorithm>
#include <cctype>
#include <cmath>
#include <filesystem>
#include <map>

#include "core/atomic_file.h"
#include "core/error.h"
#include "tools/command.h"
#include "tools/options.h"

namespace define::cli {
namespace {

constexpr const char* kOp = "plot";

struct WallUnit {
  double seconds;
  const char* name;
};

// Seconds for a short run, minutes up to five hours, hours beyond: ticks a person reads as times.
WallUnit wall_unit(const std::vector<RunMetrics>& runs) {
  double most = 0;
  for (const RunMetrics& r : runs)
    for (const MetricsRecord& m : r.records)
      if (const auto t = m.numbers.find(kWallTimeKey); t != m.numbers.end() && std::isfinite(t->second))
        most = std::max(most, t->second);
  return most <= 300 ? WallUnit{1, "s"} : most <= 5 * 3600 ? WallUnit{60, "min"} : WallUnit{3600, "h"};
}

std::vector<Point> scaled_x(std::vector<Point> points, double unit) {
  for (Point& p : points) p.x /= unit;
  return points;
}

// One line per run of `y_key` in `event` records, against the step or (unit > 0) the wall time.
Panel panel_of(const std::vector<RunMetrics>& runs, const std::string& event, const std::string& y_key,
               const WallUnit* wall) {
  Panel p;
  p.x_label = wall ? fmt::format("wall time ({})", wall->name) : "step";
  p.x_unit = wall ? wall->seconds : 1;
  std::vector<std::string> missing;
  for (std::size_t i = 0; i < runs.size(); ++i) {
    Line l;
    l.run = static_cast<int>(i);
    l.markers = event == "valid";
    l.series = event + " " + y_key;
    l.points = scaled_x(extract_series(runs[i], event, wall ? kWallTimeKey : "step", y_key), p.x_unit);
    if (wall && l.points.empty() && !extract_series(runs[i], event, "step", y_key).empty())
      missing.push_back(runs[i].name);
    p.lines.push_back(std::move(l));
  }
  if (!missing.empty())
    p.note = missing.size() == runs.size()
                 ? fmt::format("no wall time: these logs have no \"{}\" field", kWallTimeKey)
                 : fmt::format("no \"{}\" in the log of {}", kWallTimeKey, fmt::join(missing, ", "));
  return p;
}

}  // namespace

Figure training_figure(const std::vector<RunMetrics>& runs) {
  Figure f;
  for (const RunMetrics& r : runs) f.runs.push_back(r.name);
  const WallUnit wall = wall_unit(runs);
  for (const WallUnit* x : {static_cast<const WallUnit*>(nullptr), &wall}) {
    Panel p = panel_of(runs, "train", "loss", x);
    p.title = x ? "Training loss against wall time" : "Training loss against steps";
    p.y_label = "loss (nats/token)";
    f.panels.push_back(std::move(p));
  }
  for (const WallUnit* x : {static_cast<const WallUnit*>(nullptr), &wall}) {
    Panel p = panel_of(runs, "valid", "perplexity", x);
    p.title = x ? "Validation perplexity against wall time" : "Validation perplexity against steps";
    p.y_label = "perplexity (log scale)";
    p.y_log = true;
    f.panels.push_back(std::move(p));
  }
  {
    // Linear: warmup, cosine and step schedules keep their familiar shapes (a log axis would
    // stretch a cosine's last steps towards zero over most of the panel).
    Panel p = panel_of(runs, "train", "lr", nullptr);
    p.y_from_zero = true;
    p.title = "Learning rate";
    p.y_label = "learning rate";
    f.panels.push_back(std::move(p));
  }
  {
    Panel p = panel_of(runs, "train", "tokens_per_s", nullptr);
    p.title = "Throughput (mean over each log interval)";
    p.y_label = "tokens/s";
    p.y_from_zero = true;
    f.panels.push_back(std::move(p));
  }
  {
    Panel p = panel_of(runs, "train", "grad_norm", nullptr);
    p.title = "Gradient norm: all parameters (log-interval mean)";
    p.y_label = "L2 norm before clipping (log scale)";
    p.y_log = true;
    f.panels.push_back(std::move(p));
  }
  std::vector<std::string> parts;
  for (const RunMetrics& r : runs)
    for (const std::string& part : grad_norm_parts(r))
      if (std::find(parts.begin(), parts.end(), part) == parts.end()) parts.push_back(part);
  for (const std::string& part : parts) {
    Panel p = panel_of(runs, "train", "grad_norm " + part, nullptr);
    p.title = fmt::format("Gradient norm: {} (the logged step)", part);
    p.y_label = "L2 norm before clipping (log scale)";
    p.y_log = true;
    f.panels.push_back(std::move(p));
  }
  return f;
}

std::string render_svg(const Figure& figure) {
  const FigureSize size = figure_size(figure);
  SvgCanvas canvas(size.width, size.height);
  draw_figure(figure, canvas);
  return canvas.finish();
}

Image render_png(const Figure& figure) {
  const FigureSize size = figure_size(figure);
  RasterCanvas canvas(size.width, size.height);
  draw_figure(figure, canvas);
  return canvas.finish();
}

int run_plot(const std::vector<std::string>& args) {
  const Options opts =
      parse_options(kOp, args, {.required = {"out"}, .repeated = {"run"}, .optional = {}, .flags = {}});
  if (opts.help) {
    fmt::print(
        "usage: define plot --run DIR [--run DIR ...] --out FILE.svg|FILE.png\n"
        "Draws the training curves in each run folder's metrics.jsonl, the runs overlaid in one colour\n"
        "each and named by their folders in the legend: training loss and validation perplexity against\n"
        "steps and against wall time (the records' \"{}\" field, seconds since the run started),\n"
        "the learning rate, tokens/s, and the gradient norm of all parameters and of each parameter part\n"
        "(\"grad_norm <part>\" fields). Validation records are marked with dots. Perplexity and gradient\n"
        "norms are on log scales (which leave out values <= 0); non-finite values are left out.\n"
        "--out FILE.svg writes SVG; FILE.png writes the same figure as a PNG, its text in a built-in 6x13\n"
        "bitmap font (printable ASCII; other characters show as '?').\n"
        "An unterminated last line of a log (a live run) is left out with a warning; any other line that\n"
        "is not a JSON object is an error naming the file and line.\n",
        kWallTimeKey);
    return 0;
  }
  const std::vector<std::string> dirs = opts.get_all("run");
  if (dirs.empty()) fail(kOp, "--run is required: give one or more run folders (see `define plot --help`)");
  const std::string out = opts.get("out");
  std::string ext = std::filesystem::path(out).extension().string();
  std::transform(ext.begin(), ext.end(), ext.begin(), [](unsigned char ch) { return std::tolower(ch); });
  if (ext != ".svg" && ext != ".png") fail(kOp, "--out '{}' must end in .svg or .png", out);

  std::vector<RunMetrics> runs;
  for (const std::string& d : dirs) runs.push_back(read_run_metrics(d));
  // Two folders of the same name ("a/run", "b/run") are told apart by their paths as given.
  std::map<std::string, int> count;
  for (const RunMetrics& r : runs) ++count[r.name];
  for (std::size_t i = 0; i < runs.size(); ++i)
    if (count[runs[i].name] > 1) runs[i].name = dirs[i];

  const Figure figure = training_figure(runs);
  if (ext == ".svg")
    write_file_atomically(out, render_svg(figure));
  else
    write_png(out, render_png(figure));
  fmt::print("wrote {}: {} panels, {} run{}\n", out, figure.panels.size(), runs.size(), runs.size() == 1 ? "" : "s");
  return 0;
}

}  // namespace define::cli
