#include "dist_test_util.h"

#include <memory>

namespace define::test {

dist::Communicator& comm() {
  static const std::unique_ptr<dist::Communicator> c =
      dist::make_communicator(dist::launcher_world_size() > 1 ? "mpi" : "none", Device::cpu());
  return *c;
}

std::vector<dist::Communicator*> transports() {
  std::vector<dist::Communicator*> all{&comm()};
  if (comm().world_size() > 1) {
    static const std::unique_ptr<dist::Communicator> nccl = dist::make_communicator("nccl", Device::parse("emu:0"));
    all.push_back(nccl.get());
  }
  return all;
}

}  // namespace define::test
