#include "data/parallel_cache.h"

#include <sstream>
#include <string>
#include <vector>

#include "core/error.h"
#include "data/id_cache.h"

namespace define::data {
namespace {

// Sentences as one id array and an offsets array (sentence i is ids[offsets[i], offsets[i + 1])).
void flatten(const std::vector<std::vector<std::int32_t>>& sentences, std::vector<std::int64_t>& offsets,
             std::vector<std::int64_t>& ids) {
  offsets.assign(1, 0);
  for (const auto& s : sentences) {
    ids.insert(ids.end(), s.begin(), s.end());
    offsets.push_back(static_cast<std::int64_t>(ids.size()));
  }
}

// The inverse; false when the offsets do not describe `ids`.
bool unflatten(const std::vector<std::int64_t>& offsets, const std::vector<std::int64_t>& ids, std::int64_t vocab,
               std::vector<std::vector<std::int32_t>>& out) {
  if (offsets.empty() || offsets.front() != 0 || offsets.back() != static_cast<std::int64_t>(ids.size())) return false;
  out.resize(offsets.size() - 1);
  for (std::size_t i = 0; i + 1 < offsets.size(); ++i) {
    if (offsets[i + 1] < offsets[i]) return false;
    out[i].reserve(static_cast<std::size_t>(offsets[i + 1] - offsets[i]));
    for (std::int64_t k = offsets[i]; k < offsets[i + 1]; ++k) {
      const std::int64_t id = ids[static_cast<std::size_t>(k)];
      if (id < 0 || id >= vocab) return false;
      out[i].push_back(static_cast<std::int32_t>(id));
    }
  }
  return true;
}

}  // namespace

CachedParallel load_parallel_cached(const std::filesystem::path& src_file, const std::filesystem::path& tgt_file,
                                    const Subword& sw, std::int64_t max_len, const std::filesystem::path& cache_file) {
  if (cache_file.empty()) return {load_parallel(src_file, tgt_file, sw, max_len), false};
  // load_parallel's own checks (missing files, max_len) come first, through the key's file sizes.
  if (max_len < 0) return {load_parallel(src_file, tgt_file, sw, max_len), false};
  std::error_code ec;
  if (!std::filesystem::exists(src_file, ec) || !std::filesystem::exists(tgt_file, ec))
    return {load_parallel(src_file, tgt_file, sw, max_len), false};
  const std::string key =
      id_cache_key("parallel corpus, subword model " + sw.fingerprint() + ", max_len " + std::to_string(max_len),
                   {src_file, tgt_file});
  if (auto cached = read_id_cache(cache_file, key); cached && cached->arrays.size() == 5) {
    CachedParallel out;
    ParallelData& d = out.data;
    std::istringstream blob(cached->blob);
    blob >> d.lines >> d.skipped_too_long >> d.skipped_empty >> d.pad_id >> d.bos_id >> d.eos_id;
    auto& a = cached->arrays;
    if (blob && unflatten(a[0], a[1], sw.size(), d.src) && unflatten(a[2], a[3], sw.size(), d.tgt) &&
        d.src.size() == d.tgt.size() && a[4].size() == d.src.size()) {
      d.line = std::move(a[4]);
      out.from_cache = true;
      return out;
    }
    fail("parallel cache",
         "the token-id cache {} passed its CRC but does not describe a parallel corpus of {} "
         "subwords; delete it",
         cache_file.string(), sw.size());
  }
  CachedParallel out{load_parallel(src_file, tgt_file, sw, max_len), false};
  const ParallelData& d = out.data;
  std::vector<std::int64_t> src_offsets, src_ids, tgt_offsets, tgt_ids;
  flatten(d.src, src_offsets, src_ids);
  flatten(d.tgt, tgt_offsets, tgt_ids);
  const std::string blob = std::to_string(d.lines) + " " + std::to_string(d.skipped_too_long) + " " +
                           std::to_string(d.skipped_empty) + " " + std::to_string(d.pad_id) + " " +
                           std::to_string(d.bos_id) + " " + std::to_string(d.eos_id);
  write_id_cache(cache_file, key, blob, {&src_offsets, &src_ids, &tgt_offsets, &tgt_ids, &d.line});
  return out;
}

}  // namespace define::data
