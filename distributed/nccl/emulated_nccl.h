// The few NCCL entry points define uses, emulated over MPI for the emulated GPU: with them the NCCL
// communicator's calling code (distributed/nccl/communicator.inc: unique id over MPI, ncclCommInitRank,
// collectives on the stream, completion events) runs in CI on emu devices, as it would on GPUs.
// One process per rank, one communicator spanning the MPI world (what define creates); the
// emulated device's memory is host memory, and its streams run nothing asynchronously, so a
// collective is complete when the call returns. Names live in this namespace, never the global
// one, so a build that also links the real NCCL keeps both.
#pragma once

#include <cstddef>

namespace define::dist::nccl_emu {

enum ncclResult_t {
  ncclSuccess = 0,
  ncclUnhandledCudaError = 1,
  ncclSystemError = 2,
  ncclInternalError = 3,
  ncclInvalidArgument = 4,
  ncclInvalidUsage = 5
};
enum ncclDataType_t { ncclInt64 = 4, ncclFloat32 = 7, ncclFloat64 = 8 };
enum ncclRedOp_t { ncclSum = 0 };
struct ncclUniqueId {
  char internal[128];
};
struct EmuComm;
using ncclComm_t = EmuComm*;
using Stream = void*;  // the emulator's cudaStream_t converts to it

const char* ncclGetErrorString(ncclResult_t r);
ncclResult_t ncclGetUniqueId(ncclUniqueId* id);
ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId id, int rank);
ncclResult_t ncclCommDestroy(ncclComm_t comm);
ncclResult_t ncclAllReduce(const void* send, void* recv, std::size_t count, ncclDataType_t type, ncclRedOp_t op,
                           ncclComm_t comm, Stream stream);
ncclResult_t ncclBroadcast(const void* send, void* recv, std::size_t count, ncclDataType_t type, int root,
                           ncclComm_t comm, Stream stream);
ncclResult_t ncclAllGather(const void* send, void* recv, std::size_t count, ncclDataType_t type, ncclComm_t comm,
                           Stream stream);

}  // namespace define::dist::nccl_emu
