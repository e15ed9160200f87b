# SPDX-License-Identifier: Apache-2.0
# Memory evidence (efficiency/memory.hpp): host RSS, fragmentation, growth, the memory probe, and
# the recorder's checks of memory and efficiency evidence. (The Q3 detectors are tested with the
# other detectors, tests/detectors/efficiency/.)
mldiag_add_doctest(efficiency_memory SOURCES ${CMAKE_CURRENT_LIST_DIR}/memory_test.cpp
                                             ${CMAKE_CURRENT_LIST_DIR}/../support/count_allocations.cpp)
