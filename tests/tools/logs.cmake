# SPDX-License-Identifier: Apache-2.0
# The training-log readers (tools/cli/logs.hpp, tensorboard.hpp). One source, two programs:
# the unit tests (fixtures under data/), and the real-log checks, which read
# ../shared/data/real-runs (MLDIAG_REAL_RUNS overrides) and exit 77 (CTest: Skipped) without it.
mldiag_add_doctest(tools_logs SOURCES ${CMAKE_CURRENT_LIST_DIR}/logs_test.cpp ${CMAKE_CURRENT_LIST_DIR}/scan_test.cpp
                   LIBS mldiag_cli_internals)
target_compile_definitions(mldiag_test_tools_logs PRIVATE MLDIAG_LOGS_DATA_DIR="${CMAKE_CURRENT_LIST_DIR}/data")

mldiag_add_program(mldiag_test_tools_logs_real_runs SOURCES ${CMAKE_CURRENT_LIST_DIR}/logs_test.cpp
                   LIBS mldiag_cli_internals doctest::doctest)
target_compile_definitions(mldiag_test_tools_logs_real_runs PRIVATE
  MLDIAG_LOGS_REAL_RUNS_MAIN=1
  MLDIAG_LOGS_DATA_DIR="${CMAKE_CURRENT_LIST_DIR}/data"
  MLDIAG_REAL_RUNS_DIR="${PROJECT_SOURCE_DIR}/../shared/data/real-runs")
add_test(NAME tools.logs_real_runs COMMAND mldiag_test_tools_logs_real_runs)
set_tests_properties(tools.logs_real_runs PROPERTIES SKIP_RETURN_CODE 77 LABELS tools_logs)
