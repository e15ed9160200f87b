# SPDX-License-Identifier: Apache-2.0
# Formatters, the text report and JSON Lines (written, read back, and read by Python).
mldiag_add_doctest(report SOURCES ${CMAKE_CURRENT_LIST_DIR}/report_test.cpp LIBS mldiag::fmt)
mldiag_add_doctest(report_attach SOURCES ${CMAKE_CURRENT_LIST_DIR}/attach_test.cpp LIBS mldiag::fmt)
# JSON Lines' non-finite styles: strict (checked by Python's json in strict mode) and bare.
mldiag_add_doctest(report_jsonl SOURCES ${CMAKE_CURRENT_LIST_DIR}/jsonl_test.cpp LIBS mldiag::fmt)
# Episodes (standard library only) and the console sink, with the allocation counter.
mldiag_add_doctest(report_episodes SOURCES ${CMAKE_CURRENT_LIST_DIR}/episodes_test.cpp
                   ${CMAKE_CURRENT_LIST_DIR}/console_test.cpp
                   ${CMAKE_CURRENT_LIST_DIR}/../support/count_allocations.cpp LIBS mldiag::fmt)
