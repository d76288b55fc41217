// `define plot`: the training curves of one or more runs as one figure (SVG or PNG). Split from the
// command (tools/plot.cpp) so that tests check what is drawn against the logs.
#pragma once

#include <string>
#include <vector>

#include "tools/plot_figure.h"
#include "tools/png_writer.h"
#include "tools/run_metrics.h"

namespace define::cli {

// The panels of `define plot` for these runs (colours in their order): training loss and validation
// perplexity against steps and against wall time, learning rate, tokens/s, and the gradient norm of
// all parameters and of each parameter part.
Figure training_figure(const std::vector<RunMetrics>& runs);

std::string render_svg(const Figure& figure);
Image render_png(const Figure& figure);

}  // namespace define::cli
