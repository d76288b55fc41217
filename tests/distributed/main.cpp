// define_dist_tests: the data-parallel collectives and the gradient reducer, run by ctest twice:
// as one process (backend none) and under `mpirun -np 2` (backend mpi). Every rank runs every
// test in the same order, so their collectives pair up.
#include "catch_session.h"

#include "kernels/devices.h"

int main(int argc, char** argv) {
  define::kernels::register_devices();
  return define::test::run_catch_session(argc, argv);
}
