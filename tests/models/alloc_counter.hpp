#pragma once
// Global allocations (operator new, all forms) made by this process so far.
long fused_test_allocations();
