// The verifier: every memory plan passes it before use — in constant evaluation for a static model
// (static_assert), at run time for a config read from a file. It trusts nothing the planner says:
//   - every buffer is its own tensor's, in the region of the tensor's role, and exactly as large as
//     the tensor's shape under the plan's binding;
//   - every feed is bound to a buffer, and every step input is a feed or written at an earlier position;
//   - an activation buffer is live wherever its tensor is touched: at the step that writes it, at
//     every step that reads it or uses it as a workspace, from the first position for an input and
//     to the last for an output;
//   - every offset is 64-byte aligned and every buffer lies inside its region;
//   - no two buffers of one region that are live at the same position share a byte, unless the newer
//     one is written in place over the older one: same offset and bytes, and the older one's last
//     reader is the step that writes the newer one through its op's in-place input;
//   - the arena is exactly the end of its last buffer (rounded to 64), and not below the lower bound;
//   - with canaries (memory_plan::canary > 0, plan/canaries.hpp), each state and activation buffer
//     is followed by that many bytes that no buffer live at the same time touches, inside its region.
// The planner's groups are not trusted: which buffers may share bytes follows from the program's steps.
// Control flow (program::regions): the regions' structure is checked; values read in loops and
// conditions live where planner.hpp's rules say; two values made in the two branches of one
// conditional may share bytes (one of them is never written); in place inside a loop only within a
// trip, or a carry's next value over the carry (planner.hpp: carried_over).
// Cost: O(n + pairs of buffers live at once), found by sweeping in order of birth.
#pragma once
#include <utility>

#include "../core/sort.hpp"
#include "memory_plan.hpp"
#include "planner.hpp"

namespace fused {

struct verdict {
  bool ok = true;
  text what{};
};

namespace detail {
// `newer` is written in place over `older`: same bytes, and the step at older's last position writes
// newer through its op's in-place input (or, a merge, from either branch's value), reading older
// there; inside a loop, older was made in the same trip and control flow does not read it after
// that step (planner.hpp: read_after). (steps: in schedule order.)
constexpr bool written_over(const program& p, const buffer& older, const buffer& newer, const int* pos, const int* loop_at) {
  const int ns = static_cast<int>(p.steps.size());
  if (older.offset != newer.offset || older.bytes != newer.bytes || older.last != newer.first || newer.first >= ns) return false;
  const step& st = p.steps[static_cast<std::size_t>(newer.first)];
  if (st.result != newer.tensor) return false;
  const bool from_branch = st.op->selects && (st.inputs[1] == older.tensor || st.inputs[2] == older.tensor);
  if (st.in_place_source() != older.tensor && !from_branch) return false;
  return !loop_at || (same_trip(p, loop_at, birth(p, pos, older.tensor), newer.first) && !read_after(p, older.tensor, newer.first));
}
// a and b are made in the two branches of one conditional: at most one of them is ever written.
constexpr bool exclusive(const program& p, const buffer& a, const buffer& b, const int* pos) {
  const int ba = birth(p, pos, a.tensor), bb = birth(p, pos, b.tensor);
  if (ba < 0 || bb < 0) return false;
  for (std::size_t r = 0; r + 1 < p.regions.size(); ++r) {
    const region_info &then_branch = p.regions[r], &else_branch = p.regions[r + 1];
    if (then_branch.kind != region_kind::then_branch) continue;
    if ((then_branch.holds(ba) && else_branch.holds(bb)) || (then_branch.holds(bb) && else_branch.holds(ba))) return true;
  }
  return false;
}
// `next` is a loop carry's next value written over the carry `value` in place (planner.hpp:
// carried_over): same bytes, and the step that writes it is allowed to.
constexpr bool carried_pair(const program& p, const buffer& value, const buffer& next, const int* pos) {
  if (value.offset != next.offset || value.bytes != next.bytes) return false;
  const int producer = p.tensors[static_cast<std::size_t>(next.tensor)].producer;
  return producer >= 0 && carried_over(p, value.tensor, pos[producer]);
}
constexpr bool may_share(const program& p, const buffer& a, const buffer& b, const int* pos, const int* loop_at) {
  return written_over(p, a, b, pos, loop_at) || written_over(p, b, a, pos, loop_at) ||
         (loop_at && (exclusive(p, a, b, pos) || carried_pair(p, a, b, pos) || carried_pair(p, b, a, pos)));
}

// Control flow's structure as the scheduler must leave it: each region's positions inside its
// parent's, a conditional's else branch right after its then branch, every step inside its
// region, a loop's header inside it, conditions and carries well formed. Empty: fine.
constexpr text check_regions(const program& p, const int* pos) {
  const int ns = static_cast<int>(p.steps.size());
  for (std::size_t r = 0; r < p.regions.size(); ++r) {
    const region_info& g = p.regions[r];
    const text name = text(name_of(g.kind)) + " region " + to_text(static_cast<std::int64_t>(r));
    if (g.first < 0 || g.count < 0 || g.end() > ns) return name + " lies outside the schedule";
    if (g.parent >= 0) {
      const region_info& up = p.regions[static_cast<std::size_t>(g.parent)];
      if (g.first < up.first || g.end() > up.end()) return name + " is not inside its parent region";
    }
    if (g.kind == region_kind::then_branch && (r + 1 >= p.regions.size() || p.regions[r + 1].kind != region_kind::else_branch || p.regions[r + 1].first != g.end()))
      return name + " is not followed by its else branch";
    if (g.kind == region_kind::loop_body && (g.header < 0 || g.header > g.count)) return name + " has a header outside its body";
    if (g.condition >= 0 && (g.condition >= static_cast<tensor_id>(p.tensors.size()) || p.tensor(g.condition).type != dtype::boolean))
      return name + " has a condition that is not a bool tensor";
  }
  for (int s = 0; s < ns; ++s) {
    const step& st = p.steps[static_cast<std::size_t>(s)];
    for (int r = st.region; r >= 0; r = p.regions[static_cast<std::size_t>(r)].parent)
      if (!p.regions[static_cast<std::size_t>(r)].holds(s))
        return "step " + to_text(st.id) + " '" + st.op->name + "' at position " + to_text(s) + " lies outside its region " + to_text(r);
  }
  for (const loop_carry& c : p.carries) {
    const int copy = p.tensor(c.value).producer;
    if (c.loop < 0 || c.loop >= static_cast<int>(p.regions.size()) || copy < 0 || c.next < 0 || pos[copy] >= p.regions[static_cast<std::size_t>(c.loop)].first)
      return "carry '" + p.tensor(c.value).name.str() + "' is not made before its loop or has no next value";
  }
  return {};
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
  const int ns = static_cast<int>(p.steps.size());
  // An activation buffer must be live at position s; weights and state live for the whole call.
  auto unlive = [&](tensor_id id, int s, const char* how, const step& st) {
    const buffer& b = buf[id];
    return "tensor '" + tensors[id].name.str() + "' is " + how + " step " + to_text(st.id) + " '" + st.op->name + "' at position " +
           to_text(s) + ", but its buffer is live only at positions " + to_text(b.first) + ".." + to_text(b.last);
  };
  // Control flow: the structure, and the lifetimes its reads need (planner.hpp's rules).
  const bool control = !p.regions.empty();
  scratch<int> loop_at_v;  // (not `control ? ... : ...`: g++ 12 frees the taken branch's storage early in constant evaluation)
  if (control) loop_at_v = p.innermost_loops();
  const int* const loop_at = control ? loop_at_v.data() : nullptr;
  if (control) {
    if (text why = detail::check_regions(p, pos); !why.empty()) return fail(why);
    scratch<int> need_first(nt), need_last(nt);
    for (std::size_t t = 0; t < nt; ++t) need_first[t] = need_last[t] = tensors[t].producer >= 0 ? pos[tensors[t].producer] : -1;
    detail::control_lifetimes(p, pos, loop_at, need_first.data(), need_last.data());
    for (std::size_t t = 0; t < nt; ++t) {
      const buffer& b = buf[t];
      if (b.where != region::activations || need_last[t] < 0) continue;
      if (b.first > need_first[t] || b.last < need_last[t])
        return fail("tensor '" + tensors[t].name.str() + "' must be live at positions " + to_text(need_first[t]) + ".." + to_text(need_last[t]) +
                    " (control flow reads it there), but its buffer is live only at " + to_text(b.first) + ".." + to_text(b.last));
    }
  }
  for (int s = 0; s < ns; ++s) {
    const step& st = steps[s];
    const auto& in = st.inputs;  // indexed in place (core/shape.hpp)
    for (int k = 0; k < st.n_inputs; ++k) {
      const tensor_info& t = tensors[in[k]];
      const buffer& b = buf[in[k]];
      if (!t.is_feed && (t.producer < 0 || pos[t.producer] >= s))
        return fail("step " + to_text(st.id) + " '" + st.op->name + "' reads '" + t.name.str() + "' before any step writes it");
      if (b.where == region::activations && (b.first > s || b.last < s)) return fail(unlive(in[k], s, "read by", st));
    }
    const buffer& r = buf[st.result];
    if (r.where == region::activations && (r.first > s || r.last < s)) return fail(unlive(st.result, s, "written by", st));
    if (st.work >= 0) {
      const buffer& w = buf[st.work];
      if (w.where == region::activations && (w.first > s || w.last < s)) return fail(unlive(st.work, s, "the workspace of", st));
    }
  }
  std::int64_t max_end[region_count]{};
  int max_first = 0;
  for (std::size_t i = 0; i < nt; ++i) {
    const buffer& b = buf[i];
    const tensor_info& t = tensors[i];
    if (b.tensor != t.id)
      return fail("buffer " + to_text(static_cast<std::int64_t>(i)) + " holds tensor " + to_text(b.tensor) + ", not tensor '" + t.name.str() + "'");
    const region home = region_of(t);
    if (b.where != home)
      return fail("tensor '" + t.name.str() + "' (" + name_of(t.kind) + ") is placed in region " + name_of(b.where) + ", not " + name_of(home));
    const bool act = home == region::activations;
    const auto r = static_cast<std::size_t>(b.where);
    const std::int64_t tail = m.canary_after(home);
    if (b.bytes <= 0) return fail("tensor '" + t.name.str() + "' is bound to an empty buffer");
    if (const std::int64_t need = bytes_of(t, m.bind); b.bytes != need)
      return fail("tensor '" + t.name.str() + "' takes " + to_text(need) + " bytes under the plan's binding, but its buffer has " + to_text(b.bytes));
    if (act) {
      if (t.kind == role::input && b.first > 0)
        return fail("input '" + t.name.str() + "' must be live from position 0 (the caller writes it before the call), but its buffer is born at position " + to_text(b.first));
      if (t.kind == role::output && b.last < ns - 1)
        return fail("output '" + t.name.str() + "' must stay live to the last position " + to_text(ns - 1) + " (the caller reads it after the call), but its buffer dies at position " + to_text(b.last));
    }
    if (b.offset % mem_align) return fail("tensor '" + t.name.str() + "' offset " + to_text(b.offset) + " is not 64-byte aligned");
    const std::int64_t end = align_up(b.offset + b.bytes + tail);
    if (b.offset < 0 || b.offset + b.bytes + tail > m.region_bytes[r])
      return fail("tensor '" + t.name.str() + "' [" + to_text(b.offset) + ", " + to_text(b.offset + b.bytes) + ") lies outside region " + name_of(b.where));
    if (b.first > b.last) return fail("tensor '" + t.name.str() + "' dies before it is born");
    if (b.first < 0) return fail("tensor '" + t.name.str() + "' is born before the first step");
    if (act && b.last >= ns && ns > 0)
      return fail("tensor '" + t.name.str() + "' outlives the last step (position " + to_text(b.last) + " of " + to_text(ns) + ")");
    if (end > max_end[r]) max_end[r] = end;
    if (b.first > max_first) max_first = b.first;
  }
  // Weights and state live for the whole call: in offset order, each feed's buffer must start at or
  // after the end of everything before it. A state tensor a step produces is that step's in-place
  // update of its state input (the builder makes nothing else state) and must sit on its bytes.
  // The planner lays them out in feed order, so the order is usually already sorted.
  scratch<int> order_v(nt);
  int* const order = order_v.data();
  for (const region r : {region::weights, region::state}) {
    std::size_t n = 0;
    for (std::size_t i = 0; i < nt; ++i)
      if (buf[i].where == r && tensors[i].producer < 0) order[n++] = static_cast<int>(i);
    bool sorted = true;
    for (std::size_t i = 1; i < n && sorted; ++i) sorted = buf[order[i - 1]].offset <= buf[order[i]].offset;
    if (!sorted) insertion_sort(order, order + n, [buf](int x, int y) { return buf[x].offset < buf[y].offset; });
    for (std::size_t i = 1; i < n; ++i) {
      const buffer &prev = buf[order[i - 1]], &cur = buf[order[i]];
      if (cur.offset < prev.offset + prev.bytes + m.canary_after(r))
        return fail("tensors '" + tensors[prev.tensor].name.str() + "' and '" + tensors[cur.tensor].name.str() + "' share bytes in region " + name_of(r));
    }
    for (std::size_t i = 0; i < nt; ++i) {
      if (buf[i].where != r || tensors[i].producer < 0) continue;
      const tensor_id src = steps[pos[tensors[i].producer]].in_place_source();
      if (src < 0 || buf[src].where != r || buf[src].offset != buf[i].offset || buf[src].bytes != buf[i].bytes)
        return fail("tensor '" + tensors[i].name.str() + "' updates state in place but does not sit on its bytes");
    }
  }
  // An in-place state update overwrites its input: no step after it may read the old value (a train
  // step reads a parameter in forward and backward, and updates it last).
  for (int s = 0; s < ns; ++s) {
    const tensor_id src = steps[s].in_place_source();
    if (src < 0 || buf[src].where != region::state) continue;
    for (int later = s + 1; later < ns; ++later)
      for (int k = 0; k < steps[later].n_inputs; ++k)
        if (steps[later].inputs[k] == src && (p.regions.empty() || steps[later].region == steps[s].region))
          return fail("step " + to_text(steps[later].id) + " '" + steps[later].op->name + "' reads '" + tensors[src].name.str() +
                      "' after step " + to_text(steps[s].id) + " '" + steps[s].op->name + "' updated it in place");
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
      if (share && !detail::may_share(p, a, b, pos, loop_at))
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
