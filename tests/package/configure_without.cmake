# SPDX-License-Identifier: Apache-2.0
# Configures mldiag as a top-level project, tests and everything else on, with some packages
# hidden (CMAKE_DISABLE_FIND_PACKAGE_<name>): configuring and generating must succeed with
# whatever is missing, and the tests that need nothing hidden must still be there.
# Run by CTest: cmake -D MLDIAG_SOURCE_DIR=... -D WORK_DIR=... -D GENERATOR=... -D CXX_COMPILER=...
#   -D HIDE=doctest,fmt,...             packages to hide (comma-separated)
#   -D EXPECT_TESTS=package.find_package,...  tests the configured tree must list
#   -D EXPECT_OUTPUT=<regex>,...        what the configure output must say
#   -P configure_without.cmake
# Where the CUDA part comes up in the configured tree ("CUDA code of our own on"), the
# doctest-free CUDA link test (cuda.link_twice) must be listed too, and cuda.all must not be
# when doctest is hidden.
cmake_minimum_required(VERSION 3.25)  # the policies of the project (IN_LIST) in script mode
foreach(var MLDIAG_SOURCE_DIR WORK_DIR GENERATOR CXX_COMPILER HIDE EXPECT_TESTS)
  if(NOT DEFINED ${var})
    message(FATAL_ERROR "configure_without.cmake: -D ${var}=... is required")
  endif()
endforeach()
string(REPLACE "," ";" hide "${HIDE}")
string(REPLACE "," ";" expect_tests "${EXPECT_TESTS}")
string(REPLACE "," ";" expect_output "${EXPECT_OUTPUT}")

set(hide_args "")
foreach(package IN LISTS hide)
  list(APPEND hide_args -D CMAKE_DISABLE_FIND_PACKAGE_${package}=ON)
endforeach()

file(REMOVE_RECURSE "${WORK_DIR}")
execute_process(
  COMMAND "${CMAKE_COMMAND}" -S "${MLDIAG_SOURCE_DIR}" -B "${WORK_DIR}" -G "${GENERATOR}"
          -D CMAKE_CXX_COMPILER=${CXX_COMPILER} -D CMAKE_BUILD_TYPE=Release
          -D MLDIAG_BUILD_TESTS=ON -D MLDIAG_BUILD_EXAMPLES=ON -D MLDIAG_BUILD_BENCH=ON
          -D MLDIAG_BUILD_TOOLS=ON -D MLDIAG_BUILD_CUDA=ON ${hide_args}
  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
message("${out}${err}")
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "configuring with ${HIDE} hidden failed (exit ${rc}); every missing "
                      "package must turn its part off, not stop the configuration")
endif()
foreach(regex IN LISTS expect_output)
  if(NOT "${out}${err}" MATCHES "${regex}")
    message(FATAL_ERROR "the configure output does not say '${regex}'")
  endif()
endforeach()

# The tests the generated tree defines (ctest -N lists them without building anything).
execute_process(COMMAND "${CMAKE_CTEST_COMMAND}" --test-dir "${WORK_DIR}" -N
                RESULT_VARIABLE rc OUTPUT_VARIABLE listed ERROR_VARIABLE listed_err)
if(NOT rc EQUAL 0)
  message(FATAL_ERROR "ctest -N in the configured tree failed (exit ${rc}): ${listed_err}")
endif()
if("${out}" MATCHES "CUDA code of our own on")
  list(APPEND expect_tests cuda.link_twice_build cuda.link_twice)
  if("doctest" IN_LIST hide AND "${listed}" MATCHES "Test +#[0-9]+: cuda\\.all\n")
    message(FATAL_ERROR "cuda.all (doctest) is defined although doctest is hidden")
  endif()
else()
  message(STATUS "configure_without: the CUDA part is off here; the CUDA link test is not expected")
endif()
foreach(test IN LISTS expect_tests)
  string(REPLACE "." "\\." test_regex "${test}")
  if(NOT "${listed}" MATCHES "Test +#[0-9]+: ${test_regex}\n")
    message(FATAL_ERROR "the tree configured with ${HIDE} hidden has no test ${test}:\n${listed}")
  endif()
endforeach()
message(STATUS "configure_without: configured with ${HIDE} hidden; tests listed: ${expect_tests}")
