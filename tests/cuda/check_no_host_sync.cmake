# SPDX-License-Identifier: Apache-2.0
# Checks that a CUDA header never blocks the host in its step path: no call that synchronizes
# or allocates (cudaEventSynchronize, cudaStreamSynchronize, cudaDeviceSynchronize, the
# synchronous cudaMemcpy/cudaMemset, cudaMalloc/cudaFree, creating events or streams) outside
# regions marked
#   // mldiag:sync-allowed begin (why)
#   ...
#   // mldiag:sync-allowed end
# and a region may hold only the constructor, the destructor or finish() (its first code line
# must be one of their heads, and it may hold no other member function). Comments and string
# literals are ignored, so documentation may name the calls it avoids.
#
#   cmake -DHEADER=kernels/mldiag/cuda/event_timer.cuh -P check_no_host_sync.cmake
#   cmake -DHEADER=... -DPLANT=ON -P check_no_host_sync.cmake   # the check's own test: plants a
#       sync in mark() and a region around end_step(); each must be caught
cmake_minimum_required(VERSION 3.25)
if(NOT DEFINED HEADER)
  message(FATAL_ERROR "mldiag: pass -DHEADER=<path to the .cuh to check>")
endif()
file(READ "${HEADER}" original)
# The class whose constructor, destructor and finish() may synchronize: the file's name unless
# CLASS says otherwise.
if(DEFINED CLASS)
  set(class_name "${CLASS}")
else()
  get_filename_component(class_name "${HEADER}" NAME_WE)
endif()

set(forbidden_regex "(cudaEventSynchronize|cudaStreamSynchronize|cudaDeviceSynchronize|cudaThreadSynchronize|cudaMemcpy|cudaMemcpy2D|cudaMemcpyToSymbol|cudaMemcpyFromSymbol|cudaMemset|cudaMalloc|cudaMallocHost|cudaMallocManaged|cudaHostAlloc|cudaFree|cudaFreeHost|cudaEventCreate|cudaEventCreateWithFlags|cudaStreamCreate|cudaStreamCreateWithFlags|cudaDeviceReset)[ \t]*\\(")
set(allowed_head_regex "^[ \t]*(explicit[ \t]+)?${class_name}\\(|^[ \t]*~${class_name}\\(|^[ \t]*void[ \t]+finish\\(\\)")
# A member function's head at class indentation (two spaces), ending with its opening brace.
set(member_head_regex "^  [~A-Za-z].*\\)[ \ta-z]*\\{$")

# check(<text> <out_var>): sets out_var to the list of violations ("line N: text").
function(mldiag_check_text text out)
  string(REPLACE ";" "<semicolon>" text "${text}")
  string(REPLACE "[" "<lbracket>" text "${text}")
  string(REPLACE "]" "<rbracket>" text "${text}")
  string(REPLACE "\n" ";" lines "${text}")
  set(violations "")
  set(line_no 0)
  set(in_region OFF)
  set(region_head "")
  set(region_members 0)
  foreach(line IN LISTS lines)
    math(EXPR line_no "${line_no} + 1")
    if(line MATCHES "//[ \t]*mldiag:sync-allowed begin")
      set(in_region ON)
      set(region_head "")
      set(region_members 0)
      set(region_start ${line_no})
      continue()
    endif()
    if(line MATCHES "//[ \t]*mldiag:sync-allowed end")
      if(NOT in_region)
        list(APPEND violations "line ${line_no}: 'sync-allowed end' without a begin")
      elseif(region_members GREATER 1)
        list(APPEND violations "line ${region_start}: a sync-allowed region holds ${region_members} member functions; it may hold one (constructor, destructor or finish)")
      endif()
      set(in_region OFF)
      continue()
    endif()
    # Code only: drop string literals, then comments.
    string(REGEX REPLACE "\"[^\"]*\"" "\"\"" code "${line}")
    string(REGEX REPLACE "//.*$" "" code "${code}")
    if(code MATCHES "^[ \t]*$")
      continue()
    endif()
    if(in_region)
      if(region_head STREQUAL "")
        set(region_head "${code}")
        if(NOT code MATCHES "${allowed_head_regex}")
          list(APPEND violations "line ${line_no}: a sync-allowed region must begin with the constructor, the destructor or finish(), not: ${code}")
        endif()
      endif()
      if(code MATCHES "${member_head_regex}")
        math(EXPR region_members "${region_members} + 1")
      endif()
      continue()
    endif()
    if(code MATCHES "${forbidden_regex}")
      string(STRIP "${code}" shown)
      list(APPEND violations "line ${line_no}: ${CMAKE_MATCH_1} in the step path: ${shown}")
    endif()
  endforeach()
  if(in_region)
    list(APPEND violations "line ${region_start}: a sync-allowed region is never closed")
  endif()
  set(${out} "${violations}" PARENT_SCOPE)
endfunction()

if(NOT PLANT)
  mldiag_check_text("${original}" found)
  if(found)
    string(REPLACE ";" "\n  " shown "${found}")
    string(REPLACE "<semicolon>" ";" shown "${shown}")
    string(REPLACE "<lbracket>" "[" shown "${shown}")
    string(REPLACE "<rbracket>" "]" shown "${shown}")
    message(FATAL_ERROR "mldiag: ${HEADER} may block the host in the step path:\n  ${shown}")
  endif()
  # Guard against a vacuous pass: the step path must be there to be checked.
  foreach(call "void begin_step(" "void mark(" "void end_step(" "readback_status try_readback(" "cudaEventRecord(" "cudaEventQuery(")
    string(FIND "${original}" "${call}" at)
    if(at EQUAL -1)
      message(FATAL_ERROR "mldiag: ${HEADER} has no '${call}': the check would pass vacuously; update the check")
    endif()
  endforeach()
  message(STATUS "mldiag: no host synchronization in the step path of ${HEADER}")
  return()
endif()

# The check's own test: each planted fault must be reported with its message.
string(REPLACE "void mark(efficiency::phase p, cudaStream_t stream) {"
               "void mark(efficiency::phase p, cudaStream_t stream) {\n    (void)cudaStreamSynchronize(stream);"
               planted "${original}")
if(planted STREQUAL original)
  message(FATAL_ERROR "mldiag: could not plant a sync into mark(): its signature changed; update the check")
endif()
mldiag_check_text("${planted}" found)
if(NOT found MATCHES "cudaStreamSynchronize in the step path")
  message(FATAL_ERROR "mldiag: the check missed a cudaStreamSynchronize planted in mark(): '${found}'")
endif()

string(REPLACE "  void end_step(cudaStream_t stream) {"
               "  // mldiag:sync-allowed begin\n  void end_step(cudaStream_t stream) {\n    (void)cudaDeviceSynchronize();"
               planted "${original}")
string(REPLACE "    ++next_step_;\n  }\n" "    ++next_step_;\n  }\n  // mldiag:sync-allowed end\n" planted "${planted}")
mldiag_check_text("${planted}" found)
if(NOT found MATCHES "must begin with the constructor, the destructor or finish")
  message(FATAL_ERROR "mldiag: the check missed a sync-allowed region around end_step(): '${found}'")
endif()

string(REPLACE "  void finish() {" "  void finish() {}\n  void sneak() {\n    (void)cudaDeviceSynchronize();\n  }\n  void finish2() {" planted "${original}")
mldiag_check_text("${planted}" found)
if(NOT found MATCHES "holds [2-9] member functions")
  message(FATAL_ERROR "mldiag: the check missed a step function hidden in finish()'s region: '${found}'")
endif()
message(STATUS "mldiag: the no-sync check caught every planted sync")
