// Switches that put back, one at a time, the data-parallel bugs the emulated device must catch, so
// that tests can show each one failing (tests/distributed/planted_bugs_test.cpp). Every switch is
// off unless a test turns it on; nothing else reads or sets them.
#pragma once

namespace define::dist {

struct PlantedBugs {
  // The NCCL communicator issues a collective without making its stream wait for the compute
  // stream (the input may be read before the kernels writing it finish).
  bool no_wait_compute_to_communication = false;
  // A started collective's wait() returns without waiting for it (the optimizer may read the
  // buffer before the sums arrive).
  bool wait_returns_early = false;
  // The gradient reducer starts a bucket as soon as its gradients are ready, not in bucket order
  // (ranks whose batches used different parameters issue different collectives against each other).
  bool buckets_in_ready_order = false;
};

PlantedBugs& planted_bugs();

}  // namespace define::dist
