// Replaces the global operator new of the test executable to record the largest single request
// (in its own translation unit, as tests/models/alloc_counter.cpp, so no caller sees the pairing).
// The aligned forms are left to the library: nothing the loaders allocate is over-aligned.
#include <atomic>
#include <cstdlib>
#include <new>

#include "largest_allocation.hpp"

namespace {
std::atomic<std::size_t> g_largest{0};
}  // namespace

std::size_t fused_test_largest_allocation() { return g_largest.load(); }
void fused_test_reset_largest_allocation() { g_largest = 0; }

void* operator new(std::size_t n) {
  std::size_t seen = g_largest.load();
  while (n > seen && !g_largest.compare_exchange_weak(seen, n)) {
  }
  if (void* p = std::malloc(n ? n : 1)) return p;
  throw std::bad_alloc();
}
void* operator new[](std::size_t n) { return ::operator new(n); }
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }
// The nothrow forms too: std::stable_sort's temporary buffer comes from operator new(n, nothrow), and
// under ASan an unreplaced one would be freed by the replaced delete (alloc-dealloc mismatch).
void* operator new(std::size_t n, const std::nothrow_t&) noexcept {
  try {
    return ::operator new(n);
  } catch (const std::bad_alloc&) {
    return nullptr;
  }
}
void* operator new[](std::size_t n, const std::nothrow_t& t) noexcept { return ::operator new(n, t); }
void operator delete(void* p, const std::nothrow_t&) noexcept { std::free(p); }
void operator delete[](void* p, const std::nothrow_t&) noexcept { std::free(p); }
