# SPDX-License-Identifier: Apache-2.0
# Memory evidence (efficiency/memory.hpp) and the Q3 detectors (detectors/efficiency.hpp), with the
# monitor's L0 efficiency checks.
mldiag_add_doctest(efficiency_q3 SOURCES ${CMAKE_CURRENT_LIST_DIR}/memory_test.cpp
                                         ${CMAKE_CURRENT_LIST_DIR}/../detectors/efficiency_test.cpp
                                         ${CMAKE_CURRENT_LIST_DIR}/../support/count_allocations.cpp)
