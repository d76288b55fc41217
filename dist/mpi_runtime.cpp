#include "dist/mpi_runtime.h"

#include <mpi.h>

#include <cstdio>
#include <cstdlib>

#include "core/error.h"
#include "dist/communicator.h"

namespace define::dist {
namespace {

int g_local_rank = 0;
double g_timeout_s = 300;

void finalize_at_exit() {
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Finalize();
}

}  // namespace

bool built_with_mpi() { return true; }

bool mpi_initialized() {
  int init = 0;
  MPI_Initialized(&init);
  return init != 0;
}

void mpi_initialize() {
  if (mpi_initialized()) return;
  int provided = 0;
  if (MPI_Init_thread(nullptr, nullptr, MPI_THREAD_FUNNELED, &provided) != MPI_SUCCESS)
    fail("distributed", "MPI_Init_thread failed (is this process started by mpirun?)");
  // Errors come back as return codes, so they become define::Error with MPI's text.
  MPI_Comm_set_errhandler(MPI_COMM_WORLD, MPI_ERRORS_RETURN);
  MPI_Comm node;
  MPI_Comm_split_type(MPI_COMM_WORLD, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &node);
  MPI_Comm_rank(node, &g_local_rank);
  MPI_Comm_free(&node);
  std::atexit(finalize_at_exit);
}

int mpi_world_rank() {
  int r = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &r);
  return r;
}
int mpi_world_size() {
  int n = 1;
  MPI_Comm_size(MPI_COMM_WORLD, &n);
  return n;
}
int mpi_local_rank() { return g_local_rank; }

double mpi_collective_timeout_s() { return g_timeout_s; }
void set_mpi_collective_timeout_s(double seconds) { g_timeout_s = seconds; }
void set_collective_timeout_s(double seconds) { set_mpi_collective_timeout_s(seconds); }

void abort_job(const std::string& why) {
  std::fprintf(stderr, "rank %d of %d ends the job: %s\n", mpi_world_rank(), mpi_world_size(), why.c_str());
  std::fflush(stderr);
  MPI_Abort(MPI_COMM_WORLD, 1);
  std::abort();  // MPI_Abort does not return; this tells the compiler so
}

void end_job_on_error(const std::string& message) {
  if (!mpi_initialized() || mpi_world_size() == 1) return;
  abort_job(message);
}

}  // namespace define::dist
