#pragma once
#include <cstddef>
// The largest single operator new request since the last reset (largest_allocation.cpp).
std::size_t fused_test_largest_allocation();
void fused_test_reset_largest_allocation();
