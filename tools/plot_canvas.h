// What `define plot` draws on: a Canvas of lines, circles, rectangles and text in pixel
// coordinates (origin top left, y down). The figure is drawn once (tools/plot_figure.h) onto
// either canvas, so the SVG and the PNG show the same picture:
//   SvgCanvas     writes SVG elements by hand; groups and `attributes` (class, data-*) describe
//                 what each element is, so tests can read the plotted numbers back.
//   RasterCanvas  draws into an RGB image for tools/png_writer.h: geometry 3x supersampled and
//                 averaged down (anti-aliased lines), then text in a built-in 6x13 bitmap font.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "tools/png_writer.h"
#include "tools/run_metrics.h"

namespace define::cli {

struct Colour {
  std::uint8_t r = 0, g = 0, b = 0;
};

enum class Anchor { Start, Middle, End };

struct TextStyle {
  double size = 12;  // px (SVG); the bitmap font has one size
  Anchor anchor = Anchor::Start;
  bool bold = false;
  bool vertical = false;  // turned 90 degrees counter-clockwise about (x, y): reads upwards
  Colour colour{0x22, 0x22, 0x22};
};

class Canvas {
 public:
  virtual ~Canvas() = default;
  // Groups and attributes (e.g. `class="series" data-run="a"`) only mean something in SVG.
  virtual void begin_group(const std::string& attributes) = 0;
  virtual void end_group() = 0;
  virtual void rect(double x, double y, double w, double h, Colour fill) = 0;
  virtual void line(double x1, double y1, double x2, double y2, Colour c, double width) = 0;
  virtual void polyline(const std::vector<Point>& points, Colour c, double width, const std::string& attributes) = 0;
  // A filled disc with a white rim, so that overlapping markers stay apart.
  virtual void marker(double cx, double cy, double r, Colour c, const std::string& attributes) = 0;
  // (x, y) is the start, middle or end of the text's baseline.
  virtual void text(double x, double y, const std::string& s, const TextStyle& style,
                    const std::string& attributes = "") = 0;
};

class SvgCanvas final : public Canvas {
 public:
  SvgCanvas(int width, int height);
  void begin_group(const std::string& attributes) override;
  void end_group() override;
  void rect(double x, double y, double w, double h, Colour fill) override;
  void line(double x1, double y1, double x2, double y2, Colour c, double width) override;
  void polyline(const std::vector<Point>& points, Colour c, double width, const std::string& attributes) override;
  void marker(double cx, double cy, double r, Colour c, const std::string& attributes) override;
  void text(double x, double y, const std::string& s, const TextStyle& style, const std::string& attributes) override;
  std::string finish();  // the whole document

 private:
  std::string out_;
};

// `s` with &, <, > and " escaped for SVG text and attribute values.
std::string xml_escape(const std::string& s);

class RasterCanvas final : public Canvas {
 public:
  RasterCanvas(int width, int height);
  void begin_group(const std::string&) override {}
  void end_group() override {}
  void rect(double x, double y, double w, double h, Colour fill) override;
  void line(double x1, double y1, double x2, double y2, Colour c, double width) override;
  void polyline(const std::vector<Point>& points, Colour c, double width, const std::string& attributes) override;
  void marker(double cx, double cy, double r, Colour c, const std::string& attributes) override;
  void text(double x, double y, const std::string& s, const TextStyle& style, const std::string& attributes) override;
  Image finish();  // averages the geometry down, then draws the text on it

 private:
  struct Text {
    double x, y;
    std::string s;
    TextStyle style;
  };
  void disc(double cx, double cy, double r, Colour c);                                    // supersampled px
  void capsule(double x1, double y1, double x2, double y2, double half_width, Colour c);  // supersampled px
  int width_, height_;
  std::vector<std::uint8_t> fine_;  // (width * kSuper) x (height * kSuper) RGB
  std::vector<Text> texts_;
};

}  // namespace define::cli
