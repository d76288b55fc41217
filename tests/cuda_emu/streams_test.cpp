// Deferred work on streams (cuda_emu/emu_stream.hpp): queued work runs only when its stream is made
// to progress, events mark queue positions, waits order streams, and work that reads the legacy
// stream's output is refused on a stream that has not waited for it.
#include <memory>
#include <vector>

#include "emu_test_support.hpp"

namespace {

// Appends its id to `log` after `steps` calls of advance() (a collective waiting for its peers).
struct Logged final : cuda_emu::StreamWork {
  std::vector<int>& log;
  int id, steps;
  Logged(std::vector<int>& l, int i, int s = 1) : log(l), id(i), steps(s) {}
  bool advance() override {
    if (--steps > 0) return false;
    log.push_back(id);
    return true;
  }
};

std::unique_ptr<cuda_emu::StreamWork> logged(std::vector<int>& log, int id, int steps = 1) {
  return std::make_unique<Logged>(log, id, steps);
}

}  // namespace

TEST_CASE("emu streams: queued work runs when the stream is synchronised or its event waited for", "[emu][streams]") {
  cudaStream_t s = nullptr;
  REQUIRE(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) == cudaSuccess);
  cudaEvent_t first = nullptr, second = nullptr;
  REQUIRE(cudaEventCreate(&first) == cudaSuccess);
  REQUIRE(cudaEventCreate(&second) == cudaSuccess);
  std::vector<int> log;
  REQUIRE(cuda_emu::enqueue(s, logged(log, 1, 3), false));
  REQUIRE(cudaEventRecord(first, s) == cudaSuccess);
  REQUIRE(cuda_emu::enqueue(s, logged(log, 2), false));
  REQUIRE(cudaEventRecord(second, s) == cudaSuccess);
  CHECK(log.empty());  // nothing runs by itself
  CHECK(cuda_emu::pending_work(s) == 2);
  CHECK(cudaEventQuery(first) == cudaErrorNotReady);  // one step of three
  CHECK(cudaEventQuery(first) == cudaErrorNotReady);
  CHECK(cudaEventQuery(first) == cudaSuccess);
  CHECK(log == std::vector<int>{1});
  CHECK(cudaStreamQuery(s) == cudaSuccess);  // the second item needs one step
  CHECK(log == std::vector<int>{1, 2});
  REQUIRE(cuda_emu::enqueue(s, logged(log, 3, 5), false));
  CHECK(cudaEventSynchronize(second) == cudaSuccess);  // already complete: runs nothing more
  CHECK(log == std::vector<int>{1, 2});
  CHECK(cudaStreamSynchronize(s) == cudaSuccess);
  CHECK(log == std::vector<int>{1, 2, 3});
  cudaEventDestroy(first);
  cudaEventDestroy(second);
  cudaStreamDestroy(s);
}

TEST_CASE("emu streams: a wait on another stream orders it, the legacy stream waiting runs the work", "[emu][streams]") {
  cudaStream_t a = nullptr, b = nullptr;
  REQUIRE(cudaStreamCreateWithFlags(&a, cudaStreamNonBlocking) == cudaSuccess);
  REQUIRE(cudaStreamCreateWithFlags(&b, cudaStreamNonBlocking) == cudaSuccess);
  cudaEvent_t e = nullptr;
  REQUIRE(cudaEventCreateWithFlags(&e, cudaEventDisableTiming) == cudaSuccess);
  std::vector<int> log;
  REQUIRE(cuda_emu::enqueue(a, logged(log, 1, 2), false));
  REQUIRE(cudaEventRecord(e, a) == cudaSuccess);
  REQUIRE(cudaStreamWaitEvent(b, e, 0) == cudaSuccess);
  REQUIRE(cuda_emu::enqueue(b, logged(log, 2), false));
  CHECK(cudaStreamSynchronize(b) == cudaSuccess);  // b's item runs after a's, which b waits for
  CHECK(log == std::vector<int>{1, 2});

  REQUIRE(cuda_emu::enqueue(a, logged(log, 3, 4), false));
  REQUIRE(cudaEventRecord(e, a) == cudaSuccess);
  REQUIRE(cudaStreamWaitEvent(nullptr, e, 0) == cudaSuccess);
  CHECK(log == std::vector<int>{1, 2, 3});
  // A destroyed stream completes its work first.
  REQUIRE(cuda_emu::enqueue(a, logged(log, 4, 3), false));
  CHECK(cudaStreamDestroy(a) == cudaSuccess);
  CHECK(log == std::vector<int>{1, 2, 3, 4});
  CHECK(cudaEventQuery(e) == cudaSuccess);  // its stream is gone: complete
  cudaEventDestroy(e);
  cudaStreamDestroy(b);
}

TEST_CASE("emu streams: work that reads the legacy stream's output needs a wait for it", "[emu][streams]") {
  cudaStream_t s = nullptr, blocking = nullptr;
  REQUIRE(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) == cudaSuccess);
  REQUIRE(cudaStreamCreate(&blocking) == cudaSuccess);
  cudaEvent_t e = nullptr;
  REQUIRE(cudaEventCreate(&e) == cudaSuccess);
  float* d = nullptr;
  REQUIRE(cudaMalloc(&d, 64) == cudaSuccess);
  std::vector<int> log;
  REQUIRE(cudaMemset(d, 0, 64) == cudaSuccess);  // an operation on the legacy stream
  CHECK_FALSE(cuda_emu::ordered_after_legacy_stream(s));
  CHECK_FALSE(cuda_emu::enqueue(s, logged(log, 1), true));  // refused, nothing queued
  CHECK(cuda_emu::pending_work(s) == 0);
  REQUIRE(cudaEventRecord(e, nullptr) == cudaSuccess);
  REQUIRE(cudaStreamWaitEvent(s, e, 0) == cudaSuccess);
  CHECK(cuda_emu::enqueue(s, logged(log, 1), true));
  REQUIRE(cudaMemset(d, 1, 64) == cudaSuccess);  // later legacy work: a new wait is needed
  CHECK_FALSE(cuda_emu::enqueue(s, logged(log, 2), true));
  // A blocking stream is ordered after the legacy stream implicitly, and the legacy stream's next
  // operation waits for it.
  CHECK(cuda_emu::enqueue(blocking, logged(log, 3, 2), true));
  CHECK(log.empty());
  REQUIRE(cudaMemset(d, 2, 64) == cudaSuccess);
  CHECK(log == std::vector<int>{3});
  CHECK(cudaDeviceSynchronize() == cudaSuccess);  // every stream
  CHECK(log == std::vector<int>{3, 1});
  cudaFree(d);
  cudaEventDestroy(e);
  cudaStreamDestroy(s);
  cudaStreamDestroy(blocking);
}

TEST_CASE("emu runtime: a memset or copy of another device's memory is refused", "[emu][runtime]") {
  REQUIRE(cuda_emu::detail::device_count() >= 2);
  void* raw = nullptr;
  std::vector<char> host(64, 1);
  REQUIRE(cudaSetDevice(1) == cudaSuccess);
  REQUIRE(cudaMalloc(&raw, 64) == cudaSuccess);
  REQUIRE(cudaSetDevice(0) == cudaSuccess);
  // On a GPU these would run on device 0's stream, unordered with device 1's kernels.
  CHECK(cudaMemset(raw, 0, 64) == cudaErrorInvalidValue);
  CHECK(cudaMemcpy(raw, host.data(), 64, cudaMemcpyHostToDevice) == cudaErrorInvalidValue);
  CHECK(cudaMemcpy(host.data(), raw, 64, cudaMemcpyDeviceToHost) == cudaErrorInvalidValue);
  (void)cudaGetLastError();
  void* mine = nullptr;
  REQUIRE(cudaMalloc(&mine, 64) == cudaSuccess);
  CHECK(cudaMemcpy(mine, raw, 64, cudaMemcpyDeviceToDevice) == cudaSuccess);  // between devices: either side
  CHECK(cudaMemcpyPeer(raw, 1, mine, 0, 64) == cudaSuccess);
  REQUIRE(cudaSetDevice(1) == cudaSuccess);
  CHECK(cudaMemset(raw, 0, 64) == cudaSuccess);
  CHECK(cudaMemcpy(host.data(), raw, 64, cudaMemcpyDeviceToHost) == cudaSuccess);
  CHECK(host == std::vector<char>(64, 0));
  REQUIRE(cudaFree(raw) == cudaSuccess);
  REQUIRE(cudaSetDevice(0) == cudaSuccess);
  REQUIRE(cudaFree(mine) == cudaSuccess);
}

TEST_CASE("emu streams: under the random schedule a query may find ready work not yet done", "[emu][streams]") {
  cuda_emu::Config& c = cuda_emu::config();
  const cuda_emu::Config saved = c;
  c.schedule = cuda_emu::Schedule::random;
  c.seed = 7;
  cudaStream_t s = nullptr;
  REQUIRE(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) == cudaSuccess);
  cudaEvent_t e = nullptr;
  REQUIRE(cudaEventCreate(&e) == cudaSuccess);
  int declined = 0;
  for (int round = 0; round < 32; ++round) {
    std::vector<int> log;
    REQUIRE(cuda_emu::enqueue(s, logged(log, round), false));  // one step completes it
    REQUIRE(cudaEventRecord(e, s) == cudaSuccess);
    int queries = 1;
    while (cudaEventQuery(e) == cudaErrorNotReady) ++queries;
    CHECK(log == std::vector<int>{round});
    declined += queries - 1;
  }
  CHECK(declined > 4);   // some queries declined to advance ...
  CHECK(declined < 60);  // ... and the work still completed at every round's first few queries
  c = saved;
  cudaEventDestroy(e);
  cudaStreamDestroy(s);
}
