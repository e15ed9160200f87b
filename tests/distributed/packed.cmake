# SPDX-License-Identifier: Apache-2.0
# The NCCL merge's algebra (include/mldiag/distributed/packed.hpp), simulated on the host over
# 1 to 7 ranks: plain C++, no MPI, no NCCL, no GPU. The NCCL merge itself is tested in
# tests/cuda (single-rank communicator, where a GPU is).
mldiag_add_doctest(distributed_packed SOURCES packed_test.cpp)
