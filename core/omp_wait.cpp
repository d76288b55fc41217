#include "core/omp_wait.h"

#include <unistd.h>

#include <cstdlib>

namespace define {

void prefer_passive_omp_wait(char** argv) {
  if (std::getenv("OMP_WAIT_POLICY") != nullptr) return;
  if (setenv("OMP_WAIT_POLICY", "PASSIVE", 1) != 0) return;
  // /proc/self/exe is this very binary, whatever argv[0] or PATH say; execv only returns on error.
  execv("/proc/self/exe", argv);
}

}  // namespace define
