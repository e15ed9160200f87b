# SPDX-License-Identifier: Apache-2.0
# Step-phase timing and the layer profiler (efficiency/timing.hpp, efficiency/profiler.hpp),
# and the check that the CUDA event timer never synchronizes the host in the step path
# (kernels/mldiag/cuda/event_timer.cuh): a source scan that runs everywhere, no GPU or nvcc
# needed, with a twin that plants a sync in the step path and must be caught.
mldiag_add_doctest(efficiency_timing SOURCES ${CMAKE_CURRENT_LIST_DIR}/timing_test.cpp
                   ../support/count_allocations.cpp)

set(mldiag_no_sync_script ${PROJECT_SOURCE_DIR}/tests/cuda/check_no_host_sync.cmake)
set(mldiag_event_timer ${PROJECT_SOURCE_DIR}/kernels/mldiag/cuda/event_timer.cuh)
add_test(NAME efficiency.event_timer_no_host_sync
         COMMAND ${CMAKE_COMMAND} -DHEADER=${mldiag_event_timer} -P ${mldiag_no_sync_script})
set_tests_properties(efficiency.event_timer_no_host_sync PROPERTIES LABELS efficiency
  PASS_REGULAR_EXPRESSION "mldiag: no host synchronization in the step path of")
add_test(NAME efficiency.event_timer_no_host_sync_catches_a_planted_sync
         COMMAND ${CMAKE_COMMAND} -DHEADER=${mldiag_event_timer} -DPLANT=ON -P ${mldiag_no_sync_script})
set_tests_properties(efficiency.event_timer_no_host_sync_catches_a_planted_sync PROPERTIES LABELS efficiency
  PASS_REGULAR_EXPRESSION "mldiag: the no-sync check caught every planted sync")
