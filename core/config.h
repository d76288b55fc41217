// Config: a run's settings, read from a JSON file (configs/*.json) and `--set key=value` overrides,
// and read back by typed getters with dotted keys ("model.lstm.hidden").
//
// Why key consumption is tracked: the code that builds a model or a run is the only place that
// knows which keys exist, so instead of a second hand-written schema that drifts, every getter
// marks its key as used, and after everything is built require_all_used() reports any key nobody
// read ("unknown config key 'model.lstm.hiden'"). Getters given a default record the value they
// used, so resolved() is the complete configuration a run actually ran with.
//
// Errors (define::Error) name the key and the source: a missing file, a JSON syntax error with
// line and column, a wrong type ("config key 'train.lr' in a.json: expected a number, got the
// string \"fast\""), a missing required key, an unknown key.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

namespace define {

class Config {
 public:
  Config();  // empty: every getter returns its default
  static Config from_file(const std::string& path);
  // `source` names the text in errors (a file name, "--set", "<test>").
  static Config from_text(std::string_view json_text, std::string source);

  // Applies "dotted.key=value". The value is read as JSON when it parses (numbers, true/false,
  // lists, quoted strings), else taken as a plain string. New keys may be created; a typo is then
  // caught by require_all_used().
  void set(std::string_view assignment);

  // A view of the object at `key` (dotted, relative to this view); getters on it take keys
  // relative to it. Shares the usage record with its parent. A missing key gives an empty view.
  Config section(std::string_view key) const;
  // Whether the key exists (does not mark it used).
  bool has(std::string_view key) const;
  // The full dotted path of a key of this view (for messages).
  std::string path(std::string_view key) const;

  // Required keys: throw naming the key when it is missing or of the wrong type.
  std::int64_t get_int(std::string_view key) const;
  double get_double(std::string_view key) const;
  bool get_bool(std::string_view key) const;
  std::string get_string(std::string_view key) const;
  std::vector<std::int64_t> get_int_list(std::string_view key) const;
  // With defaults (recorded in resolved()).
  std::int64_t get_int(std::string_view key, std::int64_t fallback) const;
  double get_double(std::string_view key, double fallback) const;
  bool get_bool(std::string_view key, bool fallback) const;
  std::string get_string(std::string_view key, std::string_view fallback) const;
  std::vector<std::int64_t> get_int_list(std::string_view key, const std::vector<std::int64_t>& fallback) const;

  // Deletes a key of this view (no-op when absent), e.g. one alternative of two when a command
  // line sets the other (data.dir replaces data.corpus).
  void remove(std::string_view key);
  // The largest integer anywhere in this view (0 when none), without marking anything used: a
  // stand-in size that meets every bound the view names, e.g. a vocabulary above every cutoff.
  std::int64_t largest_integer() const;

  // Throws listing every key of this view (the whole config, or a section) that no getter read
  // (objects count as read when all their keys were).
  void require_all_used() const;
  // The configuration as read: the file, the overrides and every default a getter used, as
  // indented JSON.
  std::string resolved() const;
  const std::string& source() const;

 public:
  struct State;  // opaque: the parsed JSON, the usage record and the resolved values

 private:
  Config(std::shared_ptr<State> state, std::string prefix);
  std::shared_ptr<State> state_;
  std::string prefix_;  // "" or "a.b." (with the trailing dot)
};

}  // namespace define
