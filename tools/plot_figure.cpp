#include "tools/plot_figure.h"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>
#include <limits>

namespace define::cli {
namespace {

// Layout in pixels. Text stays outside the plotting areas (the PNG draws it over the lines).
constexpr int kPanelW = 620, kPanelH = 300;
constexpr int kLeft = 84, kRight = 24, kTop = 34, kBottom = 52;  // a panel's plotting area inside it
constexpr int kLegendRow = 22;
constexpr double kCharW = 7.6;  // a generous width of one 12 px sans-serif character, for wrapping
constexpr Colour kGrid{0xe6, 0xe6, 0xe6}, kMinorGrid{0xf3, 0xf3, 0xf3}, kFrame{0x88, 0x88, 0x88};
constexpr Colour kGrey{0x70, 0x70, 0x70};

// v written with as few decimals as show it to within `resolution`.
std::string fixed(double v, double resolution) {
  for (int d = 0; d < 10; ++d) {
    const double scale = std::pow(10.0, d);
    if (std::abs(std::round(v * scale) / scale - v) <= resolution * 1e-3) return fmt::format("{:.{}f}", v, d);
  }
  return fmt::format("{:g}", v);
}

// A tick label: "0.25", "1.5k", "20M", "3e-4" (short enough for the left margin).
std::string tick_text(double v, double resolution, double magnitude) {
  if (v == 0) return "0";
  if (magnitude >= 1e6) return fixed(v / 1e6, resolution / 1e6) + "M";
  if (magnitude >= 1e4) return fixed(v / 1e3, resolution / 1e3) + "k";
  if (magnitude < 1e-3) {
    const int e = static_cast<int>(std::floor(std::log10(std::abs(v))));
    const double p = std::pow(10.0, e);
    return fixed(v / p, resolution / p) + fmt::format("e{}", e);
  }
  return fixed(v, resolution);
}

// The 1, 2, 5 x 10^k step that cuts `range` into about five parts.
double nice_step(double range) {
  const double raw = range / 5;
  const double p = std::pow(10.0, std::floor(std::log10(raw)));
  const double m = raw / p;
  return (m < 1.5 ? 1 : m < 3 ? 2 : m < 7 ? 5 : 10) * p;
}

// Ticks at the data's ends only: for ranges the nice ticks cannot cut (values near the limits of
// a double, or so close together that their steps round away), so that no data hang or break it.
Axis plain_axis(double lo, double hi, bool log) {
  Axis a;
  a.lo = lo, a.hi = hi, a.log = log;
  a.ticks = {lo, hi};
  a.labels = {fmt::format("{:.4g}", lo), fmt::format("{:.4g}", hi)};
  return a;
}

// `pad`: widen the data's range by 2% each side first, so that no line runs along the frame (a
// constant learning rate would hide in it); never below 0 for data that are not.
Axis linear_axis(double lo, double hi, bool from_zero, bool pad) {
  Axis a;
  if (from_zero && lo > 0) lo = 0;
  if (hi <= lo) {  // one value: a range around it
    const double d = lo != 0 ? std::abs(lo) * 0.1 : 1.0;
    lo = lo >= 0 && lo - d < 0 ? 0 : lo - d;
    hi += d;
  } else if (pad) {
    const double d = 0.02 * (hi - lo);
    lo = lo >= 0 && lo - d < 0 ? 0 : lo - d;
    hi += d;
  }
  const double step = nice_step(hi - lo);
  const double first = std::floor(lo / step + 1e-9), last = std::ceil(hi / step - 1e-9);
  if (!std::isfinite(step) || !(last - first >= 1 && last - first <= 20)) return plain_axis(lo, hi, false);
  a.lo = first * step;
  a.hi = last * step;
  for (int i = 0; i <= static_cast<int>(last - first); ++i) a.ticks.push_back((first + i) * step);
  const double magnitude = std::max(std::abs(a.lo), std::abs(a.hi));
  for (const double t : a.ticks) a.labels.push_back(tick_text(std::abs(t) < step * 1e-9 ? 0.0 : t, step, magnitude));
  return a;
}

Axis log_axis(double lo, double hi) {
  Axis a;
  a.log = true;
  if (!(lo >= 1e-250 && hi <= 1e250)) return plain_axis(lo, hi, true);  // the padding below stays finite
  if (hi <= lo) lo /= 2, hi *= 2;
  const double pad = std::pow(10.0, 0.02 * (std::log10(hi) - std::log10(lo)));  // as linear_axis: 2% each side
  lo /= pad, hi *= pad;
  const double span = std::log10(hi) - std::log10(lo);
  if (span < 0.5) {
    // Less than half a decade: evenly stepped ticks read better than m x 10^k, of which there
    // would be one or two.
    const double step = nice_step(hi - lo);
    const double first = std::floor(lo / step + 1e-9), last = std::ceil(hi / step - 1e-9);
    a.lo = first > 0 ? first * step : lo;
    a.hi = last * step;
    if (!(last - first >= 1 && last - first <= 20)) return plain_axis(lo, hi, true);
    for (int i = first > 0 ? 0 : 1; i <= static_cast<int>(last - first); ++i) a.ticks.push_back((first + i) * step);
    for (const double t : a.ticks) a.labels.push_back(tick_text(t, step, t));
    return a;
  }
  // Ticks at m x 10^k for the mantissas that keep about five to eight labels.
  const std::vector<double> mantissas = span < 1      ? std::vector<double>{1, 2, 3, 5}
                                        : span <= 2.5 ? std::vector<double>{1, 2, 5}
                                                      : std::vector<double>{1};
  const int every = span <= 8 ? 1 : static_cast<int>(std::ceil(span / 8));
  const int k0 = static_cast<int>(std::floor(std::log10(lo))) - 1, k1 = static_cast<int>(std::ceil(std::log10(hi))) + 1;
  std::vector<double> all;
  for (int k = k0; k <= k1; ++k)
    if ((k - k0) % every == 0)
      for (const double m : mantissas) all.push_back(m * std::pow(10.0, k));
  std::sort(all.begin(), all.end());
  // The range from the last tick at or below lo to the first at or above hi.
  a.lo = all.front(), a.hi = all.back();
  for (const double t : all) {
    if (t <= lo * (1 + 1e-9)) a.lo = t;
    if (t >= hi * (1 - 1e-9)) {
      a.hi = t;
      break;
    }
  }
  for (const double t : all)
    if (t >= a.lo * (1 - 1e-9) && t <= a.hi * (1 + 1e-9)) a.ticks.push_back(t);
  for (const double t : a.ticks) a.labels.push_back(tick_text(t, t * 0.01, t));
  if (mantissas.size() == 1 && every == 1)
    for (int k = k0; k <= k1; ++k)
      for (int m = 2; m <= 9; ++m) {
        const double t = m * std::pow(10.0, k);
        if (t > a.lo && t < a.hi) a.minor.push_back(t);
      }
  return a;
}

// The plotting area of panel i.
struct Area {
  double left, top, width, height;
  double x(const Axis& a, double v) const { return left + a.fraction(v) * width; }
  double y(const Axis& a, double v) const { return top + (1 - a.fraction(v)) * height; }
};

struct LegendItem {
  double x, y;  // baseline start of the swatch
  int run;
};

std::vector<LegendItem> legend_layout(const Figure& f, int width, int& height) {
  std::vector<LegendItem> items;
  double x = 16, y = 24;
  for (int i = 0; i < static_cast<int>(f.runs.size()); ++i) {
    const double w = 34 + kCharW * static_cast<double>(f.runs[static_cast<std::size_t>(i)].size()) + 28;
    if (x > 16 && x + w > width - 16) x = 16, y += kLegendRow;
    items.push_back({x, y, i});
    x += w;
  }
  height = static_cast<int>(y) + kLegendRow + 14;  // and a line that says what lines and markers are
  return items;
}

// Earlier runs are drawn wider, so that where two runs coincide (the same schedule) the later one,
// drawn over it, leaves the earlier one's edges in sight.
double line_width(int run, std::size_t runs) {
  return runs < 2 ? 1.6
                  : 1.6 + 0.9 * static_cast<double>(runs - 1 - static_cast<std::size_t>(run)) /
                              static_cast<double>(runs - 1);
}

bool shown(const Panel& p, const Point& q) { return !p.y_log || q.y > 0; }

void draw_panel(const Figure& f, const Panel& p, double x0, double y0, Canvas& c) {
  const Area area{x0 + kLeft, y0 + kTop, kPanelW - kLeft - kRight, kPanelH - kTop - kBottom};
  double xmin = std::numeric_limits<double>::infinity(), xmax = -xmin, ymin = xmin, ymax = -xmin;
  for (const Line& l : p.lines)
    for (const Point& q : l.points)
      if (shown(p, q)) {
        xmin = std::min(xmin, q.x), xmax = std::max(xmax, q.x);
        ymin = std::min(ymin, q.y), ymax = std::max(ymax, q.y);
      }
  const bool empty = !(xmin <= xmax);
  const Axis ax = empty ? Axis{} : linear_axis(xmin, xmax, true, false);
  const Axis ay = empty ? Axis{} : p.y_log ? log_axis(ymin, ymax) : linear_axis(ymin, ymax, p.y_from_zero, true);

  c.begin_group(fmt::format(
      "class=\"panel\" data-title=\"{}\" data-left=\"{}\" data-top=\"{}\" data-width=\"{}\" data-height=\"{}\" "
      "data-x-lo=\"{}\" data-x-hi=\"{}\" data-x-log=\"0\" data-x-unit=\"{}\" data-y-lo=\"{}\" data-y-hi=\"{}\" "
      "data-y-log=\"{}\"",
      xml_escape(p.title), area.left, area.top, area.width, area.height, ax.lo, ax.hi, p.x_unit, ay.lo, ay.hi,
      p.y_log ? 1 : 0));
  c.text(area.left, y0 + 22, p.title, {.size = 13, .bold = true});
  if (!p.note.empty() && !empty)
    c.text(area.left + area.width, y0 + 22, p.note, {.size = 11, .anchor = Anchor::End, .colour = kGrey});
  if (!empty) {
    for (const double t : ay.minor)
      c.line(area.left, area.y(ay, t), area.left + area.width, area.y(ay, t), kMinorGrid, 1);
    for (std::size_t i = 0; i < ax.ticks.size(); ++i) {
      const double x = area.x(ax, ax.ticks[i]);
      c.line(x, area.top, x, area.top + area.height, kGrid, 1);
      c.text(x, area.top + area.height + 16, ax.labels[i], {.size = 11, .anchor = Anchor::Middle}, "class=\"tick-x\"");
    }
    for (std::size_t i = 0; i < ay.ticks.size(); ++i) {
      const double y = area.y(ay, ay.ticks[i]);
      c.line(area.left, y, area.left + area.width, y, kGrid, 1);
      c.text(area.left - 6, y + 4, ay.labels[i], {.size = 11, .anchor = Anchor::End}, "class=\"tick-y\"");
    }
  }
  // The frame.
  const double l = area.left, t = area.top, r = area.left + area.width, b = area.top + area.height;
  c.line(l, t, r, t, kFrame, 1), c.line(l, b, r, b, kFrame, 1), c.line(l, t, l, b, kFrame, 1),
      c.line(r, t, r, b, kFrame, 1);
  c.text(l + area.width / 2, b + 38, p.x_label, {.size = 12, .anchor = Anchor::Middle});
  c.text(x0 + 20, t + area.height / 2, p.y_label, {.size = 12, .anchor = Anchor::Middle, .vertical = true});
  if (empty) {
    c.text(l + area.width / 2, t + area.height / 2, p.note.empty() ? "no data" : p.note,
           {.size = 12, .anchor = Anchor::Middle, .colour = kGrey});
    c.end_group();
    return;
  }

  // Lines first, markers over them; later runs over earlier ones.
  for (const bool markers : {false, true})
    for (const Line& line : p.lines) {
      std::vector<Point> px;
      for (const Point& q : line.points)
        if (shown(p, q)) px.push_back({area.x(ax, q.x), area.y(ay, q.y)});
      if (px.empty()) continue;
      const std::string attrs =
          fmt::format("class=\"{}\" data-run=\"{}\" data-series=\"{}\"", markers ? "marker" : "series",
                      xml_escape(f.runs[static_cast<std::size_t>(line.run)]), xml_escape(line.series));
      if (!markers)
        c.polyline(px, run_colour(line.run), line_width(line.run, f.runs.size()), attrs);
      else if (line.markers || px.size() == 1)
        for (const Point& q : px) c.marker(q.x, q.y, 3.5, run_colour(line.run), attrs);
    }
  c.end_group();
}

}  // namespace

double Axis::fraction(double v) const {
  // Halved first: the difference of two values near the largest double would overflow.
  return log ? (std::log(v) - std::log(lo)) / (std::log(hi) - std::log(lo)) : (v / 2 - lo / 2) / (hi / 2 - lo / 2);
}

Colour run_colour(int i) {
  // Tableau's ten categorical colours: distinct on white and for most colour vision.
  static constexpr Colour kColours[] = {{31, 119, 180},  {255, 127, 14}, {44, 160, 44},   {214, 39, 40},
                                        {148, 103, 189}, {140, 86, 75},  {227, 119, 194}, {127, 127, 127},
                                        {188, 189, 34},  {23, 190, 207}};
  return kColours[static_cast<std::size_t>(i) % std::size(kColours)];
}

FigureSize figure_size(const Figure& figure) {
  int legend = 0;
  legend_layout(figure, 2 * kPanelW, legend);
  const int rows = static_cast<int>((figure.panels.size() + 1) / 2);
  return {2 * kPanelW, legend + rows * kPanelH + 8};
}

void draw_figure(const Figure& figure, Canvas& c) {
  const FigureSize size = figure_size(figure);
  c.rect(0, 0, size.width, size.height, Colour{255, 255, 255});
  int legend = 0;
  c.begin_group("class=\"legend\"");
  for (const LegendItem& item : legend_layout(figure, size.width, legend)) {
    const Colour col = run_colour(item.run);
    c.line(item.x, item.y - 4, item.x + 26, item.y - 4, col, line_width(item.run, figure.runs.size()) + 0.5);
    c.marker(item.x + 13, item.y - 4, 3.5, col, "class=\"legend-swatch\"");
    c.text(item.x + 34, item.y, figure.runs[static_cast<std::size_t>(item.run)], {.size = 13});
  }
  c.text(16, legend - 10, "colours: runs;  lines: training records, one per log interval;  dots: validation",
         {.size = 11, .colour = kGrey});
  c.end_group();
  for (std::size_t i = 0; i < figure.panels.size(); ++i)
    draw_panel(figure, figure.panels[i], static_cast<double>(i % 2) * kPanelW,
               legend + static_cast<double>(i / 2) * kPanelH, c);
}

}  // namespace define::cli
