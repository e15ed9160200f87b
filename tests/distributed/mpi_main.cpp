// SPDX-License-Identifier: Apache-2.0
// doctest's main for the MPI tests: MPI_Init, every test case on every rank, MPI_Finalize.
// Rank 0 reports in full; the other ranks print only failures. mpirun's exit status is
// non-zero when any rank fails.
#define DOCTEST_CONFIG_IMPLEMENT
#include "support/doctest_run.hpp"

#include <mpi.h>

#include <string>
#include <vector>

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  std::vector<char*> args(argv, argv + argc);
  std::string quiet = "--minimal=true";
  if (rank != 0) args.push_back(quiet.data());
  const int result = mldiag_test::run(static_cast<int>(args.size()), args.data());
  MPI_Finalize();
  return result;
}
