// SPDX-License-Identifier: Apache-2.0
// The detector registry compiled once for a program (CMake: mldiag::compiled, whose
// interface defines MLDIAG_COMPILED_DETECTORS for the program's other files): the
// translation units that build a monitor then see declarations only (detectors/registry.hpp)
// and compile in a fraction of the time (docs/building.md, bench/compile_time).
#ifndef MLDIAG_COMPILED_DETECTORS
#error "mldiag: compile this file with MLDIAG_COMPILED_DETECTORS defined (link mldiag::compiled), or do not compile it"
#endif
#define MLDIAG_COMPILE_REGISTRY 1
#include "mldiag/detectors/catalogue.hpp"
