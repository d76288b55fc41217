#include "core/omp_wait.h"

#include <limits.h>
#include <unistd.h>

#include <cstdlib>

namespace define {

void prefer_passive_omp_wait(char** argv, const std::vector<std::pair<std::string, std::string>>& more) {
  std::vector<std::pair<std::string, std::string>> wanted;
  if (std::getenv("OMP_WAIT_POLICY") == nullptr) wanted.emplace_back("OMP_WAIT_POLICY", "PASSIVE");
  for (const auto& [name, value] : more)
    if (!value.empty() && std::getenv(name.c_str()) == nullptr) wanted.emplace_back(name, value);
  if (wanted.empty()) return;
  // This very binary, whatever argv[0] or PATH say. Executed by its resolved path rather than as
  // /proc/self/exe, so that ps and top still show it under its own name.
  char path[PATH_MAX];
  const ssize_t n = readlink("/proc/self/exe", path, sizeof(path) - 1);
  if (n <= 0) return;
  path[n] = '\0';
  for (const auto& [name, value] : wanted)
    if (setenv(name.c_str(), value.c_str(), 1) != 0) return;
  execv(path, argv);  // returns only on error: carry on with the libraries' defaults
  for (const auto& [name, value] : wanted) unsetenv(name.c_str());
}

}  // namespace define
