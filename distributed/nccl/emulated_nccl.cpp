#include "distributed/nccl/emulated_nccl.h"

#include <cstring>
#include <random>

#include "core/error.h"
#include "distributed/mpi/runtime.h"

namespace define::dist::nccl_emu {

struct EmuComm {
  MPI_Comm mpi = MPI_COMM_NULL;
  int rank = 0, nranks = 1;
};

namespace {

constexpr char kMagic[] = "define-emulated-nccl";

MPI_Datatype mpi_type(ncclDataType_t t) {
  switch (t) {
    case ncclInt64:
      return MPI_INT64_T;
    case ncclFloat32:
      return MPI_FLOAT;
    case ncclFloat64:
      return MPI_DOUBLE;
  }
  return MPI_DATATYPE_NULL;
}

std::size_t type_size(ncclDataType_t t) { return t == ncclFloat32 ? 4 : 8; }

// MPI errors and timeouts come back as NCCL error codes, as the real library reports its own.
template <typename F>
ncclResult_t guarded(F&& f) {
  try {
    f();
    return ncclSuccess;
  } catch (const std::exception&) {
    return ncclSystemError;
  }
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
      return "invalid usage (emulated NCCL: one communicator per process spanning the MPI world)";
  }
  return "unknown result (emulated NCCL)";
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
  if (nranks != mpi_world_size() || rank != mpi_world_rank()) return ncclInvalidUsage;
  auto* c = new EmuComm{MPI_COMM_NULL, rank, nranks};
  if (MPI_Comm_dup(MPI_COMM_WORLD, &c->mpi) != MPI_SUCCESS) {
    delete c;
    return ncclSystemError;
  }
  *comm = c;
  return ncclSuccess;
}

ncclResult_t ncclCommDestroy(ncclComm_t comm) {
  if (!comm) return ncclInvalidArgument;
  int finalized = 0;
  MPI_Finalized(&finalized);
  if (!finalized) MPI_Comm_free(&comm->mpi);
  delete comm;
  return ncclSuccess;
}

ncclResult_t ncclAllReduce(const void* send, void* recv, std::size_t count, ncclDataType_t type, ncclRedOp_t op,
                           ncclComm_t comm, Stream /*stream*/) {
  if (!comm || op != ncclSum || mpi_type(type) == MPI_DATATYPE_NULL) return ncclInvalidArgument;
  return guarded([&] {
    MPI_Request req;
    check_mpi(MPI_Iallreduce(send == recv ? MPI_IN_PLACE : send, recv, static_cast<int>(count), mpi_type(type), MPI_SUM,
                             comm->mpi, &req),
              "MPI_Iallreduce");
    mpi_wait(req, "emulated ncclAllReduce");
  });
}

ncclResult_t ncclBroadcast(const void* send, void* recv, std::size_t count, ncclDataType_t type, int root,
                           ncclComm_t comm, Stream /*stream*/) {
  if (!comm || root < 0 || root >= comm->nranks || mpi_type(type) == MPI_DATATYPE_NULL) return ncclInvalidArgument;
  return guarded([&] {
    if (comm->rank == root && send != recv) std::memcpy(recv, send, count * type_size(type));
    MPI_Request req;
    check_mpi(MPI_Ibcast(recv, static_cast<int>(count), mpi_type(type), root, comm->mpi, &req), "MPI_Ibcast");
    mpi_wait(req, "emulated ncclBroadcast");
  });
}

ncclResult_t ncclAllGather(const void* send, void* recv, std::size_t count, ncclDataType_t type, ncclComm_t comm,
                           Stream /*stream*/) {
  if (!comm || mpi_type(type) == MPI_DATATYPE_NULL) return ncclInvalidArgument;
  return guarded([&] {
    MPI_Request req;
    check_mpi(MPI_Iallgather(send, static_cast<int>(count), mpi_type(type), recv, static_cast<int>(count),
                             mpi_type(type), comm->mpi, &req),
              "MPI_Iallgather");
    mpi_wait(req, "emulated ncclAllGather");
  });
}

}  // namespace define::dist::nccl_emu
