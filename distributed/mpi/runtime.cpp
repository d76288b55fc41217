#include "distributed/mpi/runtime.h"

#include <mpi.h>

#include <sched.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <thread>

#include "core/error.h"
#include "core/float16.h"
#include "distributed/communicator.h"
#include "distributed/transports.h"

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

namespace {

template <typename T>
void sum_16bit(void* in, void* inout, int* len, MPI_Datatype*) {
  const T* a = static_cast<const T*>(in);
  T* b = static_cast<T*>(inout);
  for (int i = 0; i < *len; ++i) b[i] = add_stored(a[i], b[i]);
}

template <typename T>
MPI_Op sum_op() {
  static MPI_Op op = [] {
    MPI_Op o = MPI_OP_NULL;
    check_mpi(MPI_Op_create(&sum_16bit<T>, /*commute=*/1, &o), "MPI_Op_create");
    return o;
  }();
  return op;
}

}  // namespace

MPI_Op mpi_float16_sum() { return sum_op<Half>(); }
MPI_Op mpi_bfloat16_sum() { return sum_op<BFloat16>(); }

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
int mpi_node_local_rank() {
  mpi_initialize();
  return g_local_rank;
}

double mpi_collective_timeout_s() { return g_timeout_s; }
void set_mpi_collective_timeout_s(double seconds) { g_timeout_s = seconds; }
void set_collective_timeout_s(double seconds) { set_mpi_collective_timeout_s(seconds); }

void check_mpi(int rc, const char* call) {
  if (rc == MPI_SUCCESS) return;
  char text[MPI_MAX_ERROR_STRING];
  int len = 0;
  MPI_Error_string(rc, text, &len);
  fail("distributed", "{} failed: {}", call, std::string(text, static_cast<std::size_t>(len)));
}

void mpi_wait(MPI_Request& req, const char* what) {
  const auto start = std::chrono::steady_clock::now();
  for (int spins = 0;; ++spins) {
    int done = 0;
    check_mpi(MPI_Test(&req, &done, MPI_STATUS_IGNORE), "MPI_Test");
    if (done) return;
    if (spins < 64) {
      sched_yield();
      continue;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(50));
    if (g_timeout_s > 0 &&
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count() > g_timeout_s)
      fail("distributed",
           "rank {}: the {} waited {:.0f} s for the other ranks (train.distributed_timeout): one of "
           "them died or hangs",
           mpi_world_rank(), what, g_timeout_s);
  }
}

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
