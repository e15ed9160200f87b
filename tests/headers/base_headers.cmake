# SPDX-License-Identifier: Apache-2.0
# The base headers need only the standard library (and the few mldiag headers listed beside
# each, and core/config.hpp, which is macros only): {fmt}'s base-header discipline. A user who includes the pattern tables or a finding
# must not pay for the recorder, the detectors or the statistics engine.
#   cmake -D CXX=<compiler> -D INCLUDE=<include dir> -P base_headers.cmake
cmake_minimum_required(VERSION 3.25)
# header|the mldiag headers it may include (a regular expression; empty: none)
set(base_headers
  "mldiag/vocab/finding.hpp|^mldiag/vocab/symptom\\.hpp$"
  "mldiag/vocab/symptom.hpp|"
  "mldiag/vocab/role.hpp|"
  "mldiag/vocab/metric.hpp|"
  "mldiag/vocab/thresholds.hpp|"
  "mldiag/protocol/log.hpp|"
  "mldiag/protocol/pattern_tables.hpp|^mldiag/vocab/symptom\\.hpp$"
  "mldiag/stats/tensor_stats.hpp|^mldiag/core/config\\.hpp$"
  "mldiag/core/concepts.hpp|^mldiag/core/"
  "mldiag/report/episodes.hpp|^mldiag/(core/error|vocab/(finding|symptom)|report/run_log|protocol/log)\\.hpp$")
set(failed "")
foreach(entry IN LISTS base_headers)
  string(FIND "${entry}" "|" bar)
  string(SUBSTRING "${entry}" 0 ${bar} header)
  math(EXPR bar "${bar} + 1")
  string(SUBSTRING "${entry}" ${bar} -1 allowed)
  execute_process(COMMAND "${CXX}" -std=c++20 -x c++ -MM "-I${INCLUDE}" "${INCLUDE}/${header}"
                  RESULT_VARIABLE rc OUTPUT_VARIABLE deps ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    message(FATAL_ERROR "${header} does not preprocess on its own:\n${err}")
  endif()
  execute_process(COMMAND "${CXX}" -std=c++20 -x c++ -E "-I${INCLUDE}" "${INCLUDE}/${header}"
                  OUTPUT_VARIABLE text ERROR_QUIET)
  string(REGEX MATCHALL "\n" newlines "${text}")
  list(LENGTH newlines lines)
  string(REGEX MATCHALL "mldiag/[A-Za-z0-9_/]+\\.hpp" used "${deps}")
  list(REMOVE_DUPLICATES used)
  list(REMOVE_ITEM used "${header}")
  set(extra "")
  foreach(dep IN LISTS used)
    # core/config.hpp is macros only (the configuration's namespace name): every header has it.
    if(dep STREQUAL "mldiag/core/config.hpp")
      continue()
    endif()
    if(allowed STREQUAL "" OR NOT dep MATCHES "${allowed}")
      list(APPEND extra "${dep}")
    endif()
  endforeach()
  if(extra)
    list(APPEND failed "${header} includes ${extra} (allowed: ${allowed})")
  endif()
  message(STATUS "${header}: ${lines} preprocessed lines, mldiag headers: ${used}")
endforeach()
if(failed)
  string(REPLACE ";" "\n  " failed "${failed}")
  message(FATAL_ERROR "base headers that pulled in more than the standard library:\n  ${failed}")
endif()
