# The CUDA backend's sources, added to define_kernels (included from the top-level CMakeLists.txt).
#
# Every kernels/cuda/*.cu file is compiled twice:
#   * emulator build, always (the fuzz preset: the host side alone, below): g++ compiles it as C++
#     against the CUDA emulator (cuda_emu/), into namespace cuda_emu. It serves tensors on
#     Device::emu() and is how every kernel is tested on machines without a GPU. A source file has
#     one LANGUAGE for the whole directory, so the emulator copies are generated one-line wrappers
#     (<build>/emu_kernels/<name>.cpp: #include "<name>.cu").
#   * GPU build, when DEFINE_CUDA is ON: nvcc compiles it for CMAKE_CUDA_ARCHITECTURES into
#     namespace cuda (object library define_kernels_cuda, linked into define_kernels), with cuBLAS
#     (loaded on first use, kernels/cuda/cublas_loader.cpp).
include(${PROJECT_SOURCE_DIR}/cuda_emu/emulated_kernels.cmake)

file(GLOB _define_cu CONFIGURE_DEPENDS ${PROJECT_SOURCE_DIR}/kernels/cuda/*.cu)

# Plain C++ host pieces: the caching allocator (tested with a fake raw source), the messages of the
# device-side index checks.
target_sources(define_kernels PRIVATE ${PROJECT_SOURCE_DIR}/kernels/cuda/caching_allocator.cpp
                                      ${PROJECT_SOURCE_DIR}/kernels/cuda/index_error.cpp)

# The fuzz targets read bytes and never launch a kernel: their build keeps the emulated device's host
# side (device.cu: memory, copies, streams; index_check.cu: the index checks' record) and none of
# its kernels, whose arms in the ops raise instead (kernels/backend.h). The kernels were the largest
# part of that build's compile time.
set(_define_emu_cu ${_define_cu})
if(DEFINE_FUZZ)
  set(_define_emu_cu ${PROJECT_SOURCE_DIR}/kernels/cuda/device.cu ${PROJECT_SOURCE_DIR}/kernels/cuda/index_check.cu)
  target_compile_definitions(define_kernels PUBLIC DEFINE_NO_EMULATED_KERNELS)
endif()
set(_define_emu_wrappers)
foreach(_cu ${_define_emu_cu})
  get_filename_component(_name ${_cu} NAME_WE)
  set(_wrapper ${CMAKE_BINARY_DIR}/emu_kernels/${_name}.cpp)
  file(CONFIGURE OUTPUT ${_wrapper} CONTENT "// Generated: the emulator build of kernels/cuda/${_name}.cu\n#include \"kernels/cuda/${_name}.cu\"\n")
  list(APPEND _define_emu_wrappers ${_wrapper})
endforeach()
define_add_emulated_kernels(define_kernels ${_define_emu_wrappers})
# Dependents of define_kernels (tests, tools) link boost.context through it.
target_link_libraries(define_kernels PUBLIC Boost::context)

if(DEFINE_CUDA)
  enable_language(CUDA)
  find_package(CUDAToolkit REQUIRED)
  add_library(define_kernels_cuda OBJECT ${_define_cu})
  # CMake 3.25 has no C++20 dialect flag for nvcc 13 in its tables (CUDA_STANDARD follows the
  # project's CXX_STANDARD 20): tell it.
  set(CMAKE_CUDA20_STANDARD_COMPILE_OPTION "-std=c++20")
  set(CMAKE_CUDA20_EXTENSION_COMPILE_OPTION "-std=c++20")
  target_include_directories(define_kernels_cuda PRIVATE ${PROJECT_SOURCE_DIR})
  # fmt's consteval format strings do not survive nvcc's front end (fmtlib/fmt#3543): under nvcc
  # format strings are checked at run time instead, and FMT_USE_CONSTEXPR=1 keeps fmt's C++20
  # constexpr functions consistent (fmt disables them for nvcc, which then breaks its own bigint).
  target_compile_definitions(define_kernels_cuda PRIVATE FMT_USE_CONSTEXPR=1 FMT_CONSTEVAL= DEFINE_HAS_CUDA_KERNELS)
  target_compile_options(define_kernels_cuda PRIVATE
    $<$<COMPILE_LANGUAGE:CUDA>:-Xcompiler=-Wall,-Wextra,-Wno-unknown-pragmas --expt-relaxed-constexpr -lineinfo>)
  # Arithmetic on a 16-bit value is a compile error, as in the emulator (kernels/cuda/float16.cuh):
  # kernels compute in float.
  target_compile_definitions(define_kernels_cuda PRIVATE __CUDA_NO_HALF_OPERATORS__ __CUDA_NO_BFLOAT16_OPERATORS__)
  # ptxas's register, spill and shared-memory report of every kernel for every architecture
  # (-Xptxas -v), kept beside each object by the launcher for scripts/checks/check-ptxas.sh --build,
  # so the ptxas check reads what the build compiled instead of compiling every kernel again.
  target_compile_options(define_kernels_cuda PRIVATE $<$<COMPILE_LANGUAGE:CUDA>:-Xptxas=-v>)
  set_property(TARGET define_kernels_cuda PROPERTY CUDA_COMPILER_LAUNCHER
               ${PROJECT_SOURCE_DIR}/scripts/checks/ptxas-log.sh ${CMAKE_CUDA_COMPILER_LAUNCHER})
  # cuBLAS is not linked: kernels/cuda/cublas_loader.cpp loads it on the first GPU GEMM, so CPU runs
  # do not carry libcublasLt's ~120 MB of start-up relocations in their resident memory.
  target_sources(define_kernels_cuda PRIVATE ${PROJECT_SOURCE_DIR}/kernels/cuda/cublas_loader.cpp)
  target_compile_definitions(define_kernels_cuda PRIVATE DEFINE_CUBLAS_DIR="${CUDAToolkit_LIBRARY_DIR}")
  target_compile_options(define_kernels_cuda PRIVATE $<$<COMPILE_LANGUAGE:CXX>:-Wall -Wextra>)
  target_link_libraries(define_kernels_cuda PRIVATE fmt::fmt CUDA::cudart_static ${CMAKE_DL_LIBS})
  target_link_libraries(define_kernels PRIVATE define_kernels_cuda)
  target_link_libraries(define_kernels PUBLIC CUDA::cudart_static ${CMAKE_DL_LIBS})
  target_compile_definitions(define_kernels PUBLIC DEFINE_HAS_CUDA_KERNELS)
endif()
