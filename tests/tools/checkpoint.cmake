# SPDX-License-Identifier: Apache-2.0
# The checkpoint readers and commands (tools/cli/checkpoint*.hpp): one program, three CTest entries.
#   tools_checkpoint.readers   bad inputs and rules, on bytes built by the test itself;
#   tools_checkpoint.numpy     files written by numpy and a Python safetensors writer
#                              (make_checkpoints.py, run first as a fixture); skipped (77)
#                              without numpy: apt-get install python3-numpy;
#   tools_checkpoint.big       a sparse 13 GiB file and the peak RSS (label big, run alone,
#                              not under sanitizers: their shadow memory is not the reader's).
mldiag_add_program(mldiag_test_tools_checkpoint SOURCES ${CMAKE_CURRENT_LIST_DIR}/checkpoint_test.cpp
                   LIBS doctest::doctest mldiag_cli_internals)

add_test(NAME tools_checkpoint.readers COMMAND mldiag_test_tools_checkpoint --test-suite=readers)
set_tests_properties(tools_checkpoint.readers PROPERTIES LABELS tools_checkpoint)

# A Python that has numpy: the one CMake finds first, else the system's (pyenv shims often
# hide Debian's python3-numpy).
find_package(Python3 COMPONENTS Interpreter QUIET)
set(mldiag_ckpt_python "")
foreach(candidate IN ITEMS "${Python3_EXECUTABLE}" /usr/bin/python3)
  if(candidate AND NOT mldiag_ckpt_python AND EXISTS "${candidate}")
    execute_process(COMMAND "${candidate}" -c "import numpy" RESULT_VARIABLE mldiag_ckpt_rc
                    OUTPUT_QUIET ERROR_QUIET)
    if(mldiag_ckpt_rc EQUAL 0)
      set(mldiag_ckpt_python "${candidate}")
    endif()
  endif()
endforeach()
if(NOT mldiag_ckpt_python)
  set(mldiag_ckpt_python "${Python3_EXECUTABLE}")  # the script says numpy is absent and exits 77
endif()
set(mldiag_ckpt_data ${CMAKE_CURRENT_BINARY_DIR}/checkpoint-data)
if(mldiag_ckpt_python)
  add_test(NAME tools_checkpoint.generate
           COMMAND "${mldiag_ckpt_python}" ${CMAKE_CURRENT_LIST_DIR}/make_checkpoints.py ${mldiag_ckpt_data})
else()
  add_test(NAME tools_checkpoint.generate
           COMMAND sh -c "echo 'SKIP: python3 is absent: the numpy-written checkpoints are not made'; exit 77")
endif()
set_tests_properties(tools_checkpoint.generate PROPERTIES
  FIXTURES_SETUP mldiag_ckpt_data SKIP_RETURN_CODE 77 LABELS tools_checkpoint)

add_test(NAME tools_checkpoint.numpy COMMAND mldiag_test_tools_checkpoint --test-suite=numpy)
set_tests_properties(tools_checkpoint.numpy PROPERTIES
  FIXTURES_REQUIRED mldiag_ckpt_data SKIP_RETURN_CODE 77 LABELS tools_checkpoint
  ENVIRONMENT "MLDIAG_CKPT_DATA=${mldiag_ckpt_data}")

if(NOT MLDIAG_SANITIZE)
  add_test(NAME tools_checkpoint.big COMMAND mldiag_test_tools_checkpoint --test-suite=big)
  set_tests_properties(tools_checkpoint.big PROPERTIES
    LABELS "tools_checkpoint;big" RUN_SERIAL TRUE TIMEOUT 1200
    ENVIRONMENT "MLDIAG_CKPT_BIG_DIR=${CMAKE_CURRENT_BINARY_DIR}")
endif()
