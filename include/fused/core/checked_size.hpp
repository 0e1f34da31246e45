// Overflow-safe byte counts for sizes known only at run time (a config.json, a caller's tokens and
// KV capacity). A size is an int64 in [0, max_region_bytes]; -1 stands for "too large", and every
// operation on it stays -1, so a long product needs one check at its end.
// Run time only (__builtin_*_overflow): in constant evaluation the compiler rejects an overflow itself.
#pragma once
#include <cstdint>

namespace fused {

// 1 PiB: more than any machine this library runs on holds, and 2^13 times below INT64_MAX, so
// summing a region's aligned buffers (a few thousand, each at most this) cannot overflow.
inline constexpr std::int64_t max_region_bytes = std::int64_t{1} << 50;

// a * b, or -1 when either is negative or the product exceeds max_region_bytes.
inline std::int64_t checked_mul(std::int64_t a, std::int64_t b) {
  std::int64_t r = 0;
  if (a < 0 || b < 0 || __builtin_mul_overflow(a, b, &r) || r > max_region_bytes) return -1;
  return r;
}

// a + b, or -1 when either is negative or the sum exceeds max_region_bytes.
inline std::int64_t checked_add(std::int64_t a, std::int64_t b) {
  std::int64_t r = 0;
  if (a < 0 || b < 0 || __builtin_add_overflow(a, b, &r) || r > max_region_bytes) return -1;
  return r;
}

}  // namespace fused
