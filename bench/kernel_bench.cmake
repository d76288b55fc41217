# kernel_bench --profile reads the register counts ptxas reports (kernels/cuda/ptxas-registers.txt)
# from the source tree.
target_compile_definitions(kernel_bench PRIVATE DEFINE_SOURCE_DIR="${PROJECT_SOURCE_DIR}")
