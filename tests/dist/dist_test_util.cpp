#include "dist_test_util.h"

#include <memory>

namespace define::test {

dist::Communicator& comm() {
  static const std::unique_ptr<dist::Communicator> c =
      dist::make_communicator(dist::launcher_world_size() > 1 ? "mpi" : "none", Device::cpu());
  return *c;
}

}  // namespace define::test
