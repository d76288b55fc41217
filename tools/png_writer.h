// PNG files of 8-bit images (grayscale or RGB) through libpng's simplified API (png_image_*, libpng
// >= 1.6), which reports errors through return values instead of longjmp, so C++ destructors run
// normally. Used by `define corrmap`.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace define::cli {

struct Image {
  std::int64_t width = 0;
  std::int64_t height = 0;
  int channels = 1;                  // 1: gray, 3: RGB (interleaved)
  std::vector<std::uint8_t> pixels;  // row-major, height * width * channels bytes
};

// Encodes in memory and writes the file atomically (write_file_atomically). Throws naming the
// path on a malformed image (sizes, channel count) or an encoder / I/O failure.
void write_png(const std::string& path, const Image& image);

}  // namespace define::cli
