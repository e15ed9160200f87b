# SPDX-License-Identifier: Apache-2.0
# Builds and runs tests/package/consumer against mldiag in one of three ways (MODE).
# Run by CTest: cmake -D MODE=... -D MLDIAG_SOURCE_DIR=... -D MLDIAG_BUILD_DIR=...
#                     -D WORK_DIR=... -D GENERATOR=... -D CXX_COMPILER=... -P run_consumer.cmake
foreach(var MODE MLDIAG_SOURCE_DIR MLDIAG_BUILD_DIR WORK_DIR GENERATOR CXX_COMPILER)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "run_consumer.cmake: -D ${var}=... is required")
  endif()
endforeach()

function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  message("${out}${err}")
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "package test (${MODE}) failed (exit ${rc}): ${ARGN}")
  endif()
  set(last_output "${out}" PARENT_SCOPE)
endfunction()

file(REMOVE_RECURSE "${WORK_DIR}")
set(consumer_args -D MLDIAG_CONSUME=${MODE} -D MLDIAG_SOURCE_DIR=${MLDIAG_SOURCE_DIR})
if(MODE STREQUAL "find_package")
  # Install the already configured mldiag to a fresh prefix, then find it only there.
  run("${CMAKE_COMMAND}" --install "${MLDIAG_BUILD_DIR}" --prefix "${WORK_DIR}/prefix")
  list(APPEND consumer_args -D CMAKE_PREFIX_PATH=${WORK_DIR}/prefix)
elseif(NOT MODE MATCHES "^(add_subdirectory|fetchcontent)$")
  message(FATAL_ERROR "run_consumer.cmake: MODE must be find_package, add_subdirectory or fetchcontent")
endif()

run("${CMAKE_COMMAND}" -S "${CMAKE_CURRENT_LIST_DIR}/consumer" -B "${WORK_DIR}/build"
    -G "${GENERATOR}" -D CMAKE_CXX_COMPILER=${CXX_COMPILER} ${consumer_args})
run("${CMAKE_COMMAND}" --build "${WORK_DIR}/build")
run("${WORK_DIR}/build/consumer")
if(NOT last_output MATCHES "l2_norm=25\\.4950975")
  message(FATAL_ERROR "package test (${MODE}): the consumer printed the wrong norm")
endif()
# mldiag::compiled: the monitor with the registry compiled into the program.
run("${WORK_DIR}/build/consumer_monitor")
if(NOT last_output MATCHES "consumer_monitor: non-finite gradient found")
  message(FATAL_ERROR "package test (${MODE}): consumer_monitor printed the wrong line")
endif()
# Where the CUDA part is defined, the consumer also includes a .cuh header through mldiag::cuda.
if(EXISTS "${WORK_DIR}/build/consumer_cuda")
  run("${WORK_DIR}/build/consumer_cuda")
  if(NOT last_output MATCHES "consumer_cuda: mldiag::cuda headers found")
    message(FATAL_ERROR "package test (${MODE}): consumer_cuda printed the wrong line")
  endif()
else()
  message(STATUS "package test (${MODE}): no mldiag::cuda here, consumer_cuda not built")
endif()
