// Token-id caches: what a corpus's first load computed (its vocabulary and every split's ids, or a
// parallel corpus's subword ids), kept in one file so later loads read it instead of tokenising
// again: seconds instead of minutes for WikiText-103 or WMT'14, and no text held in memory.
//
// A cache is only used when it provably belongs to its inputs: the file records a key (what was
// computed and how: the vocabulary order or fingerprint, the subword model's fingerprint, max_len)
// and the path, size and modification time of every source file, and it ends with a CRC-32 of all
// its bytes. Anything else (another key, a source file changed, a truncated or altered file) makes
// read_id_cache return nothing, and the caller tokenises and writes a new one. Writes go to a
// temporary file renamed into place, so a killed run never leaves a half-written cache.
//
// Layout: "define-id-cache/1\n", then u64 length + bytes of the key text (key and sources), u64
// length + bytes of a free-form blob (e.g. the vocabulary), u64 array count, u64 length of each
// array, each array's values as little-endian int32, and the u32 CRC-32 of everything before it.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <vector>

namespace define::data {

struct IdCacheContents {
  std::string blob;
  std::vector<std::vector<std::int64_t>> arrays;
};

// The key text of `what` computed from `sources`: `what`, then each source's absolute path, size
// and modification time. Throws naming a source that does not exist.
std::string id_cache_key(const std::string& what, const std::vector<std::filesystem::path>& sources);

// The contents when `file` exists, carries exactly `key`, and its CRC verifies; otherwise nullopt
// (with a note on stderr when the file exists but is damaged, so a rebuilt cache is not a mystery).
// Arrays are read in chunks straight into their int64 vectors: no second copy of the file in memory.
std::optional<IdCacheContents> read_id_cache(const std::filesystem::path& file, const std::string& key);

// Writes the cache atomically. Values must fit in int32 (token ids, offsets and line numbers of a
// corpus do); one that does not is an error naming the array. Returns false (after a note on
// stderr) when the folder cannot be written: a cache is an optimisation, never a reason to stop.
bool write_id_cache(const std::filesystem::path& file, const std::string& key, const std::string& blob,
                    const std::vector<const std::vector<std::int64_t>*>& arrays);

}  // namespace define::data
