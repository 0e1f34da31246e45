// A program and its memory plan frozen into fixed-size arrays, so they survive constant evaluation
// and become `static constexpr` data: every offset and shape a compile-time constant that a static
// model turns into direct kernel calls and users can `static_assert` on.
//
// Cost note: the program is built by constexpr functions over std::vector (transient allocation)
// and copied once here; types never carry the graph (a type-level plan compiled 55-250x slower).
#pragma once
#include <array>
#include <cstddef>

#include "../graph/diagnose.hpp"
#include "memory_plan.hpp"
#include "verifier.hpp"

namespace fused {

// NR, NC: the program's control-flow regions and loop carries (none for a straight-line program).
template <std::size_t NT, std::size_t NS, std::size_t NR = 0, std::size_t NC = 0>
struct static_plan {
  binding bind{};
  std::array<tensor_info, NT> tensors{};
  std::array<step, NS> steps{};
  std::array<region_info, NR> regions{};
  std::array<loop_carry, NC> carries{};
  std::array<buffer, NT> buffers{};
  std::array<const char*, NS> kernels{};
  std::array<std::int64_t, region_count> region_bytes{};
  std::int64_t lower_bound = 0;
  bool training = false;  // the program's flag (mode-sensitive steps honour it)
  strategy chosen = strategy::greedy_by_size;
  diagnostic failure{};  // empty: verified

  static constexpr std::size_t tensor_count = NT;
  static constexpr std::size_t step_count = NS;

  constexpr std::int64_t arena_bytes() const { return region_bytes[static_cast<std::size_t>(region::activations)]; }
  constexpr std::int64_t weights_bytes() const { return region_bytes[static_cast<std::size_t>(region::weights)]; }
  constexpr std::int64_t state_bytes() const { return region_bytes[static_cast<std::size_t>(region::state)]; }
  constexpr const buffer& of(tensor_id t) const { return buffers[static_cast<std::size_t>(t)]; }
  // Offset of the tensor with this name in its region (-1 if absent), e.g. for a static_assert.
  constexpr std::int64_t offset_of(std::string_view name) const {
    for (const auto& t : tensors)
      if (t.name.str().view() == name) return buffers[static_cast<std::size_t>(t.id)].offset;
    return -1;
  }
};

template <std::size_t NT, std::size_t NS, std::size_t NR = 0, std::size_t NC = 0>
constexpr static_plan<NT, NS, NR, NC> freeze(const program& p, const memory_plan& m) {
  static_plan<NT, NS, NR, NC> s{};
  s.bind = m.bind;
  // Raw pointers: every operator[] would be one more call for the evaluator to interpret.
  const std::size_t nt = NT < p.tensors.size() ? NT : p.tensors.size(), ns = NS < p.steps.size() ? NS : p.steps.size();
  const std::size_t nb = NT < m.buffers.size() ? NT : m.buffers.size(), nk = NS < m.kernels.size() ? NS : m.kernels.size();
  {
    tensor_info* const to = s.tensors.data();
    const tensor_info* const from = p.tensors.data();
    for (std::size_t i = 0; i < nt; ++i) to[i] = from[i];
  }
  {
    step* const to = s.steps.data();
    const step* const from = p.steps.data();
    for (std::size_t i = 0; i < ns; ++i) to[i] = from[i];
  }
  {
    buffer* const to = s.buffers.data();
    const buffer* const from = m.buffers.data();
    for (std::size_t i = 0; i < nb; ++i) to[i] = from[i];
  }
  {
    const char** const to = s.kernels.data();
    const char* const* const from = m.kernels.data();
    for (std::size_t i = 0; i < nk; ++i) to[i] = from[i];
  }
  for (std::size_t i = 0; i < NR && i < p.regions.size(); ++i) s.regions[i] = p.regions[i];
  for (std::size_t i = 0; i < NC && i < p.carries.size(); ++i) s.carries[i] = p.carries[i];
  s.region_bytes = m.region_bytes;
  s.lower_bound = m.lower_bound;
  s.training = p.training;
  s.chosen = m.chosen;
  if (p.tensors.size() != NT || p.steps.size() != NS || p.regions.size() != NR || p.carries.size() != NC) {
    s.failure = diagnostic("the program's size differs from the size it was counted at");
    return s;
  }
  const verdict v = verify(p, m);
  if (!v.ok) s.failure = diagnostic(v.what.view());
  return s;
}

}  // namespace fused
