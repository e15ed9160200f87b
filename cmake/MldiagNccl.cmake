# SPDX-License-Identifier: Apache-2.0
# Finds NCCL (libnccl and nccl.h) and defines the imported target mldiag::nccl_library; sets
# mldiag_nccl_found. CMake 3.25 has no CUDA::nccl target, and NCCL comes with the CUDA
# Toolkit on some machines and as PyTorch's pip package nvidia-nccl (libnccl.so.2 only) on
# others. Looked for under NCCL_ROOT (CMake or environment variable) first, then next to the
# toolkit. Needs find_package(CUDAToolkit) first. Used by mldiag's CMakeLists.txt and,
# installed next to it, by mldiagConfig.cmake (so a consumer finds NCCL again on its machine).
set(mldiag_nccl_found FALSE)
if(TARGET mldiag::nccl_library)
  set(mldiag_nccl_found TRUE)
else()
  find_library(MLDIAG_NCCL_LIBRARY NAMES nccl libnccl.so.2
    HINTS ${NCCL_ROOT} $ENV{NCCL_ROOT} ${CUDAToolkit_LIBRARY_DIR}
    PATH_SUFFIXES lib lib64)
  find_path(MLDIAG_NCCL_INCLUDE_DIR NAMES nccl.h
    HINTS ${NCCL_ROOT} $ENV{NCCL_ROOT} ${CUDAToolkit_INCLUDE_DIRS}
    PATH_SUFFIXES include)
  mark_as_advanced(MLDIAG_NCCL_LIBRARY MLDIAG_NCCL_INCLUDE_DIR)
  if(MLDIAG_NCCL_LIBRARY AND MLDIAG_NCCL_INCLUDE_DIR)
    add_library(mldiag::nccl_library UNKNOWN IMPORTED)
    set_target_properties(mldiag::nccl_library PROPERTIES
      IMPORTED_LOCATION "${MLDIAG_NCCL_LIBRARY}"
      INTERFACE_INCLUDE_DIRECTORIES "${MLDIAG_NCCL_INCLUDE_DIR}")
    set(mldiag_nccl_found TRUE)
  endif()
endif()
