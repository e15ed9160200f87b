# SPDX-License-Identifier: Apache-2.0
# FLOP counting and MFU (issue 9): checked against numbers derived by hand for published model
# shapes (GPT-2 124M, Llama-2-7B, Mixtral-8x7B); docs/efficiency.md shows the derivations.
# count_allocations.cpp: MFU is computed once per step, so the test checks it allocates nothing.
mldiag_add_doctest(efficiency_flops SOURCES ${CMAKE_CURRENT_LIST_DIR}/flops_test.cpp
                                            ${CMAKE_CURRENT_LIST_DIR}/../support/count_allocations.cpp)
