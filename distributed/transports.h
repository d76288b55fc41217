// The transports behind make_communicator (distributed/communicator.h), each in its own file and built
// only where its library is found (DEFINE_MPI, DEFINE_NCCL); the stand-ins in
// distributed/mpi/without_mpi.cpp and distributed/nccl/without_nccl.cpp throw when a build lacks one.
#pragma once

#include <memory>

#include "distributed/communicator.h"

namespace define::dist {

std::unique_ptr<Communicator> make_mpi_communicator();
std::unique_ptr<Communicator> make_nccl_communicator(Device device);           // GPUs (real NCCL)
std::unique_ptr<Communicator> make_nccl_emulated_communicator(
    Device device);  // emu devices (distributed/nccl/emulated_nccl.h)

// MPI's node-local rank (distributed/mpi/runtime.cpp; 0 without MPI).
int mpi_node_local_rank();

// Contiguous float32 / float64 / int64; throws naming the collective otherwise.
void check_collective_tensor(const Tensor& t, const char* what);

}  // namespace define::dist
