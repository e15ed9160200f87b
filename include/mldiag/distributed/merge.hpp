// SPDX-License-Identifier: Apache-2.0
/// The algebra of merging snapshots and findings across ranks, without the transport: cells
/// that merge in rank order, the snapshot layout the ranks agree on, and finding dedup.
/// `distributed/mpi.hpp` moves these bytes with MPI; everything here is plain C++.
#pragma once

#include "mldiag/core/config.hpp"  // MLDIAG_ABI
#include "mldiag/distributed/cell.hpp"           // cell, combine, merge_options
#include "mldiag/distributed/findings.hpp"       // write_findings, deduplicate
#include "mldiag/distributed/snapshot_pack.hpp"  // snapshot_layout, pack, unpack
