// Command-line options of the `define` subcommands: `--name value`, `--name=value`, repeatable
// options (`--set a=1 --set b=2`) and flags (`--resume`). Unknown options, missing values and
// missing required options are errors naming the option and the command.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "core/config.h"

namespace define::cli {

struct OptionSpec {
  std::vector<std::string> required;  // single-valued, must be given
  std::vector<std::string> repeated;  // may be given any number of times
  std::vector<std::string> optional;  // single-valued, optional
  std::vector<std::string> flags;     // no value
};

struct Options {
  bool help = false;
  std::map<std::string, std::vector<std::string>> values;
  bool has(const std::string& name) const { return values.count(name) > 0; }
  const std::string& get(const std::string& name) const;            // single value
  std::int64_t get_int(const std::string& name) const;              // single integer
  double get_double(const std::string& name) const;                 // single number
  std::vector<std::string> get_all(const std::string& name) const;  // repeated (may be empty)
};

Options parse_options(const char* command, const std::vector<std::string>& args, const OptionSpec& spec);

// The config named by --config with every --set applied in order; a --set of data.dir removes the
// file's data.corpus and the other way round (two names for where the corpus is).
Config load_config(const Options& opts);

}  // namespace define::cli
