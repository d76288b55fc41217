# Host-side CUDA pieces that are plain C++ and therefore build and test without CUDA:
# the caching device allocator (its raw memory source is plugged in by kernels/cuda/device.cpp).
target_sources(define_kernels PRIVATE ${PROJECT_SOURCE_DIR}/kernels/cuda/caching_allocator.cpp)
