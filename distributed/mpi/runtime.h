// The MPI process runtime shared by the mpi and nccl backends: initialised once per process on
// first use, finalised at exit; MPI calls come from the main thread only (MPI_THREAD_FUNNELED).
#pragma once

#include <mpi.h>

#include <string>

namespace define::dist {

void mpi_initialize();
bool mpi_initialized();
int mpi_world_rank();
int mpi_world_size();
int mpi_local_rank();  // rank among the processes sharing this machine

// How long a collective waits for the other ranks before it fails (train.distributed_timeout);
// 0: forever.
double mpi_collective_timeout_s();
void set_mpi_collective_timeout_s(double seconds);

// Waits for `req` without spinning a core (on 2 cores the rank we wait for needs it), failing
// with an error naming this rank and `what` after the collective timeout.
void mpi_wait(MPI_Request& req, const char* what);
// The sum of 16-bit floats carried as MPI_UINT16_T (MPI has no 16-bit float type): each addition
// widens both values exactly and rounds the sum once to the format, as NCCL's float16 and
// bfloat16 sums do (__hadd computes in float and rounds once). Created on first use.
MPI_Op mpi_float16_sum();
MPI_Op mpi_bfloat16_sum();

// Throws naming `call` with MPI's text unless rc is MPI_SUCCESS.
void check_mpi(int rc, const char* call);

// Ends every rank of the job (MPI_Abort) after printing `why` with this rank's number: what a rank
// does on an error, so the others exit instead of waiting in a collective for a rank that left.
[[noreturn]] void abort_job(const std::string& why);

}  // namespace define::dist
