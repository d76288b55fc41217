// The transports behind make_communicator (dist/communicator.h), each in its own file and built
// only where its library is found (DEFINE_MPI, DEFINE_NCCL); the stand-ins in
// dist/no_backends.cpp throw when a build lacks one.
#pragma once

#include <memory>

#include "dist/communicator.h"

namespace define::dist {

std::unique_ptr<Communicator> make_mpi_communicator();
std::unique_ptr<Communicator> make_nccl_communicator(Device device);           // GPUs (real NCCL)
std::unique_ptr<Communicator> make_nccl_emulated_communicator(Device device);  // emu devices (dist/nccl_emu.h)

// Contiguous float32 / float64 / int64; throws naming the collective otherwise.
void check_collective_tensor(const Tensor& t, const char* what);

}  // namespace define::dist
