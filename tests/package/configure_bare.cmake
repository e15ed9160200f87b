# SPDX-License-Identifier: Apache-2.0
# Configures mldiag as a top-level project with every optional dependency hidden
# (CMAKE_DISABLE_FIND_PACKAGE_<dep>): configuration must succeed, say which parts are off,
# and the core must still build and run the demo.
foreach(var MLDIAG_SOURCE_DIR WORK_DIR GENERATOR CXX_COMPILER)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "configure_bare.cmake: -D ${var}=... is required")
  endif()
endforeach()
file(REMOVE_RECURSE "${WORK_DIR}")
execute_process(
  COMMAND "${CMAKE_COMMAND}" -S "${MLDIAG_SOURCE_DIR}" -B "${WORK_DIR}" -G "${GENERATOR}"
          -D CMAKE_CXX_COMPILER=${CXX_COMPILER}
          -D MLDIAG_BUILD_TESTS=OFF -D MLDIAG_BUILD_BENCH=OFF -D MLDIAG_BUILD_TOOLS=OFF
          -D CMAKE_DISABLE_FIND_PACKAGE_fmt=ON -D CMAKE_DISABLE_FIND_PACKAGE_Eigen3=ON
          -D CMAKE_DISABLE_FIND_PACKAGE_Torch=ON -D CMAKE_DISABLE_FIND_PACKAGE_CUDAToolkit=ON
          -D CMAKE_DISABLE_FIND_PACKAGE_MPI=ON
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
message("${out}${err}")
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "configuring without optional dependencies failed (exit ${rc})")
endif()
if(NOT out MATCHES "parts off: fmt eigen torch cuda mpi nccl")
  message(FATAL_ERROR "the configure output does not name every part that is off")
endif()
foreach(part fmt eigen torch cuda mpi nccl)
  if(NOT out MATCHES "mldiag::${part} off: [^\n]*install")
    message(FATAL_ERROR "no message saying how to turn mldiag::${part} on")
  endif()
endforeach()
execute_process(COMMAND "${CMAKE_COMMAND}" --build "${WORK_DIR}" --target mldiag_stats_demo
                RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "the demo does not build without optional dependencies")
endif()
execute_process(COMMAND "${WORK_DIR}/examples/stats_demo/mldiag_stats_demo" RESULT_VARIABLE rc)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "the demo failed without optional dependencies")
endif()
