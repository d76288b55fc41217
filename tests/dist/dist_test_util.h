#pragma once

#include "dist/communicator.h"

namespace define::test {

// The process group of this test run: mpi under mpirun, else one process.
dist::Communicator& comm();

}  // namespace define::test
