// SPDX-License-Identifier: Apache-2.0
// The functions that are costly to compile in every translation unit — the detector
// registry, the monitor's step, the host statistics worker — compiled once for a program
// (core/compiled.hpp). CMake: link mldiag::compiled, whose interface defines MLDIAG_COMPILED
// for the program's other files and compiles this one into it (docs/building.md).
#ifndef MLDIAG_COMPILED
#error "mldiag: compile this file with MLDIAG_COMPILED defined (link mldiag::compiled), or do not compile it"
#endif
#define MLDIAG_COMPILE_HERE 1
#include "mldiag/monitor.hpp"
