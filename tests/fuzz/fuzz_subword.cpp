// Fuzz target: the SentencePiece model loader (data/subword.h: a run folder's subword.model, read by
// `define train --resume` of a translation run, `define translate`, and every command that loads a
// translation run through train/translation_run.h).
//
// Input: the bytes of a .model file. Loaded from a scratch file named subword.model
// (Subword::load, as a run folder's) and from the bytes (Subword::from_bytes); the two must agree.
// Properties checked on what is accepted: the model keeps the file's bytes exactly, its special ids
// (pad, unk, bos, eos) are pieces of it, every piece has a name, and encoding a few fixed lines
// (ASCII, German, spaces, emptiness, unknown characters) gives ids in range that decode, as do all
// ids of the vocabulary (the first 4,096) and the specials alone.
// Expected outcomes and findings: tests/fuzz/fuzz_util.h.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "data/subword.h"
#include "fuzz_util.h"

namespace {

using define::data::Subword;
using define::fuzz::check;
using define::fuzz::expect_define_error;

constexpr std::string_view kLines[] = {
    "Two young men are playing frisbee in the park.",
    "Zwei junge Männer spielen im Park Frisbee.",
    "  leading, trailing   and  repeated   spaces  ",
    "",
    "\xe2\x80\x83unknown characters: \xe6\xbc\xa2\xe5\xad\x97 \xf0\x9f\x98\x80 \xc2\xa0",
};

void check_model(const Subword& sw, std::string_view bytes) {
  check(sw.bytes() == bytes, "the model does not keep the file's bytes");
  const std::int64_t n = sw.size();
  check(n > 0, "an accepted model has no pieces");
  for (const std::int32_t id : {sw.pad_id(), sw.unk_id(), sw.bos_id(), sw.eos_id()})
    check(id >= 0 && id < n, "a special id is not a piece of the model");
  (void)sw.fingerprint();
  std::vector<std::int32_t> all;
  for (std::int32_t id = 0; id < std::min<std::int64_t>(n, 4096); ++id) {
    all.push_back(id);
    expect_define_error([&] { (void)sw.piece(id); });
  }
  expect_define_error([&] { (void)sw.decode(all); });
  expect_define_error([&] { (void)sw.decode({sw.pad_id(), sw.bos_id(), sw.eos_id()}); });
  for (const std::string_view line : kLines) {
    std::vector<std::int32_t> ids;
    if (!expect_define_error([&] { ids = sw.encode(line); })) continue;
    for (const std::int32_t id : ids) check(id >= 0 && id < n, "encode gave an id outside the vocabulary");
    expect_define_error([&] { (void)sw.decode(ids); });
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  const std::string path = define::fuzz::write_scratch("subword.model", bytes);
  std::optional<Subword> loaded, parsed;
  const bool load_ok = expect_define_error([&] { loaded.emplace(Subword::load(path)); });
  const bool parse_ok = expect_define_error([&] { parsed.emplace(Subword::from_bytes(std::string(bytes), path)); });
  // load refuses an empty file before parsing it; otherwise the file and its bytes are one model.
  if (size > 0) check(load_ok == parse_ok, "Subword::load and Subword::from_bytes disagree on the same bytes");
  if (load_ok) {
    check(parse_ok && loaded->fingerprint() == parsed->fingerprint(),
          "Subword::load and Subword::from_bytes load different models from the same bytes");
    check_model(*loaded, bytes);
  } else if (parse_ok) {
    check_model(*parsed, bytes);
  }
  return 0;
}
