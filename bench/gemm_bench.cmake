# gemm_bench compares define::matmul with OpenBLAS sgemm in one run, so it links OpenBLAS
# (libopenblas-openmp-dev: cblas.h and libopenblas). Included by bench/CMakeLists.txt after the
# bench executables are declared.
if(TARGET gemm_bench)
  target_link_libraries(gemm_bench PRIVATE openblas)
endif()
