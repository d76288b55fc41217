// A build without NCCL (no CUDA backend, or NCCL not found): make_communicator refuses nccl
// before this runs.
#include "core/error.h"
#include "distributed/transports.h"

namespace define::dist {

bool built_with_nccl() { return false; }
std::unique_ptr<Communicator> make_nccl_communicator(Device /*device*/) {
  fail("distributed", "this define was built without NCCL (needs DEFINE_CUDA=ON and NCCL)");
}

}  // namespace define::dist
