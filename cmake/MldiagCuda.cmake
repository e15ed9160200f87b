# SPDX-License-Identifier: Apache-2.0
# Enables the CUDA language for mldiag's own CUDA tests, examples and benchmarks.
# Included at file scope (enable_language must not run inside a function).
# Sets mldiag_cuda_enabled to ON when nvcc works.
include_guard(GLOBAL)
include(CheckLanguage)

# Architectures must be chosen before the language is enabled: afterwards CMake has already
# written nvcc's default (75 for CUDA 13) and a later default here would silently do nothing.
# 80 and 90 cover A100 and H100/H200; users choose their own with -DCMAKE_CUDA_ARCHITECTURES.
if(NOT DEFINED CMAKE_CUDA_ARCHITECTURES)
  set(CMAKE_CUDA_ARCHITECTURES "80;90" CACHE STRING "CUDA architectures for mldiag's own CUDA code")
endif()
if(NOT DEFINED CMAKE_CUDA_COMPILER AND NOT DEFINED ENV{CUDACXX} AND CUDAToolkit_NVCC_EXECUTABLE)
  set(CMAKE_CUDA_COMPILER "${CUDAToolkit_NVCC_EXECUTABLE}" CACHE FILEPATH "nvcc")
endif()

check_language(CUDA)
if(CMAKE_CUDA_COMPILER)
  enable_language(CUDA)
  # CMake 3.25.1 does not know nvcc's C++20 dialect ("cuda_std_20 is not known to CUDA compiler
  # NVIDIA"); 3.25.2 fixed it. Teach it the flag so cuda_std_20 works (../shared/TOOLCHAIN.md).
  if(CMAKE_VERSION VERSION_LESS 3.25.2 AND NOT "cuda_std_20" IN_LIST CMAKE_CUDA_COMPILE_FEATURES)
    set(CMAKE_CUDA20_STANDARD_COMPILE_OPTION "-std=c++20")
    set(CMAKE_CUDA20_EXTENSION_COMPILE_OPTION "-std=c++20")
    list(APPEND CMAKE_CUDA_COMPILE_FEATURES cuda_std_20)
    list(APPEND CMAKE_CUDA20_COMPILE_FEATURES cuda_std_20)
  endif()
  set(mldiag_cuda_enabled ON)
  message(STATUS "mldiag: CUDA code of our own on (nvcc ${CMAKE_CUDA_COMPILER_VERSION}, "
                 "architectures ${CMAKE_CUDA_ARCHITECTURES})")
else()
  message(STATUS "mldiag: CUDA code of our own off: no working nvcc "
                 "(install the CUDA Toolkit or pass -DCMAKE_CUDA_COMPILER=/path/to/nvcc)")
endif()
