#include "core/omp_wait.h"

#include <limits.h>
#include <unistd.h>

#include <cstdlib>

namespace define {

void prefer_passive_omp_wait(char** argv) {
  if (std::getenv("OMP_WAIT_POLICY") != nullptr) return;
  // This very binary, whatever argv[0] or PATH say. Executed by its resolved path rather than as
  // /proc/self/exe, so that ps and top still show it under its own name.
  char path[PATH_MAX];
  const ssize_t n = readlink("/proc/self/exe", path, sizeof(path) - 1);
  if (n <= 0) return;
  path[n] = '\0';
  if (setenv("OMP_WAIT_POLICY", "PASSIVE", 1) != 0) return;
  execv(path, argv);  // returns only on error: carry on with libgomp's default, and say so
  unsetenv("OMP_WAIT_POLICY");
}

}  // namespace define
