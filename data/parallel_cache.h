// load_parallel through a token-id cache (data/id_cache.h): the subword ids of a parallel corpus
// of WMT'14's size are computed once and read back by later runs instead of encoding every line
// with SentencePiece again. The cache is keyed by the subword model's fingerprint and max_len and
// checked against both files' sizes and modification times.
#pragma once

#include <cstdint>
#include <filesystem>

#include "data/parallel.h"
#include "data/subword.h"

namespace define::data {

struct CachedParallel {
  ParallelData data;
  bool from_cache = false;
};

// As load_parallel; an empty cache_file loads without a cache.
CachedParallel load_parallel_cached(const std::filesystem::path& src_file, const std::filesystem::path& tgt_file,
                                    const Subword& sw, std::int64_t max_len, const std::filesystem::path& cache_file);

}  // namespace define::data
