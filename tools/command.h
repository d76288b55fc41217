// The `define` command line: one entry per subcommand. Later issues add train, eval, generate,
// params, export-cache and corrmap by adding a file and a line to the table in main.cpp.
#pragma once

#include <string>
#include <vector>

namespace define::cli {

struct Command {
  const char* name;
  const char* summary;
  int (*run)(const std::vector<std::string>& args);
};

int run_demo(const std::vector<std::string>& args);
int run_devices(const std::vector<std::string>& args);
int run_params(const std::vector<std::string>& args);
int run_train(const std::vector<std::string>& args);
int run_eval(const std::vector<std::string>& args);
int run_generate(const std::vector<std::string>& args);
int run_export_cache(const std::vector<std::string>& args);
int run_corrmap(const std::vector<std::string>& args);
int run_export(const std::vector<std::string>& args);
int run_import(const std::vector<std::string>& args);

}  // namespace define::cli
