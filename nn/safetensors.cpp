#include "nn/safetensors.h"

#include <bit>
#include <cerrno>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>
#include <string_view>
#include <algorithm>

#include <fcntl.h>
#include <unistd.h>
#include <zlib.h>

#include <nlohmann/json.hpp>

#include "core/atomic_file.h"
#include "core/error.h"
#include "core/factory.h"
#include "kernels/copy.h"

namespace define::nn {
namespace {

static_assert(std::endian::native == std::endian::little, "safetensors I/O assumes a little-endian host");

using Json = nlohmann::json;
constexpr const char* kCrcKey = "define.crc32";
constexpr const char* kCrcPlaceholder = "00000000";

const char* safetensors_dtype(DType t) {
  switch (t) {
    case DType::Float32: return "F32";
    case DType::Float64: return "F64";
    case DType::Int32: return "I32";
    case DType::Int64: return "I64";
    case DType::Float16: return "F16";
    case DType::BFloat16: return "BF16";
  }
  return "?";
}

bool parse_safetensors_dtype(const std::string& s, DType& out) {
  static const std::pair<const char*, DType> table[] = {{"F32", DType::Float32}, {"F64", DType::Float64},
                                                        {"I32", DType::Int32},   {"I64", DType::Int64},
                                                        {"F16", DType::Float16}, {"BF16", DType::BFloat16}};
  for (const auto& [name, t] : table)
    if (s == name) {
      out = t;
      return true;
    }
  return false;
}

std::uint32_t crc32_of(const std::string& bytes) {
  uLong crc = crc32(0L, Z_NULL, 0);
  // zlib takes uInt lengths: feed large buffers in pieces.
  const std::size_t chunk = 1u << 30;
  for (std::size_t pos = 0; pos < bytes.size(); pos += chunk) {
    const std::size_t n = std::min(chunk, bytes.size() - pos);
    crc = crc32(crc, reinterpret_cast<const Bytef*>(bytes.data() + pos), static_cast<uInt>(n));
  }
  return static_cast<std::uint32_t>(crc);
}

// Position of the CRC's 8 hex digits in the serialized header, or npos.
std::size_t crc_digits_position(const std::string& header_text, const std::string& digits) {
  const std::string needle = fmt::format("\"{}\":\"{}\"", kCrcKey, digits);
  const std::size_t at = header_text.find(needle);
  return at == std::string::npos ? at : at + needle.size() - 1 - digits.size();
}

// Overwrites s[pos, pos + with.size()) in place (the checksum digits).
void overwrite(std::string& s, std::size_t pos, std::string_view with) {
  std::copy(with.begin(), with.end(), s.begin() + static_cast<std::ptrdiff_t>(pos));
}

void put_u64(std::string& out, std::uint64_t v) {
  char b[8];
  std::memcpy(b, &v, 8);
  out.append(b, 8);
}

}  // namespace

void save_safetensors(const std::string& path, const NamedTensors& tensors, const Metadata& metadata) {
  const char* op = "save_safetensors";
  Json header = Json::object();
  Json meta = Json::object();
  for (const auto& [k, v] : metadata) {
    if (k == kCrcKey) fail(op, "metadata key '{}' is reserved", k);
    meta[k] = v;
  }
  meta[kCrcKey] = kCrcPlaceholder;
  header["__metadata__"] = meta;

  std::set<std::string> seen;
  std::vector<Tensor> host;
  std::uint64_t offset = 0;
  for (const auto& [name, t] : tensors) {
    if (name.empty() || name == "__metadata__") fail(op, "invalid tensor name '{}' for '{}'", name, path);
    if (!seen.insert(name).second) fail(op, "duplicate tensor name '{}' for '{}'", name, path);
    if (!t.defined()) fail(op, "tensor '{}' is undefined", name);
    Tensor c = kernels::contiguous(t.device().is_cpu() ? t : copy_to_device(t, Device::cpu()));
    const std::uint64_t nbytes = static_cast<std::uint64_t>(c.numel()) * dtype_size(c.dtype());
    header[name] = {{"dtype", safetensors_dtype(c.dtype())},
                    {"shape", c.shape()},
                    {"data_offsets", {offset, offset + nbytes}}};
    offset += nbytes;
    host.push_back(std::move(c));
  }
  std::string header_text;
  try {
    header_text = header.dump();
  } catch (const Json::type_error& e) {
    // The header is JSON, which must be UTF-8: e.g. a vocabulary (`define export` stores it as
    // metadata) read from a corpus in another encoding.
    fail(op, "cannot write '{}': a tensor name or metadata value is not valid UTF-8 ({})", path, e.what());
  }
  header_text.append((8 - header_text.size() % 8) % 8, ' ');

  std::string bytes;
  bytes.reserve(8 + header_text.size() + offset);
  put_u64(bytes, header_text.size());
  bytes += header_text;
  for (const Tensor& c : host)
    bytes.append(static_cast<const char*>(c.raw_data()), static_cast<std::size_t>(c.numel()) * dtype_size(c.dtype()));

  const std::size_t digits = 8 + crc_digits_position(header_text, kCrcPlaceholder);
  const std::string crc = fmt::format("{:08x}", crc32_of(bytes));
  overwrite(bytes, digits, crc);
  define::write_file_atomically(path, bytes);
}

SafetensorsContents load_safetensors(const std::string& path) {
  const char* op = "load_safetensors";
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(op, "cannot open '{}'", path);
  std::stringstream ss;
  ss << in.rdbuf();
  std::string bytes = ss.str();

  if (bytes.size() < 8) fail(op, "'{}' is truncated or not a safetensors file ({} bytes)", path, bytes.size());
  std::uint64_t header_len = 0;
  std::memcpy(&header_len, bytes.data(), 8);
  if (header_len > bytes.size() - 8)
    fail(op, "'{}' is truncated or not a safetensors file: header of {} bytes, file of {}", path, header_len, bytes.size());
  const std::string header_text = bytes.substr(8, header_len);
  Json header;
  try {
    header = Json::parse(header_text);
  } catch (const Json::exception& e) {  // a syntax error, or e.g. a number too large for a double
    fail(op, "'{}' has a corrupt header ({})", path, e.what());
  }
  if (!header.is_object()) fail(op, "'{}' has a corrupt header (not a JSON object)", path);

  SafetensorsContents out;
  if (header.contains("__metadata__")) {
    const Json& meta = header["__metadata__"];
    if (!meta.is_object()) fail(op, "'{}': __metadata__ is not an object", path);
    for (const auto& [k, v] : meta.items()) {
      if (!v.is_string()) fail(op, "'{}': metadata value of '{}' is not a string", path, k);
      out.metadata[k] = v.get<std::string>();
    }
  }
  // Integrity first: a flipped byte anywhere is reported as such, not as whatever it broke.
  if (auto it = out.metadata.find(kCrcKey); it != out.metadata.end()) {
    const std::string stored = it->second;
    const std::size_t pos = crc_digits_position(header_text, stored);
    if (stored.size() != 8 || pos == std::string::npos) fail(op, "'{}' has a malformed checksum field", path);
    std::string zeroed = bytes;
    overwrite(zeroed, 8 + pos, kCrcPlaceholder);
    const std::string actual = fmt::format("{:08x}", crc32_of(zeroed));
    if (actual != stored)
      fail(op, "'{}' is corrupt: CRC-32 {} does not match the stored {} (truncated or altered file)", path, actual,
           stored);
    out.metadata.erase(it);
  }

  const std::uint64_t data_size = bytes.size() - 8 - header_len;
  struct Entry {
    std::string name;
    DType dtype;
    Shape shape;
    std::uint64_t begin, end;
  };
  std::vector<Entry> entries;
  for (const auto& [name, info] : header.items()) {
    if (name == "__metadata__") continue;
    if (!info.is_object() || !info.contains("dtype") || !info.contains("shape") || !info.contains("data_offsets"))
      fail(op, "'{}': entry '{}' lacks dtype, shape or data_offsets", path, name);
    Entry e{name, DType::Float32, {}, 0, 0};
    if (!info["dtype"].is_string() || !parse_safetensors_dtype(info["dtype"].get<std::string>(), e.dtype))
      fail(op, "'{}': tensor '{}' has an unsupported dtype {}", path, name, info["dtype"].dump());
    // Integers only, checked before converting: nlohmann would turn 1.5 into 1, and a number out
    // of the target type's range into undefined behaviour.
    const Json& shape = info["shape"];
    const Json& offsets = info["data_offsets"];
    if (!shape.is_array() || !offsets.is_array() || offsets.size() != 2 || !offsets[0].is_number_unsigned() ||
        !offsets[1].is_number_unsigned())
      fail(op, "'{}': tensor '{}' has a malformed shape or data_offsets", path, name);
    e.begin = offsets[0].get<std::uint64_t>();
    e.end = offsets[1].get<std::uint64_t>();
    // The product of the dimensions, zeros counted as ones, times the element size must fit in
    // int64: the tensor's strides and byte size are such products (a zero would otherwise make the
    // byte count 0 whatever the other dimensions are, and the byte count could wrap around).
    std::uint64_t numel = 1, extent = 1;
    for (const Json& d : shape) {
      if (!d.is_number_integer()) fail(op, "'{}': tensor '{}' has a malformed shape or data_offsets", path, name);
      if (!d.is_number_unsigned() && d.get<std::int64_t>() < 0)
        fail(op, "'{}': tensor '{}' has a negative dimension", path, name);
      const std::uint64_t n = d.is_number_unsigned() ? d.get<std::uint64_t>() : 0;
      if (n > 1 && extent > static_cast<std::uint64_t>(INT64_MAX) / dtype_size(e.dtype) / n)
        fail(op, "'{}': tensor '{}' has a shape {} too large for a tensor", path, name, shape.dump());
      extent *= std::max<std::uint64_t>(n, 1);
      numel *= n;
      e.shape.push_back(static_cast<std::int64_t>(n));
    }
    if (e.end < e.begin || e.end > data_size)
      fail(op, "'{}' is truncated or corrupt: tensor '{}' spans bytes [{}, {}) of a {}-byte data section", path,
           name, e.begin, e.end, data_size);
    if (e.end - e.begin != numel * dtype_size(e.dtype))
      fail(op, "'{}': tensor '{}' has {} bytes but its shape needs {}", path, name, e.end - e.begin,
           numel * dtype_size(e.dtype));
    entries.push_back(std::move(e));
  }
  // The format promises a gap-free data section; check it (this also catches overlaps).
  std::vector<std::pair<std::uint64_t, std::uint64_t>> spans;
  for (const Entry& e : entries) spans.emplace_back(e.begin, e.end);
  std::sort(spans.begin(), spans.end());
  std::uint64_t expect = 0;
  for (const auto& [b, e] : spans) {
    if (b != expect) fail(op, "'{}' is corrupt: tensor data overlaps or leaves a gap at byte {}", path, expect);
    expect = e;
  }
  if (expect != data_size)
    fail(op, "'{}' is corrupt: {} bytes of data follow the last tensor", path, data_size - expect);

  // File order = data order.
  std::sort(entries.begin(), entries.end(), [](const Entry& a, const Entry& b) { return a.begin < b.begin; });
  const char* data = bytes.data() + 8 + header_len;
  for (const Entry& e : entries) {
    Tensor t = empty(e.shape, {.dtype = e.dtype});
    if (e.end > e.begin) std::memcpy(t.raw_data(), data + e.begin, e.end - e.begin);
    out.tensors.emplace_back(e.name, std::move(t));
  }
  return out;
}

}  // namespace define::nn
