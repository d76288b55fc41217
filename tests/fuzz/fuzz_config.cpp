// Fuzz target: the JSON config reader (core/config.h) with `--set key=value` overrides.
//
// Input: JSON text, then NUL-separated overrides ("key=value", as `--set` takes them). The text is
// read as a config file (Config::from_file), every override applied, then the typed getters are
// called on the overrides' keys and on a few real ones, with and without defaults, as the model
// builders do, and the result is checked: require_all_used() and resolved() must work on whatever
// was accepted, and the resolved JSON must read back as a config.
// Expected outcomes and findings: tests/fuzz/fuzz_util.h.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "core/config.h"
#include "fuzz_util.h"

namespace {

using define::Config;
using define::fuzz::expect_define_error;

// Keys the real configs use, so getters meet nested sections, lists and scalars.
const char* const kKeys[] = {"model.type", "model.input.cutoffs", "model.lstm.hidden", "train.lr", "data",
                             "data.bptt", "train.device", "model"};

void read_key(const Config& cfg, const std::string& key) {
  expect_define_error([&] { cfg.get_int(key); });
  expect_define_error([&] { cfg.get_double(key); });
  expect_define_error([&] { cfg.get_bool(key); });
  expect_define_error([&] { cfg.get_string(key); });
  expect_define_error([&] { cfg.get_int_list(key); });
  expect_define_error([&] { cfg.has(key); });
  expect_define_error([&] { cfg.section(key).require_all_used(); });
  expect_define_error([&] { cfg.get_int(key, 3); });
  expect_define_error([&] { cfg.get_double(key, 0.5); });
  expect_define_error([&] { cfg.get_bool(key, true); });
  expect_define_error([&] { cfg.get_string(key, "x"); });
  expect_define_error([&] { cfg.get_int_list(key, {1, 2}); });
  // A getter relative to a section, as models/registry.cpp reads "model.input.dim".
  const std::size_t dot = key.find('.');
  if (dot != std::string::npos)
    expect_define_error([&] { cfg.section(key.substr(0, dot)).get_int(key.substr(dot + 1), 7); });
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::vector<std::string_view> parts = define::fuzz::split(data, size);
  const std::string path = define::fuzz::write_scratch("config.json", parts[0]);
  Config cfg;
  if (!expect_define_error([&] { cfg = Config::from_file(path); })) return 0;
  std::vector<std::string> keys(std::begin(kKeys), std::end(kKeys));
  for (std::size_t i = 1; i < parts.size(); ++i) {
    expect_define_error([&] { cfg.set(parts[i]); });
    keys.emplace_back(parts[i].substr(0, parts[i].find('=')));
  }
  for (const std::string& key : keys) read_key(cfg, key);
  expect_define_error([&] { cfg.require_all_used(); });
  std::string resolved;
  expect_define_error([&] { resolved = cfg.resolved(); });
  // What a run writes as config.json must read back (a resumed run and `define eval` read it).
  if (!resolved.empty())
    define::fuzz::check(expect_define_error([&] { Config::from_text(resolved, "<resolved>"); }),
                        "the resolved config does not read back");
  return 0;
}
