// SPDX-License-Identifier: Apache-2.0
/// Configuration macros shared by host and CUDA code.
#pragma once

// Functions that the CUDA kernels call on the device as well (tensor_stats, its merge).
// Plain host compilers see nothing; nvcc compiles them for both sides.
#if defined(__CUDACC__)
#define MLDIAG_HOST_DEVICE __host__ __device__
#else
#define MLDIAG_HOST_DEVICE
#endif

// ---- The configuration a program is built with, and the namespace that carries it ----
//
// Every macro that changes an inline body is decided here, once, and named in the inline
// namespace all of mldiag lives in (`mldiag::inline MLDIAG_ABI`). Two translation units built
// differently then hold different entities instead of silently sharing one body the linker
// picks (an ODR violation: an AVX-512 body run on a CPU without it, a header-only monitor
// handed to a function compiled against the compiled one). A mix that passes mldiag types
// between such units fails to link, naming both configurations in the undefined symbol;
// docs/building.md ("One configuration per program") says what to do.

// Header-only (default) or compiled once (MLDIAG_COMPILED; core/compiled.hpp).
#if defined(MLDIAG_COMPILED)
#define MLDIAG_ABI_MODE_ compiled
#else
#define MLDIAG_ABI_MODE_ header_only
#endif

// Host accumulator lanes: one native vector of floats (4 with SSE2 or NEON, 8 with AVX, 16
// with AVX-512), so one block's accumulators fit the register file (stats/element_formats.hpp).
#if defined(__AVX512F__)
#define MLDIAG_HOST_LANES 16
#elif defined(__AVX__)
#define MLDIAG_HOST_LANES 8
#else
#define MLDIAG_HOST_LANES 4
#endif

// Explicit generic vectors need GCC or Clang (`vector_size`); MLDIAG_NO_HOST_VECTORS turns
// them off (scalar loops everywhere).
#if defined(__GNUC__) && !defined(MLDIAG_NO_HOST_VECTORS)
#define MLDIAG_HOST_VECTORS 1
#define MLDIAG_ABI_VECTORS_ vectors
#else
#define MLDIAG_ABI_VECTORS_ scalar
#endif

// How far ahead the narrow-format kernels prefetch, in bytes: an integer literal, since it is
// spelled into the namespace's name (stats/block_stats_narrow.hpp).
#if !defined(MLDIAG_PREFETCH_BYTES)
#define MLDIAG_PREFETCH_BYTES 8192
#endif

// Run-time dispatch over the CPU's vector units (stats/host_isa.hpp) needs GCC or Clang on
// x86-64 (the `target` attribute and __builtin_cpu_supports); MLDIAG_NO_HOST_DISPATCH turns it
// off. nvcc's host pass is left out: its front end (cudafe++ 13.0) crashes on the AVX-512
// kernels. So a .cu file runs the compile target's kernel where a .cpp file dispatches: both
// compute the same statistics (the sums may differ in the last bits, from the lane order),
// and the namespace names only the user's choice, so that a program's .cu and .cpp files
// still link together (docs/limits.md).
#if defined(__x86_64__) && defined(__GNUC__) && !defined(__CUDACC__) && defined(MLDIAG_HOST_VECTORS) && \
    !defined(MLDIAG_NO_HOST_DISPATCH)
#define MLDIAG_HOST_DISPATCH 1
#endif
#if defined(MLDIAG_NO_HOST_DISPATCH)
#define MLDIAG_ABI_DISPATCH_ nodispatch
#else
#define MLDIAG_ABI_DISPATCH_ dispatch
#endif

#define MLDIAG_ABI_NAME2_(mode, lanes, prefetch, vectors, dispatch) \
  mode##_lanes##lanes##_prefetch##prefetch##_##vectors##_##dispatch
#define MLDIAG_ABI_NAME_(mode, lanes, prefetch, vectors, dispatch) \
  MLDIAG_ABI_NAME2_(mode, lanes, prefetch, vectors, dispatch)
/// The inline namespace every mldiag entity lives in, e.g.
/// `header_only_lanes8_prefetch8192_vectors_dispatch`. Code names `mldiag::x`, never this.
#define MLDIAG_ABI                                                                         \
  MLDIAG_ABI_NAME_(MLDIAG_ABI_MODE_, MLDIAG_HOST_LANES, MLDIAG_PREFETCH_BYTES,              \
                   MLDIAG_ABI_VECTORS_, MLDIAG_ABI_DISPATCH_)
