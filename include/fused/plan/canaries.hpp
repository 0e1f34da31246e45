// Canary words for debug builds: a memory plan moved apart so that `canary_bytes` of a known pattern
// follow every state and activation buffer, and a write past a buffer's end lands in its canary
// instead of in a neighbour. The generated C's Debug layout fills them and checks them after every
// step (docs/GENERATOR.md); any executor can do the same from the plan this returns.
//
// Buffers are moved, not re-planned: a buffer at the k-th distinct offset of its region moves up by
// k canaries. The map is monotone, so buffers that were disjoint stay disjoint with at least one
// canary between them, buffers that shared bytes (never live together, or an in-place chain) still
// do, and alignment holds (canary_bytes is a multiple of 64). The verifier (verifier.hpp) checks the
// result like any plan, canaries included: `memory_plan::canary` tells it how many bytes follow each
// state and activation buffer.
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "memory_plan.hpp"

namespace fused {

inline constexpr std::int64_t canary_bytes = 64;
inline constexpr unsigned char canary_fill = 0xFD;

// One region's layout with canaries: each buffer's new offset (-1 for buffers of other regions) and
// the region's new size (its last canary included).
struct canary_region {
  std::vector<std::int64_t> offset;
  std::int64_t bytes = 0;
};

inline canary_region canary_layout(const buffer* buffers, std::size_t n, region r) {
  std::vector<std::int64_t> starts;  // the region's distinct offsets, ascending
  for (std::size_t i = 0; i < n; ++i)
    if (buffers[i].where == r) starts.push_back(buffers[i].offset);
  std::sort(starts.begin(), starts.end());
  starts.erase(std::unique(starts.begin(), starts.end()), starts.end());
  canary_region c;
  c.offset.assign(n, -1);
  std::int64_t end = 0;
  for (std::size_t i = 0; i < n; ++i) {
    const buffer& b = buffers[i];
    if (b.where != r) continue;
    const auto rank = std::lower_bound(starts.begin(), starts.end(), b.offset) - starts.begin();
    c.offset[i] = b.offset + canary_bytes * static_cast<std::int64_t>(rank);
    end = std::max(end, c.offset[i] + b.bytes + canary_bytes);
  }
  c.bytes = align_up(end);
  return c;
}

// The plan with canaries after every state and activation buffer (weights are read-only: none).
inline memory_plan with_canaries(const memory_plan& m) {
  memory_plan d = m;
  d.canary = canary_bytes;
  for (const region r : {region::state, region::activations}) {
    const canary_region c = canary_layout(m.buffers.data(), m.buffers.size(), r);
    for (std::size_t i = 0; i < d.buffers.size(); ++i)
      if (d.buffers[i].where == r) d.buffers[i].offset = c.offset[i];
    d.region_bytes[static_cast<std::size_t>(r)] = c.bytes;
  }
  return d;
}

}  // namespace fused
