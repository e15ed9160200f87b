# SPDX-License-Identifier: Apache-2.0
# Fails when a doctest TEST_CASE name holds a ';': doctest_discover_tests hands CTest the names
# as a CMake list, which splits such a name into tests that match nothing and fail (22 did).
file(GLOB_RECURSE sources "${DIR}/*.cpp" "${DIR}/*.cu")
set(bad "")
foreach(f IN LISTS sources)
  file(STRINGS "${f}" lines REGEX "TEST_CASE\\(\"[^\"]*;")
  foreach(l IN LISTS lines)
    string(APPEND bad "${f}: ${l}\n")
  endforeach()
endforeach()
if(bad)
  message(FATAL_ERROR "mldiag: test names with ';' (CTest splits them; use ' — '):\n${bad}")
endif()
message(STATUS "no test name holds a ';'")
