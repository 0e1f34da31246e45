// Overflow-safe sizes of a program under a binding, checked before planning at run time.
//
// A plan's byte counts are products of shape dims and symbol values, which at run time come from a
// config.json and the caller (tokens, KV capacity): plain int64 arithmetic on hostile values is
// undefined behaviour. find_oversize() recomputes every tensor's bytes with checked products and
// each region's total with checked sums (core/checked_size.hpp) (each buffer aligned, plus room for a canary), and names
// the first tensor or region over max_region_bytes. When it finds none, every offset and size the
// planner and the verifier compute is at most a region's total, so their int64 arithmetic is safe.
// Compile-time plans need no such pass: constant evaluation rejects an overflow itself.
#pragma once
#include <cstdint>
#include <optional>

#include "../core/checked_size.hpp"
#include "../graph/program.hpp"
#include "memory_plan.hpp"

namespace fused {

// bytes_of(t, b), or -1 when a dim is negative or the bytes exceed max_region_bytes.
inline std::int64_t checked_bytes_of(const tensor_info& t, const binding& b) {
  std::int64_t e = 1;
  for (int i = 0; i < t.shp.rank; ++i) e = checked_mul(e, checked_mul(t.shp.d[i].n, b.value[t.shp.d[i].symbol]));
  return checked_mul(e, size_of(t.type));
}

struct oversize {
  tensor_id tensor = -1;  // the tensor too large by itself; -1 when only the region's total is
  region where = region::activations;
};

// The first tensor, or else the first region, whose bytes exceed max_region_bytes; nullopt when
// the program can be planned under `b` without overflow.
inline std::optional<oversize> find_oversize(const program& p, const binding& b) {
  std::int64_t total[region_count]{};
  for (const tensor_info& t : p.tensors) {
    const std::int64_t bytes = checked_bytes_of(t, b);
    if (bytes < 0) return oversize{t.id, region_of(t)};
    std::int64_t& sum = total[static_cast<int>(region_of(t))];
    sum = checked_add(sum, checked_add(bytes, 2 * mem_align));  // alignment + canary
    if (sum < 0) return oversize{-1, region_of(t)};
  }
  return std::nullopt;
}

}  // namespace fused
