#include "core/config.h"

#include <algorithm>
#include <cstdint>
#include <fstream>
#include <set>
#include <sstream>

#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "core/error.h"

namespace define {

using Json = nlohmann::json;

struct Config::State {
  Json root = Json::object();
  Json resolved = Json::object();
  std::set<std::string> used;  // full dotted paths read by a getter
  std::string source = "<empty config>";
};

namespace {

constexpr const char* kOp = "config";

// Whether s is valid UTF-8: JSON text is, and the config is written back as JSON (resolved()).
bool is_utf8(const std::string& s) {
  try {
    (void)Json(s).dump();
    return true;
  } catch (const Json::type_error&) {
    return false;
  }
}

// The parts of a dotted key ("a.b.c": a, b, c). Keys are walked part by part rather than through
// nlohmann's JSON pointers, which read '~' and '/' inside a part as escapes and separators, and
// descend into lists (and throw on an index out of range).
std::vector<std::string> parts_of(const std::string& dotted) {
  if (!is_utf8(dotted)) fail(kOp, "malformed key '{}' (not valid UTF-8)", dotted);
  std::vector<std::string> parts;
  std::size_t start = 0;
  for (;;) {
    const std::size_t dot = dotted.find('.', start);
    parts.push_back(dotted.substr(start, dot == std::string::npos ? std::string::npos : dot - start));
    if (parts.back().empty()) fail(kOp, "malformed key '{}' (empty part)", dotted);
    if (dot == std::string::npos) return parts;
    start = dot + 1;
  }
}

// The dotted form of parts [0, n).
std::string joined(const std::vector<std::string>& parts, std::size_t n) {
  std::string out;
  for (std::size_t i = 0; i < n; ++i) out += (i ? "." : "") + parts[i];
  return out;
}

// The value at `parts`, or nullptr when one is missing. `blocked` (when given) receives how many
// parts lead to a value that is not an object but has parts below it (0 when none): such a key
// names nothing, and saying so beats "missing key".
const Json* find_value(const Json& root, const std::vector<std::string>& parts, std::size_t* blocked = nullptr) {
  if (blocked) *blocked = 0;
  const Json* at = &root;
  for (std::size_t i = 0; i < parts.size(); ++i) {
    if (!at->is_object()) {
      if (blocked) *blocked = i;
      return nullptr;
    }
    const auto it = at->find(parts[i]);
    if (it == at->end()) return nullptr;
    at = &*it;
  }
  return at;
}

// The value at `parts`, created with the objects on the way; a value on the way that is not an
// object is replaced (callers check `root` with find_value first; this also writes the record of
// resolved values, where a later --set may replace a recorded default).
Json& slot(Json& root, const std::vector<std::string>& parts) {
  Json* at = &root;
  for (const std::string& part : parts) {
    if (!at->is_object()) *at = Json::object();
    at = &(*at)[part];
  }
  return *at;
}

std::string describe(const Json& v) {
  switch (v.type()) {
    case Json::value_t::string:
      return fmt::format("the string {}", v.dump());
    case Json::value_t::boolean:
      return fmt::format("the boolean {}", v.dump());
    case Json::value_t::number_float:
      return fmt::format("the number {}", v.dump());
    case Json::value_t::number_integer:
    case Json::value_t::number_unsigned:
      return fmt::format("the integer {}", v.dump());
    case Json::value_t::array:
      return "a list";
    case Json::value_t::object:
      return "an object";
    case Json::value_t::null:
      return "null";
    default:
      return "a value of another kind";
  }
}

Json parse_json(std::string_view text, const std::string& source) {
  try {
    return Json::parse(text.begin(), text.end());
  } catch (const Json::parse_error& e) {
    // nlohmann reports a byte offset; turn it into line:column for the user.
    std::size_t line = 1, col = 1;
    for (std::size_t i = 0; i + 1 < e.byte && i < text.size(); ++i) {
      if (text[i] == '\n') {
        ++line;
        col = 1;
      } else {
        ++col;
      }
    }
    fail(kOp, "{}:{}:{}: not valid JSON ({})", source, line, col, e.what());
  } catch (const Json::exception& e) {
    // Not a syntax error but still the text's fault, e.g. a number too large for a double.
    fail(kOp, "{}: not valid JSON ({})", source, e.what());
  }
}

// Leaf paths (non-object values, and empty objects) of j under `prefix`.
void collect_leaves(const Json& j, const std::string& prefix, std::vector<std::string>& out) {
  if (!j.is_object() || j.empty()) {
    if (!prefix.empty()) out.push_back(prefix);
    return;
  }
  for (const auto& [k, v] : j.items()) collect_leaves(v, prefix.empty() ? k : prefix + "." + k, out);
}

}  // namespace

Config::Config() : state_(std::make_shared<State>()) {}
Config::Config(std::shared_ptr<State> state, std::string prefix)
    : state_(std::move(state)), prefix_(std::move(prefix)) {}

Config Config::from_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) fail(kOp, "cannot open config file '{}'", path);
  std::stringstream ss;
  ss << in.rdbuf();
  return from_text(ss.str(), path);
}

Config Config::from_text(std::string_view json_text, std::string source) {
  Config c;
  c.state_->root = parse_json(json_text, source);
  if (!c.state_->root.is_object()) fail(kOp, "{}: the top level must be a JSON object", source);
  c.state_->resolved = c.state_->root;
  c.state_->source = std::move(source);
  return c;
}

void Config::set(std::string_view assignment) {
  const std::size_t eq = assignment.find('=');
  if (eq == std::string_view::npos || eq == 0) fail(kOp, "--set expects key=value, got '{}'", assignment);
  const std::string key = path(assignment.substr(0, eq));
  const std::string text(assignment.substr(eq + 1));
  if (!is_utf8(text)) fail(kOp, "--set {}: the value is not valid UTF-8", key);
  Json value;
  try {
    value = Json::parse(text);
  } catch (const Json::exception&) {
    value = text;  // a bare word (or a number out of range): a string
  }
  const std::vector<std::string> parts = parts_of(key);
  // Refuse to replace an object by a scalar (or descend through a scalar): that is always a typo.
  std::size_t blocked = 0;
  const Json* old = find_value(state_->root, parts, &blocked);
  if (blocked > 0) {
    const std::string walked = joined(parts, blocked);
    fail(kOp, "--set {}: '{}' is {}, not a section", key, walked,
         describe(*find_value(state_->root, parts_of(walked))));
  }
  if (old && old->is_object()) fail(kOp, "--set {}: '{}' is a section; set one of its keys", key, key);
  slot(state_->root, parts) = value;
  slot(state_->resolved, parts) = value;
}

void Config::remove(std::string_view key) {
  const std::vector<std::string> parts = parts_of(path(key));
  for (Json* root : {&state_->root, &state_->resolved}) {
    Json* at = root;
    for (std::size_t i = 0; at && i + 1 < parts.size(); ++i) {
      const auto it = at->is_object() ? at->find(parts[i]) : at->end();
      at = it == at->end() ? nullptr : &*it;
    }
    if (at && at->is_object()) at->erase(parts.back());
  }
}

std::int64_t Config::largest_integer() const {
  const Json* at =
      prefix_.empty() ? &state_->root : find_value(state_->root, parts_of(prefix_.substr(0, prefix_.size() - 1)));
  std::int64_t best = 0;
  const auto walk = [&best](const auto& self, const Json& v) -> void {
    if (v.is_number_unsigned())
      best = std::max(best, static_cast<std::int64_t>(std::min<std::uint64_t>(v.get<std::uint64_t>(), INT64_MAX)));
    else if (v.is_number_integer())
      best = std::max(best, v.get<std::int64_t>());
    if (v.is_structured())
      for (const Json& child : v) self(self, child);
  };
  if (at) walk(walk, *at);
  return best;
}

std::string Config::path(std::string_view key) const { return prefix_ + std::string(key); }

Config Config::section(std::string_view key) const { return Config(state_, path(key) + "."); }

bool Config::has(std::string_view key) const { return find_value(state_->root, parts_of(path(key))) != nullptr; }

const std::string& Config::source() const { return state_->source; }

namespace {

// The value at `full` or nullptr; marks it used. A key below a value that is not an object is an
// error naming that value (a config with "input": "define" where a section is read).
const Json* lookup(Config::State& s, const std::string& full) {
  const std::vector<std::string> parts = parts_of(full);
  std::size_t blocked = 0;
  const Json* v = find_value(s.root, parts, &blocked);
  if (blocked > 0) {
    const std::string walked = joined(parts, blocked);
    fail(kOp, "key '{}' in {}: '{}' is {}, not a section", full, s.source, walked,
         describe(*find_value(s.root, parts_of(walked))));
  }
  if (!v) return nullptr;
  s.used.insert(full);
  return v;
}

[[noreturn]] void wrong_type(const Config::State& s, const std::string& key, const char* expected, const Json& v) {
  fail(kOp, "key '{}' in {}: expected {}, got {}", key, s.source, expected, describe(v));
}

const Json& required(Config::State& s, const std::string& key) {
  const Json* v = lookup(s, key);
  if (!v) fail(kOp, "missing required key '{}' in {}", key, s.source);
  return *v;
}

std::int64_t as_int(const Config::State& s, const std::string& key, const Json& v) {
  if (!v.is_number_integer()) wrong_type(s, key, "an integer", v);
  return v.get<std::int64_t>();
}
double as_double(const Config::State& s, const std::string& key, const Json& v) {
  if (!v.is_number()) wrong_type(s, key, "a number", v);
  return v.get<double>();
}
bool as_bool(const Config::State& s, const std::string& key, const Json& v) {
  if (!v.is_boolean()) wrong_type(s, key, "true or false", v);
  return v.get<bool>();
}
std::string as_string(const Config::State& s, const std::string& key, const Json& v) {
  if (!v.is_string()) wrong_type(s, key, "a string", v);
  return v.get<std::string>();
}
std::vector<std::int64_t> as_int_list(const Config::State& s, const std::string& key, const Json& v) {
  if (!v.is_array()) wrong_type(s, key, "a list of integers", v);
  std::vector<std::int64_t> out;
  for (const Json& e : v) {
    if (!e.is_number_integer()) wrong_type(s, key, "a list of integers", e);
    out.push_back(e.get<std::int64_t>());
  }
  return out;
}

}  // namespace

std::int64_t Config::get_int(std::string_view key) const {
  const std::string k = path(key);
  return as_int(*state_, k, required(*state_, k));
}
double Config::get_double(std::string_view key) const {
  const std::string k = path(key);
  return as_double(*state_, k, required(*state_, k));
}
bool Config::get_bool(std::string_view key) const {
  const std::string k = path(key);
  return as_bool(*state_, k, required(*state_, k));
}
std::string Config::get_string(std::string_view key) const {
  const std::string k = path(key);
  return as_string(*state_, k, required(*state_, k));
}
std::vector<std::int64_t> Config::get_int_list(std::string_view key) const {
  const std::string k = path(key);
  return as_int_list(*state_, k, required(*state_, k));
}

std::int64_t Config::get_int(std::string_view key, std::int64_t fallback) const {
  const std::string k = path(key);
  if (const Json* v = lookup(*state_, k)) return as_int(*state_, k, *v);
  slot(state_->resolved, parts_of(k)) = fallback;
  return fallback;
}
double Config::get_double(std::string_view key, double fallback) const {
  const std::string k = path(key);
  if (const Json* v = lookup(*state_, k)) return as_double(*state_, k, *v);
  slot(state_->resolved, parts_of(k)) = fallback;
  return fallback;
}
bool Config::get_bool(std::string_view key, bool fallback) const {
  const std::string k = path(key);
  if (const Json* v = lookup(*state_, k)) return as_bool(*state_, k, *v);
  slot(state_->resolved, parts_of(k)) = fallback;
  return fallback;
}
std::string Config::get_string(std::string_view key, std::string_view fallback) const {
  const std::string k = path(key);
  if (const Json* v = lookup(*state_, k)) return as_string(*state_, k, *v);
  slot(state_->resolved, parts_of(k)) = std::string(fallback);
  return std::string(fallback);
}
std::vector<std::int64_t> Config::get_int_list(std::string_view key, const std::vector<std::int64_t>& fallback) const {
  const std::string k = path(key);
  if (const Json* v = lookup(*state_, k)) return as_int_list(*state_, k, *v);
  slot(state_->resolved, parts_of(k)) = fallback;
  return fallback;
}

void Config::require_all_used() const {
  std::vector<std::string> leaves;
  collect_leaves(state_->root, "", leaves);
  std::vector<std::string> unknown;
  for (const std::string& leaf : leaves)
    if (leaf.compare(0, prefix_.size(), prefix_) == 0 && !state_->used.count(leaf)) unknown.push_back(leaf);
  if (unknown.size() == 1) fail(kOp, "unknown config key '{}' in {}", unknown[0], state_->source);
  if (!unknown.empty()) fail(kOp, "unknown config keys in {}: '{}'", state_->source, fmt::join(unknown, "', '"));
}

std::string Config::resolved() const { return state_->resolved.dump(2); }

}  // namespace define
