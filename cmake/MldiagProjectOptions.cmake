# SPDX-License-Identifier: Apache-2.0
# Options for mldiag's own tests, examples, benchmarks and tools: warnings as errors and the
# sanitizers. They are attached to mldiag_project_options, which only our own targets link;
# the library targets users link never carry them.
include_guard(GLOBAL)

add_library(mldiag_project_options INTERFACE)

# -Wno-missing-field-initializers: GCC 12 warns on designated initializers that leave members
# to their defaults (`monitor_config{.classes = 10}`), the way mldiag's configs are meant to
# be written.
set(mldiag_cxx_warnings -Wall -Wextra -Wpedantic -Wshadow -Wconversion -Wnon-virtual-dtor
                        -Wold-style-cast -Wcast-align -Woverloaded-virtual
                        -Wno-missing-field-initializers -Werror)
target_compile_options(mldiag_project_options INTERFACE
  $<$<COMPILE_LANGUAGE:CXX>:${mldiag_cxx_warnings}>)
if(mldiag_cuda_enabled)
  # nvcc: its own warnings as errors, and the host compiler's on our code. CUB and Thrust come
  # in as system headers, so their warnings are not ours to fix.
  target_compile_options(mldiag_project_options INTERFACE
    $<$<COMPILE_LANGUAGE:CUDA>:--Werror=all-warnings -Xcompiler=-Wall,-Wextra,-Werror>)
endif()

if(MLDIAG_SANITIZE)
  string(REPLACE "," ";" mldiag_sanitizers "${MLDIAG_SANITIZE}")
  foreach(san IN LISTS mldiag_sanitizers)
    if(NOT san MATCHES "^(address|undefined|leak|thread)$")
      message(FATAL_ERROR "mldiag: MLDIAG_SANITIZE has '${san}'; use a comma-separated list of "
                          "address, undefined, leak, thread")
    endif()
  endforeach()
  set(mldiag_san_flags -fsanitize=${MLDIAG_SANITIZE} -fno-omit-frame-pointer
                       -fno-sanitize-recover=all)
  target_compile_options(mldiag_project_options INTERFACE
    $<$<COMPILE_LANGUAGE:CXX>:${mldiag_san_flags}>)
  target_link_options(mldiag_project_options INTERFACE ${mldiag_san_flags})
  message(STATUS "mldiag: sanitizers on for our own targets: ${MLDIAG_SANITIZE}")
endif()

# mldiag_add_program(<name> SOURCES ... [LIBS ...]): an executable of ours with the options.
function(mldiag_add_program name)
  cmake_parse_arguments(arg "" "" "SOURCES;LIBS" ${ARGN})
  # A consumer's program compiles mldiag::compiled's one source into itself; here a dozen
  # programs link it, so it is compiled once, as an object library with the same options, and
  # linked into each (25-75 s of CPU a program saved, release and ASan). Its configuration is
  # theirs: a mismatch would fail to link (core/config.hpp).
  list(TRANSFORM arg_LIBS REPLACE "^mldiag::compiled$" mldiag_compiled_objects)
  if("mldiag_compiled_objects" IN_LIST arg_LIBS AND NOT TARGET mldiag_compiled_objects)
    add_library(mldiag_compiled_objects OBJECT ${PROJECT_SOURCE_DIR}/src/compiled.cpp)
    target_link_libraries(mldiag_compiled_objects PRIVATE mldiag_project_options PUBLIC mldiag::mldiag)
    target_compile_definitions(mldiag_compiled_objects PUBLIC MLDIAG_COMPILED=1)
    target_compile_features(mldiag_compiled_objects PRIVATE cxx_std_20)
    set_target_properties(mldiag_compiled_objects PROPERTIES CXX_EXTENSIONS OFF)
  endif()
  add_executable(${name} ${arg_SOURCES})
  target_link_libraries(${name} PRIVATE mldiag::mldiag ${arg_LIBS} mldiag_project_options)
  target_compile_features(${name} PRIVATE cxx_std_20)
  set_target_properties(${name} PROPERTIES CXX_EXTENSIONS OFF)
endfunction()
