#include "distributed/nccl/emulated_nccl.h"

#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "core/error.h"
#include "cuda_emu/emu_stream.hpp"
#include "distributed/mpi/runtime.h"

namespace define::dist::nccl_emu {
namespace {

constexpr char kMagic[] = "define-emulated-nccl";

enum class Kind : std::int64_t { AllReduce = 1, Broadcast = 2, AllGather = 3 };

const char* kind_name(std::int64_t k) {
  switch (static_cast<Kind>(k)) {
    case Kind::AllReduce:
      return "ncclAllReduce";
    case Kind::Broadcast:
      return "ncclBroadcast";
    case Kind::AllGather:
      return "ncclAllGather";
  }
  return "an unknown collective";
}

MPI_Datatype mpi_type(ncclDataType_t t) {
  switch (t) {
    case ncclInt64:
      return MPI_INT64_T;
    case ncclFloat32:
      return MPI_FLOAT;
    case ncclFloat64:
      return MPI_DOUBLE;
    case ncclFloat16:
    case ncclBfloat16:
      return MPI_UINT16_T;  // the bits; sum_op adds them as floats
  }
  return MPI_DATATYPE_NULL;
}
// The library's sum: for the 16-bit formats each addition rounds once to the format.
MPI_Op sum_op(ncclDataType_t t) {
  return t == ncclFloat16 ? mpi_float16_sum() : t == ncclBfloat16 ? mpi_bfloat16_sum() : MPI_SUM;
}
const char* type_name(std::int64_t t) {
  switch (t) {
    case ncclInt64:
      return "int64";
    case ncclFloat16:
      return "float16";
    case ncclFloat32:
      return "float32";
    case ncclFloat64:
      return "float64";
    case ncclBfloat16:
      return "bfloat16";
    default:
      return "?";
  }
}
std::size_t type_size(ncclDataType_t t) { return t == ncclFloat16 || t == ncclBfloat16 ? 2 : t == ncclFloat32 ? 4 : 8; }

// DEFINE_EMU_NCCL_FAULT=<stall|fail>:<rank>:<n>
struct Fault {
  enum { None, Stall, Fail } what = None;
  int rank = -1;
  std::int64_t at = 0;
};
Fault read_fault() {
  Fault f;
  const char* v = std::getenv("DEFINE_EMU_NCCL_FAULT");
  if (!v || !*v) return f;
  char kind[8] = {};
  int rank = -1;
  long long at = 0;
  if (std::sscanf(v, "%7[a-z]:%d:%lld", kind, &rank, &at) != 3 || at < 1 ||
      (std::strcmp(kind, "stall") != 0 && std::strcmp(kind, "fail") != 0))
    fail("distributed", "DEFINE_EMU_NCCL_FAULT='{}': expected stall:<rank>:<n> or fail:<rank>:<n> with n >= 1", v);
  f.what = std::strcmp(kind, "stall") == 0 ? Fault::Stall : Fault::Fail;
  f.rank = rank;
  f.at = at;
  return f;
}

std::string& last_error_without_comm() {
  static std::string e;
  return e;
}

}  // namespace

// What the communicator's queued collectives share: they may outlive an aborted communicator in
// their stream's queue, and then complete at once without doing anything.
struct CommState {
  MPI_Comm mpi = MPI_COMM_NULL;
  int rank = 0, nranks = 1;
  std::int64_t issued = 0;     // collectives enqueued (their numbers on this communicator)
  std::int64_t in_flight = 0;  // enqueued and not complete
  ncclResult_t async_error = ncclSuccess;
  std::string last_error;
  bool aborted = false;
  Fault fault;

  void set_error(ncclResult_t r, std::string message) {
    if (async_error != ncclSuccess) return;  // the first error is the one to report
    async_error = r;
    last_error = std::move(message);
  }
};

struct EmuComm {
  std::shared_ptr<CommState> state;
};

namespace {

// One collective as deferred stream work: the ranks first compare descriptors (non-blocking
// all-gather), then the MPI collective runs; each advance() tests without blocking.
class CollectiveWork final : public cuda_emu::StreamWork {
 public:
  struct Args {
    Kind kind;
    const void* send;
    void* recv;
    std::size_t count;
    ncclDataType_t type;
    int root;
  };
  CollectiveWork(std::shared_ptr<CommState> s, Args a, std::int64_t number)
      : s_(std::move(s)), a_(a), number_(number) {}

  bool advance() override {
    CommState& s = *s_;
    if (s.aborted || s.async_error != ncclSuccess) return finish();  // dropped
    try {
      if (phase_ == Phase::Start) {
        if (s.fault.what != Fault::None && s.fault.rank == s.rank && s.fault.at == number_) {
          if (s.fault.what == Fault::Stall) return false;  // never starts: the other ranks wait
          s.set_error(ncclSystemError, "a failure planted by DEFINE_EMU_NCCL_FAULT");
          return finish();
        }
        mine_ = {number_, static_cast<std::int64_t>(a_.kind), static_cast<std::int64_t>(a_.count),
                 static_cast<std::int64_t>(a_.type), a_.root};
        all_.assign(mine_.size() * static_cast<std::size_t>(s.nranks), 0);
        check_mpi(MPI_Iallgather(mine_.data(), static_cast<int>(mine_.size()), MPI_INT64_T, all_.data(),
                                 static_cast<int>(mine_.size()), MPI_INT64_T, s.mpi, &req_),
                  "MPI_Iallgather");
        phase_ = Phase::Compare;
        return false;  // a collective takes time: at least one query finds it not ready
      }
      if (phase_ == Phase::Compare) {
        if (!test()) return false;
        if (!same_on_every_rank()) return finish();
        start_collective();
        phase_ = Phase::Run;
        return false;
      }
      if (!test()) return false;
      return finish();
    } catch (const std::exception& e) {
      s.set_error(ncclSystemError, fmt::format("rank {}: {} #{}: {}", s.rank,
                                               kind_name(static_cast<std::int64_t>(a_.kind)), number_, e.what()));
      return finish();
    }
  }

 private:
  enum class Phase { Start, Compare, Run };

  bool finish() {
    if (!done_) {
      done_ = true;
      --s_->in_flight;
    }
    return true;
  }
  bool test() {
    int flag = 0;
    check_mpi(MPI_Test(&req_, &flag, MPI_STATUS_IGNORE), "MPI_Test");
    return flag != 0;
  }
  std::string describe(const std::int64_t* d) const {
    std::string s = fmt::format("{} #{} of {} {}", kind_name(d[1]), d[0], d[2], type_name(d[3]));
    if (static_cast<Kind>(d[1]) == Kind::Broadcast) s += fmt::format(" from root {}", d[4]);
    return s;
  }
  bool same_on_every_rank() {
    const std::size_t n = mine_.size();
    for (int r = 0; r < s_->nranks; ++r) {
      const std::int64_t* theirs = all_.data() + n * static_cast<std::size_t>(r);
      if (std::equal(mine_.begin(), mine_.end(), theirs)) continue;
      const int lo = std::min(r, s_->rank), hi = std::max(r, s_->rank);
      const std::int64_t* dlo = lo == s_->rank ? mine_.data() : theirs;
      const std::int64_t* dhi = hi == s_->rank ? mine_.data() : theirs;
      s_->set_error(ncclInvalidUsage,
                    fmt::format("collectives issued in different orders: rank {} issued {} where rank {} issued {} "
                                "(on GPUs this hangs or mixes the sums of different tensors)",
                                lo, describe(dlo), hi, describe(dhi)));
      return false;
    }
    return true;
  }
  void start_collective() {
    const MPI_Datatype t = mpi_type(a_.type);
    const int count = static_cast<int>(a_.count);
    switch (a_.kind) {
      case Kind::AllReduce:
        check_mpi(MPI_Iallreduce(a_.send == a_.recv ? MPI_IN_PLACE : a_.send, a_.recv, count, t, sum_op(a_.type),
                                 s_->mpi, &req_),
                  "MPI_Iallreduce");
        break;
      case Kind::Broadcast:
        if (s_->rank == a_.root && a_.send != a_.recv) std::memcpy(a_.recv, a_.send, a_.count * type_size(a_.type));
        check_mpi(MPI_Ibcast(a_.recv, count, t, a_.root, s_->mpi, &req_), "MPI_Ibcast");
        break;
      case Kind::AllGather:
        check_mpi(MPI_Iallgather(a_.send, count, t, a_.recv, count, t, s_->mpi, &req_), "MPI_Iallgather");
        break;
    }
  }

  std::shared_ptr<CommState> s_;
  Args a_;
  std::int64_t number_;
  Phase phase_ = Phase::Start;
  MPI_Request req_ = MPI_REQUEST_NULL;
  std::vector<std::int64_t> mine_, all_;
  bool done_ = false;
};

ncclResult_t usage_error(CommState* s, std::string message) {
  (s ? s->last_error : last_error_without_comm()) = std::move(message);
  return ncclInvalidUsage;
}

ncclResult_t enqueue(ncclComm_t comm, CollectiveWork::Args a, Stream stream) {
  if (!comm || comm->state->aborted) return ncclInvalidArgument;
  CommState& s = *comm->state;
  auto* cuda_stream = static_cast<cudaStream_t>(stream);
  const std::int64_t number = s.issued + 1;
  ++s.in_flight;  // counted down by the work when it completes (at once on the legacy stream)
  if (!cuda_emu::enqueue(cuda_stream, std::make_unique<CollectiveWork>(comm->state, a, number),
                         /*needs_legacy_order=*/true)) {
    --s.in_flight;
    return usage_error(&s, fmt::format("rank {}: {} #{} was issued on a stream that has not waited for the kernels "
                                       "queued before it on the default stream (no cudaStreamWaitEvent for them): on "
                                       "a GPU it could read its input before they have written it",
                                       s.rank, kind_name(static_cast<std::int64_t>(a.kind)), number));
  }
  s.issued = number;
  return ncclSuccess;
}

}  // namespace

const char* ncclGetErrorString(ncclResult_t r) {
  switch (r) {
    case ncclSuccess:
      return "no error";
    case ncclUnhandledCudaError:
      return "unhandled cuda error (emulated NCCL)";
    case ncclSystemError:
      return "system error (emulated NCCL over MPI: a rank died, hung or MPI failed)";
    case ncclInternalError:
      return "internal error (emulated NCCL)";
    case ncclInvalidArgument:
      return "invalid argument (emulated NCCL)";
    case ncclInvalidUsage:
      return "invalid usage (emulated NCCL)";
    case ncclRemoteError:
      return "remote process exited or there was a network error (emulated NCCL)";
    case ncclInProgress:
      return "NCCL operation in progress (emulated NCCL)";
  }
  return "unknown result (emulated NCCL)";
}

const char* ncclGetLastError(ncclComm_t comm) {
  return comm ? comm->state->last_error.c_str() : last_error_without_comm().c_str();
}

ncclResult_t ncclGetUniqueId(ncclUniqueId* id) {
  if (!id) return ncclInvalidArgument;
  std::memset(id->internal, 0, sizeof id->internal);
  std::memcpy(id->internal, kMagic, sizeof kMagic);
  std::random_device rd;
  for (std::size_t i = sizeof kMagic; i < sizeof id->internal; ++i) id->internal[i] = static_cast<char>(rd());
  return ncclSuccess;
}

ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId id, int rank) {
  if (!comm || std::memcmp(id.internal, kMagic, sizeof kMagic) != 0) return ncclInvalidArgument;
  mpi_initialize();
  if (nranks != mpi_world_size() || rank != mpi_world_rank())
    return usage_error(nullptr, "one communicator per process spanning the MPI world");
  auto state = std::make_shared<CommState>();
  state->rank = rank;
  state->nranks = nranks;
  state->fault = read_fault();
  if (MPI_Comm_dup(MPI_COMM_WORLD, &state->mpi) != MPI_SUCCESS) return ncclSystemError;
  *comm = new EmuComm{std::move(state)};
  return ncclSuccess;
}

ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  if (!comm) return ncclInvalidArgument;
  const CommState& s = *comm->state;
  if (s.in_flight > 0 || s.async_error != ncclSuccess) {
    std::fprintf(stderr,
                 "emulated NCCL: rank %d: ncclCommDestroy on a communicator with %lld collective(s) in flight%s: the "
                 "library would block here for ever; an error path must call ncclCommAbort\n",
                 s.rank, static_cast<long long>(s.in_flight),
                 s.async_error != ncclSuccess ? " after an asynchronous error" : "");
    std::fflush(stderr);
    std::abort();
  }
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Comm_free(&comm->state->mpi);
  delete comm;
  return ncclSuccess;
}

ncclResult_t ncclCommAbort(ncclComm_t comm) {
  if (!comm) return ncclInvalidArgument;
  // The MPI communicator is left as it is: a collective of it may still be pending, waiting for a
  // rank that is gone, and the job ends soon after an abort anyway.
  comm->state->aborted = true;
  delete comm;
  return ncclSuccess;
}

ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* async_error) {
  if (!comm || !async_error) return ncclInvalidArgument;
  *async_error = comm->state->async_error;
  return ncclSuccess;
}

ncclResult_t ncclAllReduce(const void* send, void* recv, std::size_t count, ncclDataType_t type, ncclRedOp_t op,
                           ncclComm_t comm, Stream stream) {
  if (!comm || op != ncclSum || mpi_type(type) == MPI_DATATYPE_NULL) return ncclInvalidArgument;
  return enqueue(comm, {Kind::AllReduce, send, recv, count, type, 0}, stream);
}

ncclResult_t ncclBroadcast(const void* send, void* recv, std::size_t count, ncclDataType_t type, int root,
                           ncclComm_t comm, Stream stream) {
  if (!comm || root < 0 || root >= comm->state->nranks || mpi_type(type) == MPI_DATATYPE_NULL)
    return ncclInvalidArgument;
  return enqueue(comm, {Kind::Broadcast, send, recv, count, type, root}, stream);
}

ncclResult_t ncclAllGather(const void* send, void* recv, std::size_t count, ncclDataType_t type, ncclComm_t comm,
                           Stream stream) {
  if (!comm || mpi_type(type) == MPI_DATATYPE_NULL) return ncclInvalidArgument;
  return enqueue(comm, {Kind::AllGather, send, recv, count, type, 0}, stream);
}

}  // namespace define::dist::nccl_emu
