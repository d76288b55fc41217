#include "data/id_cache.h"

#include <unistd.h>

#include <algorithm>
#include <bit>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <limits>
#include <system_error>

#include <fmt/format.h>
#include <zlib.h>

#include "core/error.h"

namespace define::data {
namespace {

static_assert(std::endian::native == std::endian::little, "the cache stores little-endian int32 as they lie in memory");

constexpr std::string_view kMagic = "define-id-cache/1\n";
constexpr std::size_t kChunk = 1 << 20;  // values per read or write

// Writes bytes through a running CRC.
class CrcWriter {
 public:
  explicit CrcWriter(std::ofstream& out) : out_(out) {}
  void bytes(const void* p, std::size_t n) {
    out_.write(static_cast<const char*>(p), static_cast<std::streamsize>(n));
    crc_ = crc32(crc_, static_cast<const Bytef*>(p), static_cast<uInt>(n));
  }
  void u64(std::uint64_t v) { bytes(&v, sizeof v); }
  std::uint32_t crc() const { return static_cast<std::uint32_t>(crc_); }

 private:
  std::ofstream& out_;
  uLong crc_ = crc32(0L, Z_NULL, 0);
};

// Reads bytes through a running CRC; false once the file ends early.
class CrcReader {
 public:
  explicit CrcReader(std::ifstream& in) : in_(in) {}
  bool bytes(void* p, std::size_t n) {
    in_.read(static_cast<char*>(p), static_cast<std::streamsize>(n));
    if (static_cast<std::size_t>(in_.gcount()) != n) return false;
    crc_ = crc32(crc_, static_cast<const Bytef*>(p), static_cast<uInt>(n));
    return true;
  }
  bool u64(std::uint64_t& v) { return bytes(&v, sizeof v); }
  bool text(std::string& s, std::uint64_t limit) {
    std::uint64_t n = 0;
    if (!u64(n) || n > limit) return false;
    s.resize(n);
    return bytes(s.data(), n);
  }
  std::uint32_t crc() const { return static_cast<std::uint32_t>(crc_); }

 private:
  std::ifstream& in_;
  uLong crc_ = crc32(0L, Z_NULL, 0);
};

}  // namespace

std::string id_cache_key(const std::string& what, const std::vector<std::filesystem::path>& sources) {
  namespace fs = std::filesystem;
  std::string key = what + "\n";
  for (const fs::path& p : sources) {
    std::error_code ec;
    const fs::path abs = fs::absolute(p, ec);
    const auto size = fs::file_size(p, ec);
    if (ec) fail("id cache", "source file '{}' cannot be read ({})", p.string(), ec.message());
    const auto mtime = fs::last_write_time(p, ec);
    if (ec) fail("id cache", "source file '{}' cannot be read ({})", p.string(), ec.message());
    key += fmt::format("{} {} bytes, modified {}\n", abs.string(), size,
                       std::chrono::duration_cast<std::chrono::nanoseconds>(mtime.time_since_epoch()).count());
  }
  return key;
}

std::optional<IdCacheContents> read_id_cache(const std::filesystem::path& file, const std::string& key) {
  std::error_code ec;
  if (!std::filesystem::exists(file, ec)) return std::nullopt;
  const auto file_bytes = std::filesystem::file_size(file, ec);
  std::ifstream in(file, std::ios::binary);
  const auto damaged = [&](const char* why) -> std::optional<IdCacheContents> {
    fmt::print(stderr, "note: the token-id cache {} is {}; tokenising again\n", file.string(), why);
    return std::nullopt;
  };
  if (!in || ec) return damaged("unreadable");
  CrcReader r(in);
  std::string magic(kMagic.size(), '\0');
  if (!r.bytes(magic.data(), magic.size()) || magic != kMagic) return damaged("not a define id cache");
  std::string stored_key;
  if (!r.text(stored_key, file_bytes)) return damaged("truncated");
  // Another key is not damage: the sources or the settings changed, and the cache is rewritten.
  if (stored_key != key) return std::nullopt;
  IdCacheContents c;
  std::uint64_t arrays = 0;
  if (!r.text(c.blob, file_bytes) || !r.u64(arrays) || arrays > 64) return damaged("truncated");
  std::vector<std::uint64_t> lengths(arrays);
  std::uint64_t total = 0;
  for (auto& n : lengths) {
    if (!r.u64(n) || n > file_bytes / 4) return damaged("truncated");
    total += n;
  }
  if (total > file_bytes / 4) return damaged("truncated");
  c.arrays.resize(arrays);
  std::vector<std::int32_t> chunk(kChunk);
  for (std::size_t a = 0; a < arrays; ++a) {
    std::vector<std::int64_t>& out = c.arrays[a];
    out.reserve(lengths[a]);
    for (std::uint64_t done = 0; done < lengths[a];) {
      const std::size_t n = static_cast<std::size_t>(std::min<std::uint64_t>(kChunk, lengths[a] - done));
      if (!r.bytes(chunk.data(), n * sizeof(std::int32_t))) return damaged("truncated");
      out.insert(out.end(), chunk.begin(), chunk.begin() + static_cast<std::ptrdiff_t>(n));
      done += n;
    }
  }
  const std::uint32_t computed = r.crc();
  std::uint32_t stored = 0;
  in.read(reinterpret_cast<char*>(&stored), sizeof stored);
  if (in.gcount() != sizeof stored) return damaged("truncated");
  if (stored != computed) return damaged("damaged (CRC-32 mismatch)");
  if (in.peek() != std::char_traits<char>::eof()) return damaged("longer than its contents");
  return c;
}

bool write_id_cache(const std::filesystem::path& file, const std::string& key, const std::string& blob,
                    const std::vector<const std::vector<std::int64_t>*>& arrays) {
  namespace fs = std::filesystem;
  for (std::size_t a = 0; a < arrays.size(); ++a)
    for (std::int64_t v : *arrays[a])
      if (v < std::numeric_limits<std::int32_t>::min() || v > std::numeric_limits<std::int32_t>::max())
        fail("id cache", "array {} of {} holds {}, outside the int32 range of the cache", a, file.string(), v);
  std::error_code ec;
  fs::create_directories(file.parent_path(), ec);
  const fs::path tmp = file.parent_path() / fmt::format(".{}.tmp.{}", file.filename().string(), ::getpid());
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    if (out) {
      CrcWriter w(out);
      w.bytes(kMagic.data(), kMagic.size());
      w.u64(key.size());
      w.bytes(key.data(), key.size());
      w.u64(blob.size());
      w.bytes(blob.data(), blob.size());
      w.u64(arrays.size());
      for (const auto* a : arrays) w.u64(a->size());
      std::vector<std::int32_t> chunk;
      chunk.reserve(kChunk);
      for (const auto* a : arrays)
        for (std::size_t i = 0; i < a->size(); i += kChunk) {
          const std::size_t n = std::min(kChunk, a->size() - i);
          chunk.assign(a->begin() + static_cast<std::ptrdiff_t>(i), a->begin() + static_cast<std::ptrdiff_t>(i + n));
          w.bytes(chunk.data(), n * sizeof(std::int32_t));
        }
      const std::uint32_t crc = w.crc();
      out.write(reinterpret_cast<const char*>(&crc), sizeof crc);
      out.flush();
    }
    if (!out) {
      out.close();
      fs::remove(tmp, ec);
      fmt::print(stderr, "note: could not write the token-id cache {} (later loads tokenise again)\n", file.string());
      return false;
    }
  }
  fs::rename(tmp, file, ec);
  if (ec) {
    fs::remove(tmp, ec);
    fmt::print(stderr, "note: could not write the token-id cache {} (later loads tokenise again)\n", file.string());
    return false;
  }
  return true;
}

}  // namespace define::data
