// cuBLAS is loaded on the first GPU GEMM (kernels/cuda/cublas_loader.cpp says why and how). GPU
// build only.
#pragma once

#include <string>

namespace define::kernels::cuda {

// Loads cuBLAS if it is not loaded yet; true when it is.
bool cublas_loaded();
// Why it could not be loaded (empty when it was).
const std::string& cublas_load_error();

}  // namespace define::kernels::cuda
