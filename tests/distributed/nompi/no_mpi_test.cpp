// A define built without MPI (distributed/ compiled with its stand-ins distributed/mpi/without_mpi.cpp
// and distributed/nccl/without_nccl.cpp, as a machine without libopenmpi-dev builds it):
// train.distributed is refused with an error that says what to install, and one process still works.
#include <catch2/catch.hpp>

#include "core/factory.h"
#include "distributed/communicator.h"
#include "catch_session.h"

using namespace define;

TEST_CASE("dist without MPI: mpi and nccl are refused by name, none runs one process", "[dist]") {
  CHECK_FALSE(dist::built_with_mpi());
  CHECK_FALSE(dist::built_with_nccl());
  for (const char* backend : {"mpi", "nccl"})
    CHECK_THROWS_WITH(dist::make_communicator(backend, Device::cpu()),
                      Catch::Contains("needs a define built with MPI") && Catch::Contains("libopenmpi-dev"));
  const auto one = dist::make_communicator("none", Device::cpu());
  CHECK(one->world_size() == 1);
  Tensor t = full({3}, 2.0);
  one->all_reduce_sum(t);
  CHECK(t.to_vector<float>() == std::vector<float>{2, 2, 2});
  dist::end_job_on_error("nothing to end in one process");  // returns: no MPI job exists
}

int main(int argc, char** argv) { return define::test::run_catch_session(argc, argv); }
