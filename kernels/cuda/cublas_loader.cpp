// cuBLAS loaded when the first GPU GEMM needs it, not when define starts.
//
// Why: linked as a shared library, libcublas pulls in libcublasLt, whose start-up relocations
// alone put about 120 MB in every define process's resident memory, CPU-only runs included (a
// `define --help` measured 227 MB resident, 121 MB of it libcublasLt). So the GPU build does not
// link cuBLAS; it links this file, which defines the few cuBLAS entry points kernels/cuda/matmul.cu
// calls and forwards each to the real one, looked up with dlopen / dlsym on first use.
//
// Where the library is looked for: its soname (libcublas.so.<major> of the toolkit define was
// built with, found through LD_LIBRARY_PATH, the binary's run path and the system's cache), then
// the toolkit's library folder of the build. When neither loads, the calls return
// CUBLAS_STATUS_NOT_INITIALIZED, and cublas_load_error() says why (matmul.cu puts it in its error).
#include "kernels/cuda/cublas_loader.h"

#include <dlfcn.h>

#include <mutex>
#include <string>

#include <cublas_v2.h>

#ifndef DEFINE_CUBLAS_DIR
#define DEFINE_CUBLAS_DIR ""
#endif

namespace define::kernels::cuda {
namespace {

#define DEFINE_STR2(x) #x
#define DEFINE_STR(x) DEFINE_STR2(x)
constexpr const char* kSoname = "libcublas.so." DEFINE_STR(CUBLAS_VER_MAJOR);

struct Library {
  void* handle = nullptr;
  std::string error;
};

const Library& library() {
  static Library lib;
  static std::once_flag once;
  std::call_once(once, [] {
    lib.handle = ::dlopen(kSoname, RTLD_NOW | RTLD_LOCAL);
    if (lib.handle) return;
    std::string tried = std::string(kSoname) + " (" + ::dlerror() + ")";
    const std::string dir = DEFINE_CUBLAS_DIR;
    if (!dir.empty()) {
      const std::string path = dir + "/" + kSoname;
      lib.handle = ::dlopen(path.c_str(), RTLD_NOW | RTLD_LOCAL);
      if (lib.handle) return;
      tried += ", " + path + " (" + ::dlerror() + ")";
    }
    lib.error = "cuBLAS could not be loaded: tried " + tried;
  });
  return lib;
}

// The real function `name` of type F, or nullptr (library or symbol missing).
template <typename F>
F lookup(const char* name) {
  const Library& lib = library();
  return lib.handle ? reinterpret_cast<F>(::dlsym(lib.handle, name)) : nullptr;
}

}  // namespace

bool cublas_loaded() { return library().handle != nullptr; }
const std::string& cublas_load_error() { return library().error; }

}  // namespace define::kernels::cuda

using define::kernels::cuda::lookup;

// Each entry point: the real function, looked up once, or CUBLAS_STATUS_NOT_INITIALIZED.
#define DEFINE_CUBLAS_FORWARD(name, params, args)                                  \
  extern "C" cublasStatus_t CUBLASWINAPI name params {                             \
    static const auto real = lookup<cublasStatus_t(CUBLASWINAPI*) params>(#name);  \
    return real ? real args : CUBLAS_STATUS_NOT_INITIALIZED;                       \
  }

DEFINE_CUBLAS_FORWARD(cublasCreate_v2, (cublasHandle_t * handle), (handle))
DEFINE_CUBLAS_FORWARD(cublasSetMathMode, (cublasHandle_t handle, cublasMath_t mode), (handle, mode))
DEFINE_CUBLAS_FORWARD(cublasSgemm_v2,
                      (cublasHandle_t handle, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                       const float* alpha, const float* a, int lda, const float* b, int ldb, const float* beta,
                       float* c, int ldc),
                      (handle, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc))
DEFINE_CUBLAS_FORWARD(cublasDgemm_v2,
                      (cublasHandle_t handle, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                       const double* alpha, const double* a, int lda, const double* b, int ldb, const double* beta,
                       double* c, int ldc),
                      (handle, ta, tb, m, n, k, alpha, a, lda, b, ldb, beta, c, ldc))
DEFINE_CUBLAS_FORWARD(cublasSgemmStridedBatched,
                      (cublasHandle_t handle, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                       const float* alpha, const float* a, int lda, long long stride_a, const float* b, int ldb,
                       long long stride_b, const float* beta, float* c, int ldc, long long stride_c, int count),
                      (handle, ta, tb, m, n, k, alpha, a, lda, stride_a, b, ldb, stride_b, beta, c, ldc, stride_c,
                       count))
DEFINE_CUBLAS_FORWARD(cublasDgemmStridedBatched,
                      (cublasHandle_t handle, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                       const double* alpha, const double* a, int lda, long long stride_a, const double* b, int ldb,
                       long long stride_b, const double* beta, double* c, int ldc, long long stride_c, int count),
                      (handle, ta, tb, m, n, k, alpha, a, lda, stride_a, b, ldb, stride_b, beta, c, ldc, stride_c,
                       count))

DEFINE_CUBLAS_FORWARD(cublasGemmEx,
                      (cublasHandle_t handle, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                       const void* alpha, const void* a, cudaDataType a_type, int lda, const void* b,
                       cudaDataType b_type, int ldb, const void* beta, void* c, cudaDataType c_type, int ldc,
                       cublasComputeType_t compute, cublasGemmAlgo_t algo),
                      (handle, ta, tb, m, n, k, alpha, a, a_type, lda, b, b_type, ldb, beta, c, c_type, ldc, compute,
                       algo))
DEFINE_CUBLAS_FORWARD(cublasGemmStridedBatchedEx,
                      (cublasHandle_t handle, cublasOperation_t ta, cublasOperation_t tb, int m, int n, int k,
                       const void* alpha, const void* a, cudaDataType a_type, int lda, long long stride_a,
                       const void* b, cudaDataType b_type, int ldb, long long stride_b, const void* beta, void* c,
                       cudaDataType c_type, int ldc, long long stride_c, int count, cublasComputeType_t compute,
                       cublasGemmAlgo_t algo),
                      (handle, ta, tb, m, n, k, alpha, a, a_type, lda, stride_a, b, b_type, ldb, stride_b, beta, c,
                       c_type, ldc, stride_c, count, compute, algo))

// The status names, also when the library never loaded (the error path must still say something).
extern "C" const char* CUBLASWINAPI cublasGetStatusName(cublasStatus_t status) {
  static const auto real = lookup<const char*(CUBLASWINAPI*)(cublasStatus_t)>("cublasGetStatusName");
  return real ? real(status) : "CUBLAS_STATUS_NOT_INITIALIZED";
}
extern "C" const char* CUBLASWINAPI cublasGetStatusString(cublasStatus_t status) {
  static const auto real = lookup<const char*(CUBLASWINAPI*)(cublasStatus_t)>("cublasGetStatusString");
  if (real) return real(status);
  return define::kernels::cuda::cublas_load_error().c_str();
}
