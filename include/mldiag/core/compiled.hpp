// SPDX-License-Identifier: Apache-2.0
/// Header-only or compiled once: the switch for the few functions that are costly to compile
/// in every translation unit (the detector registry, the monitor's step, the host statistics
/// worker).
#pragma once

// Header-only (the default): those functions are `inline` and defined in their headers, so
// every translation unit that builds a monitor compiles all of them. Compiled: with
// MLDIAG_COMPILED defined (CMake: link mldiag::compiled), the headers declare them and
// src/compiled.cpp, which CMake compiles into the program once, defines them
// (bench/compile_time/run.sh measures both; docs/building.md). One program uses one way:
// every translation unit with MLDIAG_COMPILED, or none. The mode is part of mldiag's namespace
// name (core/config.hpp), so files that mix the two and share mldiag values fail to link.
#if defined(MLDIAG_COMPILED) && !defined(MLDIAG_COMPILE_HERE)
#define MLDIAG_COMPILED_INLINE
#define MLDIAG_DEFINE_COMPILED 0
#elif defined(MLDIAG_COMPILED)
#define MLDIAG_COMPILED_INLINE
#define MLDIAG_DEFINE_COMPILED 1
#else
#define MLDIAG_COMPILED_INLINE inline
#define MLDIAG_DEFINE_COMPILED 1
#endif
