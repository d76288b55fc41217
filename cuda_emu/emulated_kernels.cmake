# define_add_emulated_kernels(<target> <file>...)
#
# Adds CUDA kernel files (.cu) to <target>, compiled by the C++ compiler against the header-only CPU
# emulator (cuda_emu/cuda_emu.hpp, reached through kernels/cuda/cuda_compat.cuh), and links what
# the emulator needs (boost.context for the fibers, pthread for the block pool).
#   * .cu files get LANGUAGE CXX (CMake then passes -x c++ to g++);
#   * -Wno-unknown-pragmas: `#pragma unroll` means nothing to g++;
#   * at least -O1, even in Debug: the emulator runtime is compiled into each kernel file, and -O0
#     makes it 5-10x slower; full debug information (-g) in Debug only, line tables (-g1) otherwise:
#     with the emulator's templates inlined into every kernel, -g made these the slowest files to
#     compile (under the sanitizers about 1.7x the time of -g1), and backtraces need only lines;
#   * -O1 under the sanitizers (the asan preset): with ASan and UBSan a kernel file takes about 1.5x
#     as long to compile at -O2 as at -O1, and these files were a third of that preset's build;
#   * in the fuzz preset (the device's host side alone: kernels/cuda/sources.cmake), -O0 and no
#     instrumentation at all: its targets never run a kernel;
#   * -ffp-contract=off: every multiply and add rounded as the source writes it. With -march=native
#     g++ fuses a * b + c into an FMA where its optimiser happens to see the pair, and that changes
#     with the code around it: two instantiations of one kernel (float inputs, and 16-bit inputs
#     widened in registers) summed the same terms in the same order and differed by a few ulps,
#     and an edit elsewhere in a kernel file changed a result it did not touch. (nvcc fuses too, so
#     the emulator's last bits are not a GPU's; tests compare with tolerances against the references,
#     bit for bit only between runs and paths of the emulator or where no product is rounded.)
#   * no precompiled header (the library's, CMakeLists.txt, is built with other options);
#   * ThreadSanitizer's instrumentation without its run-time library (-fsanitize=thread at compile
#     time only): the emulator's race schedule is that library (cuda_emu/emu_race.hpp). Not in
#     the sanitizer and fuzz builds, whose AddressSanitizer cannot be combined with it; the race
#     schedule there switches threads only at barriers.
# Keep the emulator and all emulated kernels in one executable or shared library: the runner and
# threadIdx are inline globals that must resolve to a single copy.
include_guard(GLOBAL)

find_package(Boost 1.74 CONFIG REQUIRED COMPONENTS context)
find_package(Threads REQUIRED)

function(define_add_emulated_kernels target)
  set(_files ${ARGN})
  set(_cu ${_files})
  list(FILTER _cu INCLUDE REGEX "\\.cu$")
  if(_cu)
    set_source_files_properties(${_cu} TARGET_DIRECTORY ${target} PROPERTIES LANGUAGE CXX)
  endif()
  set(_options -Wno-unknown-pragmas -ffp-contract=off $<IF:$<CONFIG:Debug>,-g,-g1> $<$<CONFIG:Debug>:-O1>)
  if(NOT DEFINE_SANITIZE AND NOT DEFINE_FUZZ)
    if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU")
      # -Wno-tsan: GCC notes that it does not instrument fences (__threadfence); nothing to switch at.
      list(APPEND _options -fsanitize=thread --param=tsan-instrument-func-entry-exit=0 -Wno-tsan)
    elseif(CMAKE_CXX_COMPILER_ID MATCHES "Clang")
      list(APPEND _options -fsanitize=thread -mllvm -tsan-instrument-func-entry-exit=0)
    endif()
  endif()
  if(DEFINE_SANITIZE)
    # UBSan's alignment check, off for the rest of the sanitizer build (CMakeLists.txt): here a
    # misaligned vector load is a GPU fault.
    list(APPEND _options -O1 -fsanitize=alignment)
  endif()
  if(DEFINE_FUZZ)
    # The fuzz targets read bytes on the CPU and never launch a kernel: the emulated device's host
    # side is only linked, so it is compiled unoptimised, without the sanitizers and libFuzzer's
    # coverage.
    list(APPEND _options -O0 -g0 -fno-sanitize=all)
  endif()
  set_source_files_properties(${_files} TARGET_DIRECTORY ${target} PROPERTIES COMPILE_OPTIONS "${_options}"
                              SKIP_PRECOMPILE_HEADERS ON)
  target_sources(${target} PRIVATE ${_files})
  target_link_libraries(${target} PRIVATE Boost::context Threads::Threads)
endfunction()
