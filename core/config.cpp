#include "core/config.h"

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

Json::json_pointer pointer_of(const std::string& dotted) {
  std::string p;
  std::size_t start = 0;
  while (start <= dotted.size()) {
    const std::size_t dot = dotted.find('.', start);
    const std::string part = dotted.substr(start, dot == std::string::npos ? std::string::npos : dot - start);
    if (part.empty()) fail(kOp, "malformed key '{}' (empty part)", dotted);
    p += '/';
    p += part;
    if (dot == std::string::npos) break;
    start = dot + 1;
  }
  return Json::json_pointer(p);
}

std::string describe(const Json& v) {
  switch (v.type()) {
    case Json::value_t::string: return fmt::format("the string {}", v.dump());
    case Json::value_t::boolean: return fmt::format("the boolean {}", v.dump());
    case Json::value_t::number_float: return fmt::format("the number {}", v.dump());
    case Json::value_t::number_integer:
    case Json::value_t::number_unsigned: return fmt::format("the integer {}", v.dump());
    case Json::value_t::array: return "a list";
    case Json::value_t::object: return "an object";
    case Json::value_t::null: return "null";
    default: return "a value of another kind";
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
Config::Config(std::shared_ptr<State> state, std::string prefix) : state_(std::move(state)), prefix_(std::move(prefix)) {}

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
  if (eq == std::string_view::npos || eq == 0)
    fail(kOp, "--set expects key=value, got '{}'", assignment);
  const std::string key = path(assignment.substr(0, eq));
  const std::string text(assignment.substr(eq + 1));
  Json value;
  try {
    value = Json::parse(text);
  } catch (const Json::parse_error&) {
    value = text;  // a bare word: a string
  }
  const Json::json_pointer ptr = pointer_of(key);
  // Refuse to replace an object by a scalar (or descend through a scalar): that is always a typo.
  std::string walked;
  for (std::size_t start = 0;;) {
    const std::size_t dot = key.find('.', start);
    if (dot == std::string::npos) break;
    walked = key.substr(0, dot);
    const Json::json_pointer p = pointer_of(walked);
    if (state_->root.contains(p) && !state_->root.at(p).is_object())
      fail(kOp, "--set {}: '{}' is {}, not a section", key, walked, describe(state_->root.at(p)));
    start = dot + 1;
  }
  if (state_->root.contains(ptr) && state_->root.at(ptr).is_object())
    fail(kOp, "--set {}: '{}' is a section; set one of its keys", key, key);
  state_->root[ptr] = value;
  state_->resolved[ptr] = value;
}

std::string Config::path(std::string_view key) const { return prefix_ + std::string(key); }

Config Config::section(std::string_view key) const { return Config(state_, path(key) + "."); }

bool Config::has(std::string_view key) const { return state_->root.contains(pointer_of(path(key))); }

const std::string& Config::source() const { return state_->source; }

namespace {

// The value at `full` or nullptr; marks it used.
const Json* lookup(Config::State& s, const std::string& full) {
  const Json::json_pointer ptr = pointer_of(full);
  if (!s.root.contains(ptr)) return nullptr;
  s.used.insert(full);
  return &s.root.at(ptr);
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
  state_->resolved[pointer_of(k)] = fallback;
  return fallback;
}
double Config::get_double(std::string_view key, double fallback) const {
  const std::string k = path(key);
  if (const Json* v = lookup(*state_, k)) return as_double(*state_, k, *v);
  state_->resolved[pointer_of(k)] = fallback;
  return fallback;
}
bool Config::get_bool(std::string_view key, bool fallback) const {
  const std::string k = path(key);
  if (const Json* v = lookup(*state_, k)) return as_bool(*state_, k, *v);
  state_->resolved[pointer_of(k)] = fallback;
  return fallback;
}
std::string Config::get_string(std::string_view key, std::string_view fallback) const {
  const std::string k = path(key);
  if (const Json* v = lookup(*state_, k)) return as_string(*state_, k, *v);
  state_->resolved[pointer_of(k)] = std::string(fallback);
  return std::string(fallback);
}
std::vector<std::int64_t> Config::get_int_list(std::string_view key, const std::vector<std::int64_t>& fallback) const {
  const std::string k = path(key);
  if (const Json* v = lookup(*state_, k)) return as_int_list(*state_, k, *v);
  state_->resolved[pointer_of(k)] = fallback;
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
