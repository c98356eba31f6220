// Counts heap allocations (operator new, every thread) while a scope is open: the tests of code
// that promises not to allocate once warm. allocation_counter.cpp replaces the global operator
// new and delete of the test binary.
#pragma once
#include <cstddef>

namespace kvsketch::testutil {

// Allocations made by any thread since the last reset.
size_t allocations();
void reset_allocations();

}  // namespace kvsketch::testutil
