// SvgCanvas: SVG 1.1 written by hand. Coordinates with two decimals (a hundredth of a pixel is
// finer than any screen or the tests' tolerance); text in the sans-serif fonts every viewer has.
#include <fmt/format.h>

#include "tools/plot_canvas.h"

namespace define::cli {
namespace {

std::string rgb(Colour c) { return fmt::format("#{:02x}{:02x}{:02x}", c.r, c.g, c.b); }

}  // namespace

std::string xml_escape(const std::string& s) {
  std::string out;
  for (const char ch : s) {
    switch (ch) {
      case '&':
        out += "&amp;";
        break;
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out += ch;
    }
  }
  return out;
}

SvgCanvas::SvgCanvas(int width, int height) {
  out_ = fmt::format(
      "<?xml version=\"1.0\" encoding=\"UTF-8\"?>\n"
      "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"{0}\" height=\"{1}\" viewBox=\"0 0 {0} {1}\" "
      "font-family=\"DejaVu Sans, Helvetica, Arial, sans-serif\">\n",
      width, height);
}

void SvgCanvas::begin_group(const std::string& attributes) { out_ += fmt::format("<g {}>\n", attributes); }

void SvgCanvas::end_group() { out_ += "</g>\n"; }

void SvgCanvas::rect(double x, double y, double w, double h, Colour fill) {
  out_ += fmt::format("<rect x=\"{:.2f}\" y=\"{:.2f}\" width=\"{:.2f}\" height=\"{:.2f}\" fill=\"{}\"/>\n", x, y, w, h,
                      rgb(fill));
}

void SvgCanvas::line(double x1, double y1, double x2, double y2, Colour c, double width) {
  out_ +=
      fmt::format("<line x1=\"{:.2f}\" y1=\"{:.2f}\" x2=\"{:.2f}\" y2=\"{:.2f}\" stroke=\"{}\" stroke-width=\"{}\"/>\n",
                  x1, y1, x2, y2, rgb(c), width);
}

void SvgCanvas::polyline(const std::vector<Point>& points, Colour c, double width, const std::string& attributes) {
  out_ +=
      fmt::format("<polyline {} fill=\"none\" stroke=\"{}\" stroke-width=\"{}\" stroke-linejoin=\"round\" points=\"",
                  attributes, rgb(c), width);
  for (std::size_t i = 0; i < points.size(); ++i)
    out_ += fmt::format("{}{:.2f},{:.2f}", i ? " " : "", points[i].x, points[i].y);
  out_ += "\"/>\n";
}

void SvgCanvas::marker(double cx, double cy, double r, Colour c, const std::string& attributes) {
  out_ += fmt::format(
      "<circle {} cx=\"{:.2f}\" cy=\"{:.2f}\" r=\"{}\" fill=\"{}\" stroke=\"#ffffff\" stroke-width=\"1\"/>\n",
      attributes, cx, cy, r, rgb(c));
}

void SvgCanvas::text(double x, double y, const std::string& s, const TextStyle& style, const std::string& attributes) {
  const char* anchor = style.anchor == Anchor::Start ? "start" : style.anchor == Anchor::Middle ? "middle" : "end";
  std::string extra = attributes.empty() ? "" : " " + attributes;
  if (style.bold) extra += " font-weight=\"bold\"";
  if (style.vertical) extra += fmt::format(" transform=\"rotate(-90 {:.2f} {:.2f})\"", x, y);
  out_ += fmt::format("<text{} x=\"{:.2f}\" y=\"{:.2f}\" font-size=\"{}\" text-anchor=\"{}\" fill=\"{}\">{}</text>\n",
                      extra, x, y, style.size, anchor, rgb(style.colour), xml_escape(s));
}

std::string SvgCanvas::finish() { return out_ + "</svg>\n"; }

}  // namespace define::cli
