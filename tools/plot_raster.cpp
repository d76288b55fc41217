// RasterCanvas: a small rasteriser for `define plot`'s PNG. Lines are capsules (every pixel within
// half the width of the segment) and markers discs, drawn without blending at 3x the resolution and
// averaged down, which anti-aliases their edges at no further cost. Text is drawn afterwards at the
// final resolution in the 6x13 bitmap font (tools/plot_font.h), so it stays crisp; it may cover
// lines, which is why the figure keeps text outside the plotting areas.
#include <algorithm>
#include <cmath>

#include "tools/plot_canvas.h"
#include "tools/plot_font.h"

namespace define::cli {
namespace {

constexpr int kSuper = 3;

}  // namespace

RasterCanvas::RasterCanvas(int width, int height)
    : width_(width),
      height_(height),
      fine_(static_cast<std::size_t>(width) * kSuper * static_cast<std::size_t>(height) * kSuper * 3, 255) {}

void RasterCanvas::rect(double x, double y, double w, double h, Colour fill) {
  const int fw = width_ * kSuper, fh = height_ * kSuper;
  const int x0 = std::clamp(static_cast<int>(std::lround(x * kSuper)), 0, fw);
  const int x1 = std::clamp(static_cast<int>(std::lround((x + w) * kSuper)), 0, fw);
  const int y0 = std::clamp(static_cast<int>(std::lround(y * kSuper)), 0, fh);
  const int y1 = std::clamp(static_cast<int>(std::lround((y + h) * kSuper)), 0, fh);
  for (int py = y0; py < y1; ++py)
    for (int px = x0; px < x1; ++px) {
      std::uint8_t* p = &fine_[(static_cast<std::size_t>(py) * fw + px) * 3];
      p[0] = fill.r, p[1] = fill.g, p[2] = fill.b;
    }
}

void RasterCanvas::capsule(double x1, double y1, double x2, double y2, double hw, Colour c) {
  if (!std::isfinite(x1) || !std::isfinite(y1) || !std::isfinite(x2) || !std::isfinite(y2)) return;
  const int fw = width_ * kSuper, fh = height_ * kSuper;
  // The bounding box, clamped to the image before it becomes an int.
  auto px = [](double v, int n) { return static_cast<int>(std::clamp(v, -1.0, static_cast<double>(n))); };
  const int bx0 = std::max(0, px(std::floor(std::min(x1, x2) - hw), fw));
  const int bx1 = std::min(fw - 1, px(std::ceil(std::max(x1, x2) + hw), fw));
  const int by0 = std::max(0, px(std::floor(std::min(y1, y2) - hw), fh));
  const int by1 = std::min(fh - 1, px(std::ceil(std::max(y1, y2) + hw), fh));
  const double dx = x2 - x1, dy = y2 - y1, len2 = dx * dx + dy * dy;
  for (int py = by0; py <= by1; ++py)
    for (int px = bx0; px <= bx1; ++px) {
      // Distance from the pixel's centre to the nearest point of the segment.
      const double cx = px + 0.5 - x1, cy = py + 0.5 - y1;
      const double t = len2 > 0 ? std::clamp((cx * dx + cy * dy) / len2, 0.0, 1.0) : 0.0;
      const double ex = cx - t * dx, ey = cy - t * dy;
      if (ex * ex + ey * ey > hw * hw) continue;
      std::uint8_t* p = &fine_[(static_cast<std::size_t>(py) * fw + px) * 3];
      p[0] = c.r, p[1] = c.g, p[2] = c.b;
    }
}

void RasterCanvas::disc(double cx, double cy, double r, Colour c) { capsule(cx, cy, cx, cy, r, c); }

void RasterCanvas::line(double x1, double y1, double x2, double y2, Colour c, double width) {
  capsule(x1 * kSuper, y1 * kSuper, x2 * kSuper, y2 * kSuper, std::max(width, 0.5) * kSuper / 2, c);
}

void RasterCanvas::polyline(const std::vector<Point>& points, Colour c, double width, const std::string&) {
  if (points.size() == 1) line(points[0].x, points[0].y, points[0].x, points[0].y, c, width);
  for (std::size_t i = 1; i < points.size(); ++i)
    line(points[i - 1].x, points[i - 1].y, points[i].x, points[i].y, c, width);
}

void RasterCanvas::marker(double cx, double cy, double r, Colour c, const std::string&) {
  disc(cx * kSuper, cy * kSuper, (r + 1) * kSuper, Colour{255, 255, 255});
  disc(cx * kSuper, cy * kSuper, r * kSuper, c);
}

void RasterCanvas::text(double x, double y, const std::string& s, const TextStyle& style, const std::string&) {
  texts_.push_back({x, y, s, style});
}

Image RasterCanvas::finish() {
  Image img;
  img.width = width_;
  img.height = height_;
  img.channels = 3;
  img.pixels.resize(static_cast<std::size_t>(width_) * height_ * 3);
  const std::size_t fw = static_cast<std::size_t>(width_) * kSuper;
  for (int y = 0; y < height_; ++y)
    for (int x = 0; x < width_; ++x)
      for (int ch = 0; ch < 3; ++ch) {
        int sum = 0;
        for (int sy = 0; sy < kSuper; ++sy)
          for (int sx = 0; sx < kSuper; ++sx)
            sum +=
                fine_[((static_cast<std::size_t>(y) * kSuper + sy) * fw + static_cast<std::size_t>(x) * kSuper + sx) *
                          3 +
                      ch];
        img.pixels[(static_cast<std::size_t>(y) * width_ + x) * 3 + ch] =
            static_cast<std::uint8_t>((sum + kSuper * kSuper / 2) / (kSuper * kSuper));
      }

  auto put = [&](int px, int py, Colour c) {
    if (px < 0 || py < 0 || px >= width_ || py >= height_) return;
    std::uint8_t* p = &img.pixels[(static_cast<std::size_t>(py) * width_ + px) * 3];
    p[0] = c.r, p[1] = c.g, p[2] = c.b;
  };
  for (const Text& t : texts_) {
    if (!(std::abs(t.x) < 1e6 && std::abs(t.y) < 1e6)) continue;  // off any image (a NaN position too)
    // One glyph per byte: the bytes of a UTF-8 sequence become one '?'.
    std::string shown;
    for (const char ch : t.s) {
      const auto u = static_cast<unsigned char>(ch);
      if (u >= 0x80 && u < 0xC0) continue;
      shown += u >= 32 && u < 127 ? ch : '?';
    }
    const int len = static_cast<int>(shown.size()) * kGlyphWidth;
    const int shift = t.style.anchor == Anchor::Start ? 0 : t.style.anchor == Anchor::Middle ? len / 2 : len;
    const int x0 = static_cast<int>(std::lround(t.x)), y0 = static_cast<int>(std::lround(t.y));
    for (std::size_t i = 0; i < shown.size(); ++i)
      for (int gy = 0; gy < kGlyphHeight; ++gy)
        for (int gx = 0; gx < kGlyphWidth; ++gx) {
          if (!((kFont6x13[shown[i] - 32][gy] >> (kGlyphWidth - 1 - gx)) & 1)) continue;
          const int along = static_cast<int>(i) * kGlyphWidth + gx - shift, across = gy - kGlyphAscent;
          for (int b = 0; b <= (t.style.bold ? 1 : 0); ++b) {  // bold: the glyph twice, a pixel apart
            if (t.style.vertical)
              put(x0 + across, y0 - along - b, t.style.colour);
            else
              put(x0 + along + b, y0 + across, t.style.colour);
          }
        }
  }
  return img;
}

}  // namespace define::cli
