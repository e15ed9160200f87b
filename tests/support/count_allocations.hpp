// SPDX-License-Identifier: Apache-2.0
// The number of operator new calls so far in this test program (count_allocations.cpp
// replaces the global operator new; link it into the executables that check "no allocation").
#pragma once

#include <cstdint>

namespace mldiag_test {
std::uint64_t allocations() noexcept;
}
