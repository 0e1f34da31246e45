// A memory plan: where every tensor of a program lives for one mode, and which kernel each step runs.
//
// Regions (caller-owned, each 64-byte aligned at its base):
//   weights      read-only parameters, laid out in feed order;
//   state        persistent across calls (the KV cache); a step that updates state in place writes
//                the same bytes as the state feed, so the layout is identical in every mode;
//   activations  one arena per mode: inputs, intermediates, outputs, reused by lifetime.
// Lifetimes are inclusive schedule positions [first, last]: a buffer is live at the step that writes
// it and at every step up to its last reader. Two activation buffers may share bytes only if their
// lifetimes are disjoint, or if one is the in-place continuation of the other (same offset; the
// older one's last reader is the step that writes the newer one). Such chains form a `group`.
#pragma once
#include <array>
#include <cstdint>
#include <vector>

#include "../graph/program.hpp"

namespace fused {

enum class region : std::uint8_t { weights, state, activations };
inline constexpr int region_count = 3;
inline constexpr std::int64_t mem_align = 64;

constexpr const char* name_of(region r) {
  switch (r) {
    case region::weights: return "weights";
    case region::state: return "state";
    case region::activations: return "activations";
  }
  return "?";
}

constexpr std::int64_t align_up(std::int64_t x, std::int64_t a = mem_align) { return (x + a - 1) / a * a; }

// Byte size of a tensor under a binding.
constexpr std::int64_t bytes_of(const tensor_info& t, const binding& b) { return t.shp.elements(b) * size_of(t.type); }

// The region a tensor lives in, by its role.
constexpr region region_of(const tensor_info& t) {
  if (t.kind == role::weight) return region::weights;
  if (t.kind == role::state) return region::state;
  return region::activations;
}

struct buffer {
  tensor_id tensor = -1;
  region where = region::activations;
  std::int64_t offset = 0;
  std::int64_t bytes = 0;
  int first = 0;   // schedule position of the first step that needs it live
  int last = 0;    // schedule position of its last reader
  int group = -1;  // in-place chain: buffers of one group share offset and bytes
};

enum class strategy : std::uint8_t { greedy_by_size, greedy_by_first_use };

constexpr const char* name_of(strategy s) {
  return s == strategy::greedy_by_size ? "greedy_by_size" : "greedy_by_first_use";
}

struct memory_plan {
  binding bind{};
  std::vector<buffer> buffers;        // index == tensor id
  std::vector<const char*> kernels;   // index == schedule position
  std::array<std::int64_t, region_count> region_bytes{};
  std::int64_t lower_bound = 0;       // max over steps of the activation bytes live at that step
  strategy chosen = strategy::greedy_by_size;
  // What each strategy needed, for the record; -1: greedy_by_first_use was not tried, because
  // greedy_by_size already reached the lower bound.
  std::array<std::int64_t, 2> arena_by_strategy{};
  std::int64_t canary = 0;  // bytes of canary after every state and activation buffer (plan/canaries.hpp)

  constexpr std::int64_t arena_bytes() const { return region_bytes[static_cast<int>(region::activations)]; }
  // Canary bytes that follow each buffer of region r (weights are read-only: none).
  constexpr std::int64_t canary_after(region r) const { return r == region::weights ? 0 : canary; }
  constexpr const buffer& of(tensor_id t) const { return buffers[static_cast<std::size_t>(t)]; }
};

}  // namespace fused
