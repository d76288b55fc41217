#pragma once

#include <vector>

#include "distributed/communicator.h"

namespace define::test {

// The process group of this test run: mpi under mpirun, else one process.
dist::Communicator& comm();
// Every transport to test: comm(), and under mpirun also the NCCL communicator on the emulated GPU
// (distributed/nccl/emulated_nccl.h), which serves emu tensors through the NCCL calls and host tensors through MPI.
std::vector<dist::Communicator*> transports();

}  // namespace define::test
