#include "tools/options.h"

#include <algorithm>
#include <cerrno>
#include <cstdlib>
#include <string_view>
#include <utility>

#include "core/error.h"

namespace define::cli {
namespace {

bool contains(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

}  // namespace

const std::string& Options::get(const std::string& name) const {
  const auto it = values.find(name);
  if (it == values.end() || it->second.empty()) fail("options", "--{} was not given", name);
  return it->second.back();
}

std::int64_t Options::get_int(const std::string& name) const {
  const std::string& v = get(name);
  char* end = nullptr;
  errno = 0;
  const long long x = std::strtoll(v.c_str(), &end, 10);
  if (v.empty() || *end != '\0') fail("options", "--{} expects an integer, got '{}'", name, v);
  // strtoll clamps an out-of-range value to the limit: refuse it rather than run with the limit.
  if (errno == ERANGE) fail("options", "--{}: {} is out of the 64-bit integer range", name, v);
  return x;
}

double Options::get_double(const std::string& name) const {
  const std::string& v = get(name);
  char* end = nullptr;
  const double x = std::strtod(v.c_str(), &end);
  if (v.empty() || *end != '\0') fail("options", "--{} expects a number, got '{}'", name, v);
  return x;
}

std::vector<std::string> Options::get_all(const std::string& name) const {
  const auto it = values.find(name);
  return it == values.end() ? std::vector<std::string>{} : it->second;
}

Options parse_options(const char* command, const std::vector<std::string>& args, const OptionSpec& spec) {
  Options out;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--help" || a == "-h") {
      out.help = true;
      continue;
    }
    if (a.rfind("--", 0) != 0) fail(command, "unexpected argument '{}' (options start with --)", a);
    std::string name = a.substr(2), value;
    bool has_value = false;
    if (const std::size_t eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
      has_value = true;
    }
    if (contains(spec.flags, name)) {
      if (has_value) fail(command, "--{} takes no value", name);
      out.values[name].push_back("true");
      continue;
    }
    const bool single = contains(spec.required, name) || contains(spec.optional, name);
    if (!single && !contains(spec.repeated, name))
      fail(command, "unknown option --{} (see `define {} --help`)", name, command);
    if (!has_value) {
      if (i + 1 >= args.size()) fail(command, "--{} needs a value", name);
      value = args[++i];
    }
    if (single && out.has(name)) fail(command, "--{} given twice", name);
    out.values[name].push_back(value);
  }
  if (!out.help)
    for (const std::string& r : spec.required)
      if (!out.has(r)) fail(command, "--{} is required (see `define {} --help`)", r, command);
  return out;
}

Config load_config(const Options& opts) {
  Config cfg = Config::from_file(opts.get("config"));
  // Keys that say the same thing two ways: the one set on the command line replaces the file's
  // other (a config naming data.corpus pointed at a folder with --set data.dir=...).
  static constexpr std::pair<std::string_view, std::string_view> kAlternatives[] = {{"data.dir", "data.corpus"}};
  for (const std::string& s : opts.get_all("set")) {
    cfg.set(s);
    const std::string_view key = std::string_view(s).substr(0, s.find('='));
    for (const auto& [a, b] : kAlternatives) {
      if (key == a) cfg.remove(b);
      if (key == b) cfg.remove(a);
    }
  }
  return cfg;
}

}  // namespace define::cli
