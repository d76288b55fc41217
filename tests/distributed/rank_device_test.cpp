// Which GPU a data-parallel rank takes: its node-local rank (from the launcher, else from MPI's
// shared-memory split), or the one GPU a per-rank CUDA_VISIBLE_DEVICES leaves it.
#include <catch2/catch.hpp>

#include <cstdlib>

#include "distributed/communicator.h"
#include "distributed/transports.h"
#include "dist_test_util.h"

using namespace define;

TEST_CASE("rank device: local rank among the visible GPUs, a per-rank binding, too few GPUs", "[dist]") {
  CHECK(dist::choose_rank_gpu(0, 4, nullptr) == 0);
  CHECK(dist::choose_rank_gpu(3, 4, nullptr) == 3);
  CHECK(dist::choose_rank_gpu(2, 4, "0,1,2,3") == 2);
  // CUDA_VISIBLE_DEVICES=<one GPU> per rank: every rank sees its GPU as cuda:0.
  CHECK(dist::choose_rank_gpu(1, 1, "1") == 0);
  CHECK(dist::choose_rank_gpu(7, 1, "7") == 0);
  // No GPU at all: cuda:0, which training_device() refuses naming the count.
  CHECK(dist::choose_rank_gpu(1, 0, nullptr) == 0);
  CHECK_THROWS_WITH(dist::choose_rank_gpu(2, 2, nullptr),
                    Catch::Contains("rank 2 of its machine, but it sees 2 GPU(s)") &&
                        Catch::Contains("at most 2 rank(s) per machine"));
  CHECK_THROWS_WITH(dist::choose_rank_gpu(1, 1, nullptr), Catch::Contains("sees 1 GPU(s)"));
  CHECK_THROWS_WITH(dist::choose_rank_gpu(2, 2, "0,1"), Catch::Contains("(CUDA_VISIBLE_DEVICES=0,1)"));
}

TEST_CASE("rank device: the node-local rank from MPI agrees with the launcher's", "[dist][mpi]") {
  // Under mpirun both ranks share this machine: MPI's shared-memory split gives the launcher's
  // local rank, with or without the launcher's variable.
  CHECK(dist::mpi_node_local_rank() == dist::launcher_local_rank());
  CHECK(dist::node_local_rank() == dist::launcher_local_rank());
  if (test::comm().world_size() > 1) CHECK(dist::mpi_node_local_rank() == test::comm().rank());
}
