// The NCCL entry points define uses, emulated over MPI for the emulated GPU: with them the NCCL
// communicator's calling code (distributed/nccl/communicator.inc: unique id over MPI,
// ncclCommInitRank, collectives on a communication stream, completion events, asynchronous errors,
// abort) runs in CI on emu devices as it would on GPUs. One process per rank, one communicator
// spanning the MPI world (what define creates). Names live in this namespace, never the global
// one, so a build that also links the real NCCL keeps both.
//
// Stricter than the library where that finds bugs CI could not otherwise see:
//  * A collective is deferred work on its stream (cuda_emu/emu_stream.hpp): it runs only when the
//    stream is made to progress (an event query or synchronisation), and takes a few queries to
//    complete (the first always finds it not ready), so a buffer read before its collective is
//    waited for holds unreduced values.
//  * A collective on a stream that has not waited for the legacy stream's latest work is refused
//    (ncclInvalidUsage): on a GPU it could read its input before the kernels writing it finish.
//  * Before each collective the ranks compare what they issued (the collective, its element count,
//    type and root, its number on the communicator): collectives issued in different orders on two
//    ranks are an asynchronous error naming both, where the library would hang or mix sums.
//  * ncclCommDestroy with collectives in flight or after an error ends the process with a message:
//    the library would block in it (error paths must call ncclCommAbort).
// A fault can be planted for tests with DEFINE_EMU_NCCL_FAULT=<stall|fail>:<rank>:<n>: on that
// rank, the n-th collective of each communicator (counting from 1) never starts (stall) or fails
// with an asynchronous error (fail).
#pragma once

#include <cstddef>

namespace define::dist::nccl_emu {

enum ncclResult_t {
  ncclSuccess = 0,
  ncclUnhandledCudaError = 1,
  ncclSystemError = 2,
  ncclInternalError = 3,
  ncclInvalidArgument = 4,
  ncclInvalidUsage = 5,
  ncclRemoteError = 6,
  ncclInProgress = 7
};
enum ncclDataType_t { ncclInt64 = 4, ncclFloat16 = 6, ncclFloat32 = 7, ncclFloat64 = 8, ncclBfloat16 = 9 };
enum ncclRedOp_t { ncclSum = 0 };
struct ncclUniqueId {
  char internal[128];
};
struct EmuComm;
using ncclComm_t = EmuComm*;
using Stream = void*;  // the emulator's cudaStream_t converts to it

const char* ncclGetErrorString(ncclResult_t r);
// The last error's details on `comm` (or of the last call without one): as the library's.
const char* ncclGetLastError(ncclComm_t comm);
ncclResult_t ncclGetUniqueId(ncclUniqueId* id);
ncclResult_t ncclCommInitRank(ncclComm_t* comm, int nranks, ncclUniqueId id, int rank);
ncclResult_t ncclCommDestroy(ncclComm_t comm);
// Frees the communicator without waiting for its collectives; queued ones are dropped.
ncclResult_t ncclCommAbort(ncclComm_t comm);
ncclResult_t ncclCommGetAsyncError(ncclComm_t comm, ncclResult_t* async_error);
ncclResult_t ncclAllReduce(const void* send, void* recv, std::size_t count, ncclDataType_t type, ncclRedOp_t op,
                           ncclComm_t comm, Stream stream);
ncclResult_t ncclBroadcast(const void* send, void* recv, std::size_t count, ncclDataType_t type, int root,
                           ncclComm_t comm, Stream stream);
ncclResult_t ncclAllGather(const void* send, void* recv, std::size_t count, ncclDataType_t type, ncclComm_t comm,
                           Stream stream);

}  // namespace define::dist::nccl_emu
