// define_dist_tests: the data-parallel collectives and the gradient reducer, run by ctest twice:
// as one process (backend none) and under `mpirun -np 2` (backend mpi). Every rank runs every
// test in the same order, so their collectives pair up.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"  // GCC 12 in <regex> (Catch2), sanitizer builds
#define CATCH_CONFIG_RUNNER
#include <catch2/catch.hpp>

#include "kernels/devices.h"

int main(int argc, char** argv) {
  define::kernels::register_devices();
  return Catch::Session().run(argc, argv);
}
