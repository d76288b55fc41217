// A define built without MPI (dist/ compiled with its no_mpi / no_nccl stand-ins, as a machine
// without libopenmpi-dev builds it): train.distributed is refused with an error that says what to
// install, and one process still works.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"  // GCC 12 in <regex> (Catch2), sanitizer builds
#define CATCH_CONFIG_MAIN
#include <catch2/catch.hpp>

#include "core/factory.h"
#include "dist/communicator.h"

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
