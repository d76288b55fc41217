// Line-aligned parallel text for machine translation: line i of the source file translates to
// line i of the target file (Multi30k's train.de / train.en, WMT's train.en / train.de).
//
// Both sides are encoded with one subword model (data/subword.h) and end with eos. Pairs that
// cannot train a model are skipped and counted, never dropped silently: either side empty (a blank
// or all-space line encodes to nothing) or, with max_len > 0, either side longer than max_len
// tokens, eos included (fairseq's --max-source-positions / --skip-invalid-size-inputs-valid-test).
// `line` keeps the line number of every kept pair, so translations of an evaluation split can be
// matched with their reference lines even when some pairs were skipped.
#pragma once

#include <cstdint>
#include <filesystem>
#include <vector>

#include "data/subword.h"

namespace define::data {

struct ParallelData {
  std::vector<std::vector<std::int32_t>> src, tgt;  // pieces + eos, one entry per kept pair
  std::vector<std::int64_t> line;                   // 1-based line number of each kept pair
  std::int64_t skipped_too_long = 0, skipped_empty = 0;
  std::int64_t lines = 0;  // line pairs read (kept + skipped)
  // The subword model's special ids, for the batches (data/token_batches.h).
  std::int32_t pad_id = 0, bos_id = 2, eos_id = 3;

  std::int64_t size() const { return static_cast<std::int64_t>(src.size()); }
};

// Reads src_file and tgt_file line by line (data/text_lines.h: '\n' ends a line, a trailing '\r'
// is dropped, the last line needs no '\n') and encodes both sides with `sw`. Refuses a missing or
// empty file (naming it), invalid UTF-8 (file:line), files of different lengths (naming both files
// and the line where the shorter one ends) and max_len < 0. max_len 0 means no limit.
ParallelData load_parallel(const std::filesystem::path& src_file, const std::filesystem::path& tgt_file,
                           const Subword& sw, std::int64_t max_len);

}  // namespace define::data
