#include "data/parallel.h"

#include <string>

#include "core/error.h"
#include "data/text_lines.h"

namespace define::data {

ParallelData load_parallel(const std::filesystem::path& src_file, const std::filesystem::path& tgt_file,
                           const Subword& sw, std::int64_t max_len) {
  constexpr std::string_view who = "load_parallel";
  if (max_len < 0) fail(who, "max_len must be >= 0 (0: no limit), got {}", max_len);
  TextLineReader src_in(src_file, who), tgt_in(tgt_file, who);
  ParallelData data;
  data.pad_id = sw.pad_id();
  data.bos_id = sw.bos_id();
  data.eos_id = sw.eos_id();
  std::string s, t;
  while (true) {
    const bool has_s = src_in.next(s);
    const bool has_t = tgt_in.next(t);
    if (has_s != has_t) {
      const TextLineReader& shorter = has_s ? tgt_in : src_in;
      const TextLineReader& longer = has_s ? src_in : tgt_in;
      fail(who, "'{}' and '{}' are not line-aligned: '{}' ends after line {}, '{}' goes on", src_file.string(),
           tgt_file.string(), shorter.path().string(), shorter.line_number(), longer.path().string());
    }
    if (!has_s) break;
    ++data.lines;
    std::vector<std::int32_t> a = sw.encode(s), b = sw.encode(t);
    if (a.empty() || b.empty()) {
      ++data.skipped_empty;
      continue;
    }
    a.push_back(sw.eos_id());
    b.push_back(sw.eos_id());
    if (max_len > 0 && (static_cast<std::int64_t>(a.size()) > max_len || static_cast<std::int64_t>(b.size()) > max_len)) {
      ++data.skipped_too_long;
      continue;
    }
    data.src.push_back(std::move(a));
    data.tgt.push_back(std::move(b));
    data.line.push_back(data.lines);
  }
  return data;
}

}  // namespace define::data
