# SPDX-License-Identifier: Apache-2.0
# The HTML report: unit tests (doctest), and a sample report opened in headless Chromium by
# check_html.py (skipped, exit 77, where Chromium or Python 3 is missing).
mldiag_add_doctest(report_html SOURCES ${CMAKE_CURRENT_LIST_DIR}/html_test.cpp LIBS mldiag::fmt)

mldiag_add_program(mldiag_html_report_sample
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/html_chromium_test.cpp LIBS mldiag::fmt)

set(mldiag_html_dir "${CMAKE_CURRENT_BINARY_DIR}/html")
add_test(NAME report_html.sample_write
         COMMAND mldiag_html_report_sample "${mldiag_html_dir}/sample.html")
set_tests_properties(report_html.sample_write PROPERTIES
  FIXTURES_SETUP mldiag_html_sample LABELS report_html)
mldiag_add_program(mldiag_html_monitor_report
  SOURCES ${CMAKE_CURRENT_LIST_DIR}/html_monitor_report.cpp LIBS mldiag::fmt)
add_test(NAME report_html.monitor_write
         COMMAND mldiag_html_monitor_report "${CMAKE_CURRENT_BINARY_DIR}/html/monitor")
set_tests_properties(report_html.monitor_write PROPERTIES
  FIXTURES_SETUP mldiag_html_monitor LABELS report_html)
# The output folder must exist before the sample is written.
file(MAKE_DIRECTORY "${mldiag_html_dir}")

find_package(Python3 COMPONENTS Interpreter QUIET)
if(Python3_Interpreter_FOUND)
  # The DOM after load must hold the planted markers; the page must load without console
  # errors; the screenshot is left at build/tests/report/html/sample.png for people to look at.
  add_test(NAME report_html.chromium
           COMMAND Python3::Interpreter "${CMAKE_CURRENT_LIST_DIR}/check_html.py"
                   "${mldiag_html_dir}/sample.html"
                   --screenshot "${mldiag_html_dir}/sample.png"
                   --expect-marker "step=120,tensor=block2.attn.qkv.weight,symptom=exploding gradients"
                   --expect-marker "step=120,tensor=block2.attn.out.weight"
                   --expect-no-marker "tensor=block2.mlp"
                   --expect-no-marker "tensor=block1"
                   --expect-nonfinite "step=200,metric=loss")
  set_tests_properties(report_html.chromium PROPERTIES
    FIXTURES_REQUIRED mldiag_html_sample SKIP_RETURN_CODE 77 LABELS report_html TIMEOUT 120)
  # A real monitor's output (html_monitor_report.cpp): check_html.py computes the episodes
  # itself from the JSON Lines (gap 1000) and finds one marker and one table row per episode,
  # the planted faults on the rows their places name (`grad/fc1.weight`; `act/conv2.relu` ->
  # conv2's rows), every validation point, the legend and the open diagnoses.
  add_test(NAME report_html.monitor_chromium
           COMMAND Python3::Interpreter "${CMAKE_CURRENT_LIST_DIR}/check_html.py"
                   "${mldiag_html_dir}/monitor/report.html"
                   --screenshot "${mldiag_html_dir}/monitor/report.png"
                   --jsonl "${mldiag_html_dir}/monitor/run.jsonl" --gap 1000
                   --expect-marker "tensor=fc1.weight,symptom=exploding gradients"
                   --expect-marker "step=450,tensor=conv2.weight,symptom=dead activations"
                   --expect-marker "step=450,tensor=conv2.bias,symptom=dead activations"
                   --expect-no-marker "tensor=fc1,symptom=dead activations"
                   --expect-no-marker "tensor=fc2,symptom=dead activations"
                   --expect-legend --expect-open-diagnoses)
  set_tests_properties(report_html.monitor_chromium PROPERTIES
    FIXTURES_REQUIRED mldiag_html_monitor SKIP_RETURN_CODE 77 LABELS report_html TIMEOUT 120)
else()
  message(STATUS "mldiag: report_html.chromium needs Python 3; not added")
endif()
# GCC 12 with -fsanitize=address warns "may be used uninitialized" inside libstdc++'s
# std::function as std::regex builds its automaton (a false positive in the standard library's
# code, not ours); the plain build has no such warning.
if(CMAKE_CXX_COMPILER_ID STREQUAL "GNU" AND MLDIAG_SANITIZE)
  target_compile_options(mldiag_test_report_html PRIVATE -Wno-maybe-uninitialized)
endif()
