#include "tools/png_writer.h"

#include <png.h>

#include <cstring>
#include <limits>

#include "core/atomic_file.h"
#include "core/error.h"
#include "nn/safetensors.h"

namespace define::cli {

void write_png(const std::string& path, const Image& image) {
  const char* op = "write_png";
  if (image.channels != 1 && image.channels != 3)
    fail(op, "{}: {} channels per pixel; expected 1 (gray) or 3 (RGB)", path, image.channels);
  constexpr std::int64_t kMaxSide = std::numeric_limits<png_int_32>::max() / 3;
  if (image.width < 1 || image.height < 1 || image.width > kMaxSide || image.height > kMaxSide)
    fail(op, "{}: image size {}x{} is out of range", path, image.width, image.height);
  const std::int64_t bytes = image.width * image.height * image.channels;
  if (static_cast<std::int64_t>(image.pixels.size()) != bytes)
    fail(op, "{}: {} pixel bytes for a {}x{}x{} image (expected {})", path, image.pixels.size(), image.width,
         image.height, image.channels, bytes);

  png_image png;
  std::memset(&png, 0, sizeof png);
  png.version = PNG_IMAGE_VERSION;
  png.width = static_cast<png_uint_32>(image.width);
  png.height = static_cast<png_uint_32>(image.height);
  png.format = image.channels == 1 ? PNG_FORMAT_GRAY : PNG_FORMAT_RGB;
  const auto stride = static_cast<png_int_32>(image.width * image.channels);
  // First call: the encoded size; second: the encoding.
  png_alloc_size_t size = 0;
  if (!png_image_write_to_memory(&png, nullptr, &size, 0, image.pixels.data(), stride, nullptr))
    fail(op, "{}: libpng could not encode the image: {}", path, png.message);
  std::string encoded(size, '\0');
  if (!png_image_write_to_memory(&png, encoded.data(), &size, 0, image.pixels.data(), stride, nullptr))
    fail(op, "{}: libpng could not encode the image: {}", path, png.message);
  encoded.resize(size);
  png_image_free(&png);
  write_file_atomically(path, encoded);
}

}  // namespace define::cli
