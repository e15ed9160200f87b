# SPDX-License-Identifier: Apache-2.0
# cmake -D CXX=<compiler> -D SOURCE=<file.cpp> -D INCLUDES=<dir;dir> -P check.cmake
file(STRINGS "${SOURCE}" expect_line REGEX "^// expect: ")
if(NOT expect_line)
  message(FATAL_ERROR "${SOURCE} has no '// expect: <message>' line")
endif()
string(REGEX REPLACE "^// expect: " "" expected "${expect_line}")
string(REPLACE "\\;" ";" expected "${expected}")  # file(STRINGS) escapes ';' as a list
set(flags -std=c++20 -fsyntax-only -Wall -Wextra)
foreach(dir IN LISTS INCLUDES)
  list(APPEND flags "-I${dir}")
endforeach()

execute_process(COMMAND "${CXX}" ${flags} "${SOURCE}"
                RESULT_VARIABLE good_rc OUTPUT_VARIABLE good_out ERROR_VARIABLE good_out)
if(NOT good_rc EQUAL 0)
  message(FATAL_ERROR "the good twin of ${SOURCE} does not compile:\n${good_out}")
endif()
execute_process(COMMAND "${CXX}" ${flags} -DMLDIAG_BAD "${SOURCE}"
                RESULT_VARIABLE bad_rc OUTPUT_VARIABLE bad_out ERROR_VARIABLE bad_out)
if(bad_rc EQUAL 0)
  message(FATAL_ERROR "${SOURCE} with -DMLDIAG_BAD compiled; it must not")
endif()
string(FIND "${bad_out}" "${expected}" at)
if(at EQUAL -1)
  message(FATAL_ERROR "${SOURCE} failed without the expected message '${expected}':\n${bad_out}")
endif()
message(STATUS "failed as expected: ${expected}")
