// The verifier: every memory plan passes it before use — in constant evaluation for a static model
// (static_assert), at run time for a config read from a file. It trusts nothing the planner says:
//   - every feed is bound to a buffer, and every step input is a feed or written at an earlier position;
//   - every offset is 64-byte aligned and every buffer lies inside its region;
//   - no two buffers of one region that are live at the same position share a byte, unless one is
//     the in-place continuation of the other (same offset; one's last reader writes the other);
//   - the arena is exactly the end of its last buffer (rounded to 64), and not below the lower bound;
//   - with canaries (memory_plan::canary > 0, plan/canaries.hpp), each state and activation buffer
//     is followed by that many bytes that no buffer live at the same time touches, inside its region.
// Cost: O(n + pairs of buffers live at once), found by sweeping in order of birth.
#pragma once
#include <utility>

#include "../core/sort.hpp"
#include "memory_plan.hpp"

namespace fused {

struct verdict {
  bool ok = true;
  text what{};
};

namespace detail {
constexpr bool in_place_pair(const buffer& a, const buffer& b) {
  return a.group == b.group && a.offset == b.offset && (a.last == b.first || b.last == a.first);
}
}  // namespace detail

constexpr verdict verify(const program& p, const memory_plan& m) {
  auto fail = [](text s) { return verdict{false, std::move(s)}; };
  if (!p.ok()) return fail("the program itself is invalid: " + p.message);
  if (m.buffers.size() != p.tensors.size()) return fail("the plan has " + to_text(static_cast<std::int64_t>(m.buffers.size())) + " buffers for " + to_text(static_cast<std::int64_t>(p.tensors.size())) + " tensors");
  // Raw pointers and no std::sort: this runs in constant evaluation for every static plan (see
  // core/sort.hpp and docs/COMPILE_TIME.md).
  const std::size_t nt = p.tensors.size();
  const tensor_info* const tensors = p.tensors.data();
  const buffer* const buf = m.buffers.data();
  const scratch<int> pos_v = p.position_of_step();
  const int* const pos = pos_v.data();
  const step* const steps = p.steps.data();
  for (std::size_t s = 0; s < p.steps.size(); ++s) {
    const step& st = steps[s];
    const tensor_id* const in = st.inputs.data();
    for (int k = 0; k < st.n_inputs; ++k) {
      const tensor_info& t = tensors[in[k]];
      if (t.is_feed) continue;
      if (t.producer < 0 || pos[t.producer] >= static_cast<int>(s))
        return fail("step " + to_text(st.id) + " '" + st.op->name + "' reads '" + t.name.str() + "' before any step writes it");
    }
  }
  std::int64_t max_end[region_count]{};
  int max_first = 0;
  for (std::size_t i = 0; i < nt; ++i) {
    const buffer& b = buf[i];
    const tensor_info& t = tensors[b.tensor];
    const auto r = static_cast<std::size_t>(b.where);
    const std::int64_t tail = m.canary_after(b.where);
    if (b.bytes <= 0) return fail("tensor '" + t.name.str() + "' is bound to an empty buffer");
    if (b.offset % mem_align) return fail("tensor '" + t.name.str() + "' offset " + to_text(b.offset) + " is not 64-byte aligned");
    if (b.offset < 0 || b.offset + b.bytes + tail > m.region_bytes[r])
      return fail("tensor '" + t.name.str() + "' [" + to_text(b.offset) + ", " + to_text(b.offset + b.bytes) + ") lies outside region " + name_of(b.where));
    if (b.first > b.last) return fail("tensor '" + t.name.str() + "' dies before it is born");
    if (b.first < 0) return fail("tensor '" + t.name.str() + "' is born before the first step");
    if (align_up(b.offset + b.bytes + tail) > max_end[r]) max_end[r] = align_up(b.offset + b.bytes + tail);
    if (b.first > max_first) max_first = b.first;
  }
  // Weights and state live for the whole call: in offset order, each buffer must start at or after
  // the end of everything before it (state updated in place shares its feed's bytes by design).
  // The planner lays them out in feed order, so the order is usually already sorted.
  scratch<int> order_v(nt);
  int* const order = order_v.data();
  for (const region r : {region::weights, region::state}) {
    std::size_t n = 0;
    for (std::size_t i = 0; i < nt; ++i)
      if (buf[i].where == r && buf[i].group == buf[i].tensor) order[n++] = buf[i].tensor;
    bool sorted = true;
    for (std::size_t i = 1; i < n && sorted; ++i) sorted = buf[order[i - 1]].offset <= buf[order[i]].offset;
    if (!sorted) insertion_sort(order, order + n, [buf](int x, int y) { return buf[x].offset < buf[y].offset; });
    for (std::size_t i = 1; i < n; ++i) {
      const buffer &prev = buf[order[i - 1]], &cur = buf[order[i]];
      if (cur.offset < prev.offset + prev.bytes + m.canary_after(r))
        return fail("tensors '" + tensors[prev.tensor].name.str() + "' and '" + tensors[cur.tensor].name.str() + "' share bytes in region " + name_of(r));
    }
    for (std::size_t i = 0; i < nt; ++i) {
      const buffer& b = buf[i];
      if (b.where == r && b.group != b.tensor && (b.offset != buf[b.group].offset || buf[b.group].where != r))
        return fail("tensor '" + tensors[b.tensor].name.str() + "' updates state in place but does not sit on its bytes");
    }
  }
  // Activations: every pair live at a common position (found by a sweep in order of birth) must
  // use disjoint bytes, unless it is an in-place pair.
  scratch<int> first_v(nt);
  std::size_t na = 0;
  for (std::size_t i = 0; i < nt; ++i)
    if (buf[i].where == region::activations) {
      order[na] = buf[i].tensor;
      first_v[na++] = buf[i].first;
    }
  const scratch<int> by_first = counting_order(first_v.data(), na, static_cast<std::size_t>(max_first) + 1);
  const int* const act = order;
  const int* const bf = by_first.data();
  const std::int64_t gap = m.canary_after(region::activations);
  for (std::size_t i = 0; i < na; ++i) {
    const buffer& a = buf[act[bf[i]]];
    for (std::size_t j = i + 1; j < na; ++j) {
      const buffer& b = buf[act[bf[j]]];
      if (b.first > a.last) break;
      const bool share = a.offset < b.offset + b.bytes + gap && b.offset < a.offset + a.bytes + gap;
      if (share && !detail::in_place_pair(a, b))
        return fail("tensors '" + tensors[a.tensor].name.str() + "' and '" + tensors[b.tensor].name.str() +
                    "' share bytes in the activation arena while both are live");
    }
  }
  for (int r = 0; r < region_count; ++r)
    if (m.region_bytes[static_cast<std::size_t>(r)] != max_end[r])
      return fail(text("region ") + name_of(static_cast<region>(r)) + " is " + to_text(m.region_bytes[static_cast<std::size_t>(r)]) +
                  " bytes but its buffers end at " + to_text(max_end[r]));
  if (m.lower_bound > m.arena_bytes()) return fail("the arena is smaller than the lower bound: the lower bound is wrong");
  return {};
}

}  // namespace fused
