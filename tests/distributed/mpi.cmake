# SPDX-License-Identifier: Apache-2.0
# The MPI merge under mpirun: one executable, run with 2 and with 4 ranks. Open MPI refuses
# root without --allow-run-as-root (CI runs as root) and more ranks than cores without
# --oversubscribe (CI has 2 cores).
# The snapshot merge's algebra and finding dedup need no MPI: distributed_merge runs everywhere.
mldiag_add_doctest(distributed_merge SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/merge_test.cpp)
if(TARGET mldiag::mpi AND MPIEXEC_EXECUTABLE)
  mldiag_add_program(mldiag_test_distributed_mpi
    SOURCES ${CMAKE_CURRENT_SOURCE_DIR}/mpi_main.cpp ${CMAKE_CURRENT_SOURCE_DIR}/mpi_test.cpp
    LIBS mldiag::mpi doctest::doctest)
  target_include_directories(mldiag_test_distributed_mpi PRIVATE ${PROJECT_SOURCE_DIR}/tests)
  set(mldiag_mpiexec_flags ${MPIEXEC_PREFLAGS})
  execute_process(COMMAND ${MPIEXEC_EXECUTABLE} --version OUTPUT_VARIABLE mldiag_mpiexec_version ERROR_QUIET)
  if(mldiag_mpiexec_version MATCHES "Open MPI|OpenRTE")
    list(APPEND mldiag_mpiexec_flags --allow-run-as-root --oversubscribe)
  endif()
  foreach(np 2 4)
    add_test(NAME distributed.mpi.np${np}
             COMMAND ${MPIEXEC_EXECUTABLE} ${MPIEXEC_NUMPROC_FLAG} ${np} ${mldiag_mpiexec_flags}
                     $<TARGET_FILE:mldiag_test_distributed_mpi>)
    # RUN_SERIAL: N ranks want N cores (Open MPI binds each rank to one and busy-polls).
    set_tests_properties(distributed.mpi.np${np} PROPERTIES LABELS distributed TIMEOUT 300 RUN_SERIAL TRUE)
    if(MLDIAG_SANITIZE MATCHES "address")
      # Open MPI 4.1 leaks in its dlopen'ed components at MPI_Finalize (LeakSanitizer cannot
      # even name the frames once they are unloaded): leak checking is off for these ranks
      # only. Our merge code is leak-checked by distributed_merge, which runs without MPI.
      set_tests_properties(distributed.mpi.np${np} PROPERTIES ENVIRONMENT "ASAN_OPTIONS=detect_leaks=0")
    endif()
  endforeach()
elseif(MLDIAG_BUILD_TESTS)
  message(STATUS "mldiag: MPI tests off (no MPI or no mpiexec; apt-get install libopenmpi-dev openmpi-bin)")
endif()
