// A build without MPI: one process only; make_communicator refuses mpi and nccl before these run.
#include "core/error.h"
#include "distributed/transports.h"

namespace define::dist {

bool built_with_mpi() { return false; }
int mpi_node_local_rank() { return 0; }
void end_job_on_error(const std::string& /*message*/) {}
void set_collective_timeout_s(double /*seconds*/) {}
std::unique_ptr<Communicator> make_mpi_communicator() {
  fail("distributed", "this define was built without MPI (configure with -DDEFINE_MPI=ON)");
}
std::unique_ptr<Communicator> make_nccl_emulated_communicator(Device /*device*/) {
  fail("distributed", "this define was built without MPI, which the emulated NCCL runs over");
}

}  // namespace define::dist
