// CUDA execution emulator: the cuBLAS entry points the backend's GEMM calls (kernels/cuda/matmul.cu),
// so that its cuBLAS calling code (row-major to column-major mapping, leading dimensions, strided
// batching, per-batch offsets) runs and is tested on the emulated devices. Each GEMM is a plain
// column-major loop on the host (device memory is host memory), synchronous, in the operand type.
//
// What real cuBLAS does and this copies, because calling code can get it wrong:
//   * arguments are validated as documented for cublas<t>gemm and cublas<t>gemmStridedBatched:
//     negative sizes or batch count, an unknown operation, a leading dimension below
//     max(1, rows of the stored matrix), null alpha or beta -> CUBLAS_STATUS_INVALID_VALUE;
//   * a null or destroyed handle -> CUBLAS_STATUS_NOT_INITIALIZED;
//   * a handle belongs to the device current at cublasCreate. Every matrix a call reads or writes
//     must lie inside one cudaMalloc block of that device, and that device must be current; else
//     CUBLAS_STATUS_EXECUTION_FAILED (a GPU would fault, or launch on the wrong device);
//   * alpha and beta are read from host memory (CUBLAS_POINTER_MODE_HOST, the default); beta == 0
//     never reads C (it may hold NaN), alpha == 0 or k == 0 never reads A and B;
//   * CUBLAS_TF32_TENSOR_OP_MATH rounds float operands to TF32 (10-bit mantissa), as tensor cores
//     would, so a handle left in that mode shows up as lost precision.
// cublasGetStatusName / cublasGetStatusString give libcublas's texts; the reason for the last
// failure on this thread, which cuBLAS cannot return, is cuda_emu::cublas_last_problem(), and
// cuda_emu::cublas_calls() counts the GEMM calls per entry point (tests check which one ran).
//
// Linking: libcublas (C linkage) is linked into the same binary as the emulator build, so nothing
// here may define its names. The entry points live in namespace cuda_emu::cublas (helpers in
// cuda_emu::cublas_detail), and the using-directive at the end lets the calling code name them
// unqualified, as it does under nvcc.
#pragma once

#include <algorithm>
#include <atomic>
#include <bit>
#include <cstdint>
#include <mutex>
#include <set>
#include <string>
#include <type_traits>
#include <utility>

#include "cuda_emu/emu_memory.hpp"
#include "cuda_emu/emu_stream.hpp"
#include "cuda_emu/emu_fp16.hpp"
#include "cuda_emu/emu_types.hpp"

namespace cuda_emu::cublas {

// Values as in cublas_api.h. A fixed underlying type keeps any int a valid value: calling code
// may pass one that cuBLAS must refuse.
enum cublasStatus_t : int {
  CUBLAS_STATUS_SUCCESS = 0,
  CUBLAS_STATUS_NOT_INITIALIZED = 1,
  CUBLAS_STATUS_ALLOC_FAILED = 3,
  CUBLAS_STATUS_INVALID_VALUE = 7,
  CUBLAS_STATUS_ARCH_MISMATCH = 8,
  CUBLAS_STATUS_MAPPING_ERROR = 11,
  CUBLAS_STATUS_EXECUTION_FAILED = 13,
  CUBLAS_STATUS_INTERNAL_ERROR = 14,
  CUBLAS_STATUS_NOT_SUPPORTED = 15,
  CUBLAS_STATUS_LICENSE_ERROR = 16,
};

enum cublasOperation_t : int {
  CUBLAS_OP_N = 0,
  CUBLAS_OP_T = 1,
  CUBLAS_OP_C = 2,  // the transpose, for real types
  CUBLAS_OP_HERMITAN = 2,
  CUBLAS_OP_CONJG = 3,  // not supported by cuBLAS's GEMMs either
};

enum cublasMath_t : int {
  CUBLAS_DEFAULT_MATH = 0,
  CUBLAS_TENSOR_OP_MATH = 1,
  CUBLAS_PEDANTIC_MATH = 2,
  CUBLAS_TF32_TENSOR_OP_MATH = 3,
  CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION = 16,
};

// library_types.h's data types and cublas_api.h's compute types and algorithms, as far as the
// Ex entry points below accept them.
enum cudaDataType_t : int { CUDA_R_32F = 0, CUDA_R_64F = 1, CUDA_R_16F = 2, CUDA_R_16BF = 14 };
using cudaDataType = cudaDataType_t;
enum cublasComputeType_t : int {
  CUBLAS_COMPUTE_16F = 64,
  CUBLAS_COMPUTE_32F = 68,
  CUBLAS_COMPUTE_32F_FAST_16F = 74,
  CUBLAS_COMPUTE_32F_FAST_16BF = 75,
  CUBLAS_COMPUTE_32F_FAST_TF32 = 77,
  CUBLAS_COMPUTE_64F = 70,
};
enum cublasGemmAlgo_t : int { CUBLAS_GEMM_DEFAULT = -1, CUBLAS_GEMM_DEFAULT_TENSOR_OP = 99 };

struct cublasContext {
  int device = 0;
  cudaStream_t stream = nullptr;
  cublasMath_t math = CUBLAS_DEFAULT_MATH;
};
using cublasHandle_t = cublasContext*;

}  // namespace cuda_emu::cublas

// Not nested in cuda_emu::cublas: the using-directive below would make its names global too.
namespace cuda_emu::cublas_detail {

using namespace ::cuda_emu::cublas;

// The live handles: a destroyed or never-created one is refused without being dereferenced.
struct HandleRegistry {
  std::mutex mu;
  std::set<const cublasContext*> live;
};
inline HandleRegistry& registry() {
  static auto* r = new HandleRegistry();  // leaked: handles may be used from static destructors
  return *r;
}
inline bool is_live(cublasHandle_t h) {
  HandleRegistry& r = registry();
  const std::lock_guard<std::mutex> lock(r.mu);
  return h != nullptr && r.live.count(h) != 0;
}

inline std::string& last_problem() {
  thread_local std::string problem;
  return problem;
}
inline cublasStatus_t refuse(cublasStatus_t status, std::string why) {
  last_problem() = std::move(why);
  return status;
}

// Successful GEMM calls by entry point, all threads (cuda_emu::cublas_calls()).
struct CallCounters {
  std::atomic<long> gemm{0}, gemm_strided_batched{0}, gemm_ex{0};
};
inline CallCounters& call_counters() {
  static CallCounters counters;
  return counters;
}

inline cublasStatus_t counted(cublasStatus_t status, std::atomic<long>& calls) {
  if (status == CUBLAS_STATUS_SUCCESS) ++calls;
  return status;
}

inline cublasStatus_t not_initialized(const char* call) {
  return refuse(CUBLAS_STATUS_NOT_INITIALIZED,
                ::cuda_emu::detail::cat(call, ": the handle is null or destroyed (create it with cublasCreate)"));
}

inline bool valid_op(cublasOperation_t op) { return op == CUBLAS_OP_N || op == CUBLAS_OP_T || op == CUBLAS_OP_C; }

// Nearest TF32 value (8-bit exponent, 10-bit mantissa; ties to even), as a tensor core reads a float.
inline float to_tf32(float x) {
  std::uint32_t u = std::bit_cast<std::uint32_t>(x);
  if ((u & 0x7f800000u) == 0x7f800000u) return x;  // inf, NaN
  u += 0xfffu + ((u >> 13) & 1u);
  return std::bit_cast<float>(u & 0xffffe000u);
}

// An operand as the math mode reads it, in the compute type S: floats are rounded to TF32 in
// that mode; doubles and 16-bit values (exact in float) never are.
template <typename S, typename T>
S operand(T v, bool tf32) {
  if constexpr (std::is_same_v<T, float>) return tf32 ? to_tf32(v) : v;
  (void)tf32;
  return static_cast<S>(v);
}

// One stored operand of a GEMM: a column-major rows x cols matrix with leading dimension ld, for
// each batch entry i at data + i * stride.
template <typename T>
struct Stored {
  const char* name;
  const T* data;
  std::int64_t rows, cols, ld, stride;
};

// Empty when every batch entry of m lies inside one cudaMalloc block of `device`, else why not.
template <typename T>
std::string outside_device(const char* call, const Stored<T>& m, int count, int device) {
  const std::int64_t elements = (m.cols - 1) * m.ld + m.rows;
  const std::size_t bytes = static_cast<std::size_t>(elements) * sizeof(T);
  ::cuda_emu::detail::MemoryLedger& l = ::cuda_emu::detail::ledger();
  for (int i = 0; i < count; ++i) {
    const T* first = m.data + static_cast<std::int64_t>(i) * m.stride;
    const auto a = reinterpret_cast<std::uintptr_t>(first);
    int owner = -1;
    bool inside = false;
    {
      const std::lock_guard<std::mutex> lock(l.mu);
      auto it = l.blocks.upper_bound(a);
      if (it != l.blocks.begin()) {
        --it;
        if (a < it->first + it->second.size) {
          owner = it->second.device;
          inside = a + bytes <= it->first + it->second.size;
        }
      }
    }
    const std::string where = ::cuda_emu::detail::cat(call, ": ", m.name, " of batch entry ", i, " (", m.rows, " x ",
                                                      m.cols, ", ld ", m.ld, ")");
    if (owner < 0) return where + " is not in device memory (a GPU would fault)";
    if (owner != device)
      return ::cuda_emu::detail::cat(where, " is in the memory of device ", owner, " but the handle belongs to device ",
                                     device, " (a GPU would fault: use a handle created on the data's device)");
    if (!inside) return where + " runs past the end of its device allocation (a GPU would fault)";
  }
  return {};
}

inline std::string check_size(const char* call, const char* name, std::int64_t value, std::int64_t least) {
  if (value >= least) return {};
  return ::cuda_emu::detail::cat(call, ": ", name, " = ", value, " is below ", least);
}

// cublas<t>gemm, cublas<t>gemmStridedBatched and their Ex forms: for every batch entry i,
// C_i = alpha op(A_i) op(B_i) + beta C_i with A_i = a + i * stride_a etc., column-major. T is the
// stored type, S the compute type (alpha, beta and the sum): T itself for S/D gemm; float for
// 16-bit operands, which are read exactly, multiplied and summed in float, and rounded once.
template <typename T, typename S = T>
cublasStatus_t gemm(const char* call, cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m,
                    int n, int k, const S* alpha, const T* a, int lda, long long stride_a, const T* b, int ldb,
                    long long stride_b, const S* beta, T* c, int ldc, long long stride_c, int count) {
  using ::cuda_emu::detail::cat;
  if (!is_live(handle)) return not_initialized(call);
  if (!valid_op(transa))
    return refuse(CUBLAS_STATUS_INVALID_VALUE, cat(call, ": transa = ", int(transa), " is no operation"));
  if (!valid_op(transb))
    return refuse(CUBLAS_STATUS_INVALID_VALUE, cat(call, ": transb = ", int(transb), " is no operation"));
  const bool ta = transa != CUBLAS_OP_N, tb = transb != CUBLAS_OP_N;
  // The stored matrices: A is m x k (k x m when transposed), B is k x n (n x k), C is m x n.
  const Stored<T> sa{"A", a, ta ? k : m, ta ? m : k, lda, stride_a};
  const Stored<T> sb{"B", b, tb ? n : k, tb ? k : n, ldb, stride_b};
  const Stored<T> sc{"C", c, m, n, ldc, stride_c};
  for (const std::string& bad : {check_size(call, "m", m, 0), check_size(call, "n", n, 0), check_size(call, "k", k, 0),
                                 check_size(call, "batchCount", count, 0),
                                 check_size(call, ta ? "lda (op(A) transposed: rows of A = k)" : "lda (rows of A = m)",
                                            lda, std::max<std::int64_t>(1, sa.rows)),
                                 check_size(call, tb ? "ldb (op(B) transposed: rows of B = n)" : "ldb (rows of B = k)",
                                            ldb, std::max<std::int64_t>(1, sb.rows)),
                                 check_size(call, "ldc (rows of C = m)", ldc, std::max<std::int64_t>(1, m))})
    if (!bad.empty()) return refuse(CUBLAS_STATUS_INVALID_VALUE, bad);
  if (alpha == nullptr || beta == nullptr)
    return refuse(CUBLAS_STATUS_INVALID_VALUE, cat(call, ": alpha and beta must point to host scalars"));
  if (m == 0 || n == 0 || count == 0) return CUBLAS_STATUS_SUCCESS;

  const int device = ::cuda_emu::detail::current_device();
  if (device != handle->device)
    return refuse(CUBLAS_STATUS_EXECUTION_FAILED,
                  cat(call, ": the current device is ", device, " but the handle was created on device ",
                      handle->device, " (make the handle's device current first)"));
  const S al = *alpha, be = *beta;
  const bool reads_ab = k > 0 && al != S(0);
  std::string outside = reads_ab ? outside_device(call, sa, count, handle->device) : std::string();
  if (outside.empty() && reads_ab) outside = outside_device(call, sb, count, handle->device);
  if (outside.empty()) outside = outside_device(call, sc, count, handle->device);
  if (!outside.empty()) return refuse(CUBLAS_STATUS_EXECUTION_FAILED, std::move(outside));

  const bool tf32 = (handle->math & 0xf) == CUBLAS_TF32_TENSOR_OP_MATH;
  ::cuda_emu::detail::before_synchronous_op(handle->stream);  // stream order (emu_stream.hpp)
  if (::cuda_emu::config().dry_run) return CUBLAS_STATUS_SUCCESS;
  for (int batch = 0; batch < count; ++batch) {
    const T* ab = a + batch * stride_a;
    const T* bb = b + batch * stride_b;
    T* cb = c + batch * stride_c;
    for (std::int64_t j = 0; j < n; ++j) {
      for (std::int64_t i = 0; i < m; ++i) {
        S sum = S(0);
        if (reads_ab)
          for (std::int64_t l = 0; l < k; ++l)
            sum += operand<S>(ta ? ab[l + i * lda] : ab[i + l * lda], tf32) *
                   operand<S>(tb ? bb[j + l * ldb] : bb[l + j * ldb], tf32);
        T& dst = cb[i + j * ldc];
        dst = T(be == S(0) ? al * sum : al * sum + be * static_cast<S>(dst));
      }
    }
  }
  return CUBLAS_STATUS_SUCCESS;
}

}  // namespace cuda_emu::cublas_detail

namespace cuda_emu::cublas {

inline cublasStatus_t cublasCreate(cublasHandle_t* handle) {
  if (handle == nullptr) return cublas_detail::refuse(CUBLAS_STATUS_INVALID_VALUE, "cublasCreate: handle is null");
  auto* context = new cublasContext{};
  context->device = ::cuda_emu::detail::current_device();
  {
    cublas_detail::HandleRegistry& r = cublas_detail::registry();
    const std::lock_guard<std::mutex> lock(r.mu);
    r.live.insert(context);
  }
  *handle = context;
  return CUBLAS_STATUS_SUCCESS;
}

inline cublasStatus_t cublasDestroy(cublasHandle_t handle) {
  {
    cublas_detail::HandleRegistry& r = cublas_detail::registry();
    const std::lock_guard<std::mutex> lock(r.mu);
    if (handle == nullptr || r.live.erase(handle) == 0) return cublas_detail::not_initialized("cublasDestroy");
  }
  delete handle;
  return CUBLAS_STATUS_SUCCESS;
}

// Every call is synchronous: the stream only orders work, and all work is already in order.
inline cublasStatus_t cublasSetStream(cublasHandle_t handle, cudaStream_t stream) {
  if (!cublas_detail::is_live(handle)) return cublas_detail::not_initialized("cublasSetStream");
  handle->stream = stream;
  return CUBLAS_STATUS_SUCCESS;
}
inline cublasStatus_t cublasGetStream(cublasHandle_t handle, cudaStream_t* stream) {
  if (!cublas_detail::is_live(handle)) return cublas_detail::not_initialized("cublasGetStream");
  if (stream == nullptr) return cublas_detail::refuse(CUBLAS_STATUS_INVALID_VALUE, "cublasGetStream: stream is null");
  *stream = handle->stream;
  return CUBLAS_STATUS_SUCCESS;
}

inline cublasStatus_t cublasSetMathMode(cublasHandle_t handle, cublasMath_t mode) {
  if (!cublas_detail::is_live(handle)) return cublas_detail::not_initialized("cublasSetMathMode");
  const int base = mode & 0xf, flags = mode & ~0xf;
  if (base > CUBLAS_TF32_TENSOR_OP_MATH || (flags & ~CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION) != 0)
    return cublas_detail::refuse(CUBLAS_STATUS_INVALID_VALUE,
                                 ::cuda_emu::detail::cat("cublasSetMathMode: ", int(mode), " is no math mode"));
  handle->math = mode;
  return CUBLAS_STATUS_SUCCESS;
}
inline cublasStatus_t cublasGetMathMode(cublasHandle_t handle, cublasMath_t* mode) {
  if (!cublas_detail::is_live(handle)) return cublas_detail::not_initialized("cublasGetMathMode");
  if (mode == nullptr) return cublas_detail::refuse(CUBLAS_STATUS_INVALID_VALUE, "cublasGetMathMode: mode is null");
  *mode = handle->math;
  return CUBLAS_STATUS_SUCCESS;
}

inline cublasStatus_t cublasSgemm(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m,
                                  int n, int k, const float* alpha, const float* A, int lda, const float* B, int ldb,
                                  const float* beta, float* C, int ldc) {
  return cublas_detail::counted(cublas_detail::gemm<float>("cublasSgemm", handle, transa, transb, m, n, k, alpha, A,
                                                           lda, 0, B, ldb, 0, beta, C, ldc, 0, 1),
                                cublas_detail::call_counters().gemm);
}
inline cublasStatus_t cublasDgemm(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m,
                                  int n, int k, const double* alpha, const double* A, int lda, const double* B, int ldb,
                                  const double* beta, double* C, int ldc) {
  return cublas_detail::counted(cublas_detail::gemm<double>("cublasDgemm", handle, transa, transb, m, n, k, alpha, A,
                                                            lda, 0, B, ldb, 0, beta, C, ldc, 0, 1),
                                cublas_detail::call_counters().gemm);
}
inline cublasStatus_t cublasSgemmStridedBatched(cublasHandle_t handle, cublasOperation_t transa,
                                                cublasOperation_t transb, int m, int n, int k, const float* alpha,
                                                const float* A, int lda, long long strideA, const float* B, int ldb,
                                                long long strideB, const float* beta, float* C, int ldc,
                                                long long strideC, int batchCount) {
  return cublas_detail::counted(
      cublas_detail::gemm<float>("cublasSgemmStridedBatched", handle, transa, transb, m, n, k, alpha, A, lda, strideA,
                                 B, ldb, strideB, beta, C, ldc, strideC, batchCount),
      cublas_detail::call_counters().gemm_strided_batched);
}
inline cublasStatus_t cublasDgemmStridedBatched(cublasHandle_t handle, cublasOperation_t transa,
                                                cublasOperation_t transb, int m, int n, int k, const double* alpha,
                                                const double* A, int lda, long long strideA, const double* B, int ldb,
                                                long long strideB, const double* beta, double* C, int ldc,
                                                long long strideC, int batchCount) {
  return cublas_detail::counted(
      cublas_detail::gemm<double>("cublasDgemmStridedBatched", handle, transa, transb, m, n, k, alpha, A, lda, strideA,
                                  B, ldb, strideB, beta, C, ldc, strideC, batchCount),
      cublas_detail::call_counters().gemm_strided_batched);
}

// cublasGemmEx / cublasGemmStridedBatchedEx for what the backend calls them with: A, B and C of
// one type (16F, 16BF or 32F) and CUBLAS_COMPUTE_32F, so alpha and beta point to floats. Other
// combinations cuBLAS may accept are refused as CUBLAS_STATUS_NOT_SUPPORTED, naming them: the
// emulator does not guess at their rounding.
inline cublasStatus_t cublasGemmStridedBatchedEx(cublasHandle_t handle, cublasOperation_t transa,
                                                 cublasOperation_t transb, int m, int n, int k, const void* alpha,
                                                 const void* A, cudaDataType_t Atype, int lda, long long strideA,
                                                 const void* B, cudaDataType_t Btype, int ldb, long long strideB,
                                                 const void* beta, void* C, cudaDataType_t Ctype, int ldc,
                                                 long long strideC, int batchCount, cublasComputeType_t computeType,
                                                 cublasGemmAlgo_t algo) {
  using ::cuda_emu::detail::cat;
  const char* call = "cublasGemmStridedBatchedEx";
  if (algo != CUBLAS_GEMM_DEFAULT && algo != CUBLAS_GEMM_DEFAULT_TENSOR_OP)
    return cublas_detail::refuse(CUBLAS_STATUS_INVALID_VALUE, cat(call, ": algo ", int(algo), " is not emulated"));
  if (Atype != Btype || Atype != Ctype || computeType != CUBLAS_COMPUTE_32F ||
      (Atype != CUDA_R_16F && Atype != CUDA_R_16BF && Atype != CUDA_R_32F))
    return cublas_detail::refuse(CUBLAS_STATUS_NOT_SUPPORTED,
                                 cat(call, ": types A ", int(Atype), ", B ", int(Btype), ", C ", int(Ctype),
                                     " with compute type ", int(computeType),
                                     " (emulated: one type of 16F, 16BF or 32F with CUBLAS_COMPUTE_32F)"));
  const auto* al = static_cast<const float*>(alpha);
  const auto* be = static_cast<const float*>(beta);
  auto run = [&](auto tag) {
    using T = decltype(tag);
    return cublas_detail::gemm<T, float>(call, handle, transa, transb, m, n, k, al, static_cast<const T*>(A), lda,
                                         strideA, static_cast<const T*>(B), ldb, strideB, be, static_cast<T*>(C), ldc,
                                         strideC, batchCount);
  };
  const cublasStatus_t status = Atype == CUDA_R_16F    ? run(__half{})
                                : Atype == CUDA_R_16BF ? run(__nv_bfloat16{})
                                                       : run(float{});
  return cublas_detail::counted(status, cublas_detail::call_counters().gemm_ex);
}
inline cublasStatus_t cublasGemmEx(cublasHandle_t handle, cublasOperation_t transa, cublasOperation_t transb, int m,
                                   int n, int k, const void* alpha, const void* A, cudaDataType_t Atype, int lda,
                                   const void* B, cudaDataType_t Btype, int ldb, const void* beta, void* C,
                                   cudaDataType_t Ctype, int ldc, cublasComputeType_t computeType,
                                   cublasGemmAlgo_t algo) {
  return cublasGemmStridedBatchedEx(handle, transa, transb, m, n, k, alpha, A, Atype, lda, 0, B, Btype, ldb, 0, beta,
                                    C, Ctype, ldc, 0, 1, computeType, algo);
}

inline const char* cublasGetStatusName(cublasStatus_t status) {
  switch (status) {
    case CUBLAS_STATUS_SUCCESS: return "CUBLAS_STATUS_SUCCESS";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "CUBLAS_STATUS_NOT_INITIALIZED";
    case CUBLAS_STATUS_ALLOC_FAILED: return "CUBLAS_STATUS_ALLOC_FAILED";
    case CUBLAS_STATUS_INVALID_VALUE: return "CUBLAS_STATUS_INVALID_VALUE";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "CUBLAS_STATUS_ARCH_MISMATCH";
    case CUBLAS_STATUS_MAPPING_ERROR: return "CUBLAS_STATUS_MAPPING_ERROR";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "CUBLAS_STATUS_EXECUTION_FAILED";
    case CUBLAS_STATUS_INTERNAL_ERROR: return "CUBLAS_STATUS_INTERNAL_ERROR";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "CUBLAS_STATUS_NOT_SUPPORTED";
    case CUBLAS_STATUS_LICENSE_ERROR: return "CUBLAS_STATUS_LICENSE_ERROR";
  }
  return "unrecognized status";
}

// libcublas's texts.
inline const char* cublasGetStatusString(cublasStatus_t status) {
  switch (status) {
    case CUBLAS_STATUS_SUCCESS: return "success";
    case CUBLAS_STATUS_NOT_INITIALIZED: return "the library was not initialized";
    case CUBLAS_STATUS_ALLOC_FAILED: return "the resource allocation failed";
    case CUBLAS_STATUS_INVALID_VALUE: return "an unsupported value or parameter was passed to the function";
    case CUBLAS_STATUS_ARCH_MISMATCH: return "the function requires an architectural feature absent from the device";
    case CUBLAS_STATUS_MAPPING_ERROR: return "an access to GPU memory space failed";
    case CUBLAS_STATUS_EXECUTION_FAILED: return "the function failed to launch on the GPU";
    case CUBLAS_STATUS_INTERNAL_ERROR: return "an internal operation failed";
    case CUBLAS_STATUS_NOT_SUPPORTED: return "the requested functionality is not supported";
    case CUBLAS_STATUS_LICENSE_ERROR: return "the license check failed";
  }
  return "unrecognized status";
}

}  // namespace cuda_emu::cublas

namespace cuda_emu {
// Why the last emulated cuBLAS call on this thread failed (a real cuBLAS only returns the status).
inline const std::string& cublas_last_problem() { return cublas_detail::last_problem(); }

// How often the emulated cublas<t>gemm and cublas<t>gemmStridedBatched succeeded so far (all
// threads): lets tests see which entry points the calling code chose.
struct CublasCalls {
  long gemm = 0, gemm_strided_batched = 0, gemm_ex = 0;  // gemm_ex: both Ex entry points
};
inline CublasCalls cublas_calls() {
  const cublas_detail::CallCounters& c = cublas_detail::call_counters();
  return {c.gemm.load(), c.gemm_strided_batched.load(), c.gemm_ex.load()};
}
}  // namespace cuda_emu

using namespace cuda_emu::cublas;  // see "Linking" above
