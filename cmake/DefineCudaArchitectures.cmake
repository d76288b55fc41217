# Which GPU architectures the nvcc build targets, decided before enable_language(CUDA) so that a
# combination the toolkit cannot build fails here, at configure time, with a message that says what
# to do (a user with a GTX 1080 Ti would otherwise get an obscure compiler-check failure, or a
# binary with no kernel image for the GPU).
#
#   CMAKE_CUDA_ARCHITECTURES given  -> used as given (checked below)
#   GPUs present (nvidia-smi)       -> native: exactly the GPUs of this machine
#   no GPU (build machines, CI)     -> 75 80 90 (2080 Ti class and newer)
#
# CUDA 13 dropped sm_61 and older (Pascal: GTX 1080 Ti): asking it for one is a configure error
# telling the user to build with CUDA 12.
function(define_choose_cuda_architectures)
  if(NOT CMAKE_CUDA_COMPILER)
    message(FATAL_ERROR "define: DEFINE_CUDA=ON but no nvcc was found (put it on PATH or set "
                        "CMAKE_CUDA_COMPILER), or configure with -DDEFINE_CUDA=OFF")
  endif()
  execute_process(COMMAND ${CMAKE_CUDA_COMPILER} --version OUTPUT_VARIABLE _out ERROR_QUIET)
  string(REGEX MATCH "release ([0-9]+)\\.([0-9]+)" _ "${_out}")
  set(_major "${CMAKE_MATCH_1}")
  set(_gpu_caps "")
  find_program(_smi nvidia-smi)
  if(_smi)
    execute_process(COMMAND ${_smi} --query-gpu=compute_cap --format=csv,noheader
                    OUTPUT_VARIABLE _caps RESULT_VARIABLE _rc ERROR_QUIET OUTPUT_STRIP_TRAILING_WHITESPACE)
    if(_rc EQUAL 0 AND _caps)
      string(REPLACE "." "" _caps "${_caps}")
      string(REPLACE "\n" ";" _gpu_caps "${_caps}")
    endif()
  endif()
  if(DEFINED CMAKE_CUDA_ARCHITECTURES)
    set(_archs "${CMAKE_CUDA_ARCHITECTURES}")
    if(_archs STREQUAL "native")
      set(_wanted "${_gpu_caps}")
    else()
      set(_wanted "${_archs}")
    endif()
  elseif(_gpu_caps)
    set(_archs native)
    set(_wanted "${_gpu_caps}")
  else()
    set(_archs 75 80 90)
    set(_wanted "${_archs}")
  endif()
  if(_major AND _major GREATER_EQUAL 13)
    foreach(_a IN LISTS _wanted)
      string(REGEX MATCH "^[0-9]+" _num "${_a}")
      if(_num AND _num LESS 75)
        message(FATAL_ERROR
          "define: CUDA ${_major} cannot build for sm_${_num} (compute capability below 7.5, e.g. a GTX 1080 Ti, "
          "sm_61): CUDA 13 dropped those GPUs. Build with CUDA 12 (nvcc 12.x, e.g. "
          "-DCMAKE_CUDA_COMPILER=/usr/local/cuda-12/bin/nvcc -DCMAKE_CUDA_ARCHITECTURES=61), or configure with "
          "-DDEFINE_CUDA=OFF for the CPU and the emulated device only.")
      endif()
    endforeach()
  endif()
  set(CMAKE_CUDA_ARCHITECTURES "${_archs}" PARENT_SCOPE)
  message(STATUS "define: CUDA ${_major} for architectures ${_archs}")
endfunction()
