// `define plot`'s figure: panels of line charts in two columns under a legend of the runs, drawn
// onto a Canvas (tools/plot_canvas.h). The axes take their range and ticks from the data; a log axis
// drops the points <= 0 it cannot show.
#pragma once

#include <string>
#include <vector>

#include "tools/plot_canvas.h"
#include "tools/run_metrics.h"

namespace define::cli {

// A number axis: the range [lo, hi] it shows, its labelled ticks and (log axes) unlabelled minor ticks.
struct Axis {
  double lo = 0, hi = 1;
  bool log = false;
  std::vector<double> ticks, minor;
  std::vector<std::string> labels;  // one per tick
  // Where v lies between lo (0) and hi (1); on a log axis v must be > 0.
  double fraction(double v) const;
};

struct Line {
  std::vector<Point> points;  // in the panel's units (x already divided by x_unit)
  int run = 0;                // index into Figure::runs: its colour and legend entry
  bool markers = false;       // validation records: a marker at every point
  std::string series;         // what it is, for the SVG's data-series attribute
};

struct Panel {
  std::string title, x_label, y_label;  // labels say the unit and "log scale" where it is one
  bool y_log = false;
  bool y_from_zero = false;  // a linear y axis that starts at 0 (rates, learning rates)
  double x_unit = 1;         // seconds per x unit for a wall-time axis (60: minutes), 1 otherwise
  std::vector<Line> lines;
  std::string note;  // shown in the panel: why something is missing
};

struct Figure {
  std::vector<std::string> runs;  // legend labels, in colour order
  std::vector<Panel> panels;      // left to right, top to bottom, two a row
};

// The colour of run i (ten distinct ones, then again from the first).
Colour run_colour(int i);

struct FigureSize {
  int width = 0, height = 0;
};
FigureSize figure_size(const Figure& figure);
void draw_figure(const Figure& figure, Canvas& canvas);

}  // namespace define::cli
