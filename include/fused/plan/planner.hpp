// The memory planner: program + bound mode -> memory_plan.
//
// 1. Lowering: the binding gives every tensor its byte size; each step's op names its kernel.
// 2. Lifetimes in schedule order (inclusive). Inputs are live from position 0 (the caller writes
//    them before the call), outputs to the last position (the caller reads them after), a
//    workspace from the first step that uses it to the last (steps may share one: op_def::work).
// 3. In-place chains: a step whose op declares an in-place input writes its result over that input
//    when the input is an activation of the result's dtype and shape whose last reader is this very
//    step (residual add, SwiGLU, RoPE). Over a state feed the in-place write is how state is updated
//    (KV cache).
// 4. Activation groups are placed by two strategies and the smaller arena is kept:
//    - greedy by size (TFLite Micro's planner): largest first, each at the lowest offset that
//      does not collide with an already placed group whose lifetime overlaps;
//    - greedy by first use: in order of birth, best fit (the smallest gap that holds it), tried
//      only when greedy by size is above the lower bound (the most bytes live at one position).
// 5. Weights and state are laid out in feed order, each buffer 64-byte aligned.
// Control flow (program::regions) adds rules to 2 and 3 (detail::control_lifetimes, same_trip,
// read_after, carried_over, merge_groups): values read inside a loop but made before it live to its
// end, as do its carries; in place only within one trip, or over a carry by the step that makes its
// next value; a merge sits on its branches' values.
// Steps 2 and 3 and the groups' birth order and overlaps depend on the program alone, not on the
// mode: `lifetimes_of(program)` computes them once, and `plan_memory(program, lifetimes, binding)`
// does the rest for each mode (in constant evaluation that half is the cost a second mode adds).
// The result always goes through verify() (fused/plan/verifier.hpp) before anyone uses it.
#pragma once
#include <cstdint>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "../core/sort.hpp"
#include "memory_plan.hpp"

namespace fused {

// Compile-cost notes (constant evaluation is the budget: docs/COMPILE_TIME.md). Loops walk raw
// pointers (each vector::operator[] or iterator step is a call the evaluator interprets), no
// std::sort (see core/sort.hpp), and working arrays are scratch arrays filled by index, never
// vectors grown by push_back (core/vector.hpp). The plan is the same as the straightforward code
// would make, bit for bit.
namespace detail {

// Which groups' lifetimes overlap, as adjacency lists in one array: the neighbours of group g are
// list[begin[g] .. begin[g + 1]). Sweep in order of birth: a later-born group overlaps an earlier
// one iff it is born before the earlier one dies. O(n + pairs), and pairs are few: most activations
// live inside one layer. (The order within a list does not matter: place() sorts what it reads.)
struct overlap_lists {
  scratch<int> begin;
  scratch<int> list;
  std::int64_t pairs = 0;  // overlapping pairs of groups
  int busiest = -1, busiest_overlaps = 0;  // the group that overlaps the most others, and how many
};

// Pairs of overlapping lifetimes grow as the square of the values live at once: a graph file whose
// thousands of Inputs are all read at its end would ask for gigabytes of lists (20,000 of them: 1.6 GB,
// 10 s). Past this many (the lists' 512 MiB) lifetimes_of stops with an error naming the busiest value.
inline constexpr std::int64_t max_overlap_pairs = std::int64_t{1} << 26;

constexpr overlap_lists overlaps(const int* first_of, const int* last_of, const int* by_first, std::size_t n) {
  overlap_lists o;
  // In birth order, group i overlaps exactly the later groups i+1 .. reach[i]-1 (born before it
  // dies). Its degree is that count plus the number of earlier groups whose reach covers it.
  scratch<int> reach_v(n), cover_v(n + 1, 0);
  int* const reach = reach_v.data();
  int* const cover = cover_v.data();
  {
    scratch<int> first_v(n);
    int* const first = first_v.data();
    for (std::size_t i = 0; i < n; ++i) first[i] = first_of[by_first[i]];
    for (std::size_t i = 0; i < n; ++i) {
      const int last = last_of[by_first[i]];
      std::size_t j = i + 1;
      while (j < n && first[j] <= last) ++j;
      reach[i] = static_cast<int>(j);
      ++cover[i + 1];
      --cover[j];
    }
  }
  scratch<int> degree(n + 1, 0);
  int* const deg = degree.data();
  int covered = 0;
  std::int64_t ends = 0;  // list entries: each pair twice
  for (std::size_t i = 0; i < n; ++i) {
    covered += cover[i];
    deg[by_first[i]] = reach[i] - static_cast<int>(i) - 1 + covered;
    ends += deg[by_first[i]];
    if (o.busiest < 0 || deg[by_first[i]] > o.busiest_overlaps) {
      o.busiest = by_first[i];
      o.busiest_overlaps = deg[by_first[i]];
    }
  }
  o.pairs = ends / 2;
  if (o.pairs > max_overlap_pairs) return o;  // no lists: lifetimes_of refuses the program
  o.begin = scratch<int>(n + 1);
  int at = 0;
  for (std::size_t i = 0; i <= n; ++i) {
    o.begin[i] = at;
    at += deg[i];
  }
  o.list = scratch<int>(static_cast<std::size_t>(at));
  int* const next = deg;  // reused as the fill cursor of each list
  const int* const b = o.begin.data();
  for (std::size_t i = 0; i < n; ++i) next[i] = b[i];
  int* const list = o.list.data();
  for (std::size_t i = 0; i < n; ++i) {
    const int a = by_first[i];
    for (int j = static_cast<int>(i) + 1; j < reach[i]; ++j) {
      const int bj = by_first[j];
      list[next[a]++] = bj;
      list[next[bj]++] = a;
    }
  }
  return o;
}

// Places `order`'s groups into one arena, writing offset[g]; returns its size. first_fit: the
// lowest gap that holds the group; else best fit (the smallest such gap). need[g]: aligned bytes.
constexpr std::int64_t place(const std::int64_t* need, std::size_t n, const overlap_lists& o, const int* order, bool first_fit,
                             std::int64_t* offset) {
  for (std::size_t i = 0; i < n; ++i) offset[i] = -1;
  int widest = 0;
  const int* const b = o.begin.data();
  for (std::size_t i = 0; i < n; ++i) widest = b[i + 1] - b[i] > widest ? b[i + 1] - b[i] : widest;
  // [begin, end) of the placed groups that collide with the current one, as pairs in one array.
  scratch<std::int64_t> busy_v(2 * static_cast<std::size_t>(widest));
  std::int64_t* const busy = busy_v.data();
  const int* const list = o.list.data();
  std::int64_t arena = 0;
  scratch<std::int64_t> end_v(n);  // offset + aligned bytes of each placed group
  std::int64_t* const end = end_v.data();
  for (std::size_t i = 0; i < n; ++i) {
    const int gi = order[i];
    int nb = 0;
    for (int k = b[gi]; k < b[gi + 1]; ++k) {
      const int oj = list[k];
      const std::int64_t ob = offset[oj];
      if (ob < 0) continue;
      // Insertion into the sorted pairs, ordered by (begin, end).
      const std::int64_t oe = end[oj];
      int j = nb++;
      while (j > 0 && (busy[2 * j - 2] > ob || (busy[2 * j - 2] == ob && busy[2 * j - 1] > oe))) {
        busy[2 * j] = busy[2 * j - 2];
        busy[2 * j + 1] = busy[2 * j - 1];
        --j;
      }
      busy[2 * j] = ob;
      busy[2 * j + 1] = oe;
    }
    const std::int64_t want = need[gi];
    std::int64_t best = -1, best_gap = 0, at = 0;
    for (int k = 0; k < nb; ++k) {
      const std::int64_t bb = busy[2 * k], e = busy[2 * k + 1];
      if (bb - at >= want) {
        if (first_fit) { best = at; break; }
        if (best < 0 || bb - at < best_gap) { best = at; best_gap = bb - at; }
      }
      if (e > at) at = e;
    }
    if (best < 0) best = at;  // after everything that collides
    offset[gi] = best;
    end[gi] = best + want;
    if (best + want > arena) arena = best + want;
  }
  return arena;
}

// Control flow (program::regions). Where a value is made: its producer's position; a feed's is -1.
constexpr int birth(const program& p, const int* pos, tensor_id t) {
  const int q = p.tensors[static_cast<std::size_t>(t)].producer;
  return q < 0 ? -1 : pos[q];
}

// Whether position `at` and the birth position `born` lie in the same trip: every loop holding `at`
// holds `born` too.
constexpr bool same_trip(const program& p, const int* loop_at, int born, int at) {
  const int l = loop_at[at];
  return l < 0 || p.regions[static_cast<std::size_t>(l)].holds(born);
}

// Control flow reads two kinds of values after the step at a position has run: a carry's next
// value after the last step of its loop's body (it is copied into the carry's bytes then), a loop's
// condition after the last step of its header. That step must not write over them in place.
constexpr bool read_after(const program& p, tensor_id t, int s) {
  for (const loop_carry& c : p.carries) {
    const region_info& g = p.regions[static_cast<std::size_t>(c.loop)];
    if (c.next == t && g.count > 0 && g.end() - 1 == s) return true;
  }
  for (const region_info& g : p.regions)
    if (g.kind == region_kind::loop_body && g.condition == t && g.header > 0 && g.first + g.header - 1 == s) return true;
  return false;
}

// A loop carry updated in place: the step at position s writes the carry's next value over the
// carry itself (its op's in-place input), directly in the loop's body, after the header (so the
// value is intact whenever the loop ends at its check), and nothing later in the trip reads the
// carry, nor is it another carry's next value. Then the next value is already in the carry's bytes
// when the trip ends, and the copy moves nothing.
constexpr bool carried_over(const program& p, tensor_id value, int s) {
  const step& st = p.steps[static_cast<std::size_t>(s)];
  if (st.in_place_source() != value) return false;
  const loop_carry* carry = nullptr;
  for (const loop_carry& c : p.carries) {
    if (c.value == value && c.next == st.result) carry = &c;
    if (c.next == value) return false;
  }
  if (!carry || st.region != carry->loop) return false;
  const region_info& g = p.regions[static_cast<std::size_t>(carry->loop)];
  if (s < g.first + g.header || s >= g.end()) return false;
  const tensor_info &in = p.tensors[static_cast<std::size_t>(value)], &res = p.tensors[static_cast<std::size_t>(st.result)];
  // (The carry may be an output: its bytes hold its last value either way.)
  if (region_of(in) != region::activations || in.is_feed || region_of(res) != region::activations || in.type != res.type || !(in.shp == res.shp))
    return false;
  for (int q = s + 1; q < g.end(); ++q) {
    const step& later = p.steps[static_cast<std::size_t>(q)];
    for (int k = 0; k < later.n_inputs; ++k)
      if (later.inputs[k] == value) return false;
  }
  for (const region_info& inner : p.regions)
    if (inner.condition == value && inner.first > s && inner.first < g.end()) return false;
  return true;
}

// Lifetimes across control flow: a read at position q keeps a value live to q, and to the end of
// every loop holding q but not the value's birth (each trip reads it again). A loop's condition is
// read after its header (at its first position when the header is empty), a conditional's before
// its then branch; a carry's value and next value are live to the end of its loop, where the next
// is copied into the value's bytes.
constexpr void control_lifetimes(const program& p, const int* pos, const int* loop_at, int* first, int* last) {
  auto read_at = [&](tensor_id t, int q) {
    if (first[t] < 0 || q < first[t]) first[t] = q;
    if (q > last[t]) last[t] = q;
    const int born = birth(p, pos, t);
    for (int l = loop_at[q]; l >= 0; l = p.enclosing_loop(l)) {
      const region_info& g = p.regions[static_cast<std::size_t>(l)];
      if (!g.holds(born) && g.end() - 1 > last[t]) last[t] = g.end() - 1;
    }
  };
  const int ns = static_cast<int>(p.steps.size());
  for (int s = 0; s < ns; ++s)
    if (loop_at[s] >= 0) {
      const step& st = p.steps[static_cast<std::size_t>(s)];
      for (int k = 0; k < st.n_inputs; ++k) read_at(st.inputs[k], s);
    }
  for (std::size_t r = 0; r < p.regions.size(); ++r) {
    const region_info& g = p.regions[r];
    if (g.condition < 0) continue;
    if (g.kind == region_kind::loop_body && g.count > 0) read_at(g.condition, g.first + (g.header > 0 ? g.header - 1 : 0));
    if (g.kind == region_kind::then_branch) {
      const region_info& other = p.regions[r + 1];
      if (g.count + other.count > 0) read_at(g.condition, g.first);
    }
  }
  for (const loop_carry& c : p.carries) {
    const region_info& g = p.regions[static_cast<std::size_t>(c.loop)];
    if (g.count == 0) continue;
    read_at(c.value, g.end() - 1);
    read_at(c.next, g.end() - 1);
  }
}

// A merge's result takes the bytes of each branch's value made in that branch (each branch's whole
// in-place chain, if it began there) when the merge is its last reader: only one branch runs, so
// the two never hold data at once, and then the merge moves nothing.
constexpr void merge_groups(const program& p, const int* pos, const int* last, int* group) {
  const std::size_t nt = p.tensors.size();
  const int ns = static_cast<int>(p.steps.size());
  for (int s = 0; s < ns; ++s) {
    const step& st = p.steps[static_cast<std::size_t>(s)];
    if (!st.op->selects) continue;
    const tensor_info& res = p.tensors[static_cast<std::size_t>(st.result)];
    if (region_of(res) != region::activations) continue;
    bool joined = false;
    for (int k = 1; k <= 2; ++k) {
      const region_info& branch = p.regions[static_cast<std::size_t>(st.at.i[0] + k - 1)];
      const tensor_id src = st.inputs[k];
      const tensor_info& in = p.tensors[static_cast<std::size_t>(src)];
      const int head = group[src];
      if (in.kind != role::activation || last[src] != s || !branch.holds(birth(p, pos, src)) || !branch.holds(birth(p, pos, head)) ||
          in.type != res.type || !(in.shp == res.shp))
        continue;
      if (!joined) {
        group[st.result] = head;
        joined = true;
        continue;
      }
      const int into = group[st.result];
      for (std::size_t t = 0; t < nt; ++t)
        if (group[t] == head) group[t] = into;
    }
  }
}

}  // namespace detail

// The half of a plan that does not depend on the mode (steps 2 and 3, and the birth order and
// overlaps of step 4's groups): a function of the program alone, so the modes of one program share
// it (qwen2::static_plans makes one for prefill and decode). Every array is indexed as noted.
struct lifetimes {
  scratch<int> first, last, group;  // per tensor: inclusive positions, and the head of its in-place chain
  scratch<int> group_index;         // per tensor: its activation group, or -1 (weights, state)
  std::size_t groups = 0;           // activation groups, numbered in order of their first member's id
  scratch<int> head, group_first, group_last;  // per group
  scratch<int> by_birth;            // the groups by (first, head id)
  detail::overlap_lists overlap;    // which groups are live at a common position
};

constexpr lifetimes lifetimes_of(const program& p) {
  lifetimes lt;
  const std::size_t nt = p.tensors.size();
  const int ns = static_cast<int>(p.steps.size());
  const tensor_info* const tensors = p.tensors.data();
  const step* const steps = p.steps.data();
  const scratch<int> pos_v = p.position_of_step();
  const int* const pos = pos_v.data();

  // 2. Lifetimes.
  lt.first = scratch<int>(nt);
  lt.last = scratch<int>(nt);
  lt.group = scratch<int>(nt);
  int* const first = lt.first.data();
  int* const last = lt.last.data();
  int* const group = lt.group.data();
  for (std::size_t t = 0; t < nt; ++t) {
    const tensor_info& ti = tensors[t];
    first[t] = last[t] = ti.producer >= 0 ? pos[ti.producer] : (ti.kind == role::input ? 0 : -1);
    group[t] = static_cast<int>(t);
  }
  for (int s = 0; s < ns; ++s) {
    const step& st = steps[s];
    const auto& in = st.inputs;  // indexed in place (core/shape.hpp)
    for (int k = 0; k < st.n_inputs; ++k) {
      const tensor_id t = in[k];
      if (first[t] < 0) first[t] = s;
      if (s > last[t]) last[t] = s;
    }
    if (const tensor_id w = st.work; w >= 0) {  // a workspace shared by consecutive steps lives across all of them
      if (s < first[w]) first[w] = s;
      if (s > last[w]) last[w] = s;
    }
  }
  const bool control = !p.regions.empty();
  scratch<int> loop_at;  // (not `control ? ... : ...`: g++ 12 frees the taken branch's storage early in constant evaluation)
  if (control) loop_at = p.innermost_loops();
  if (control) detail::control_lifetimes(p, pos, loop_at.data(), first, last);
  for (std::size_t t = 0; t < nt; ++t) {
    if (first[t] < 0) first[t] = 0;  // a feed nobody reads
    if (tensors[t].kind == role::output) last[t] = ns - 1;
  }

  // 3. In-place chains (schedule order, so a chain's head is always already grouped). Over an
  // activation: when this step is its last reader and the result has its dtype and shape (so the same
  // bytes in every mode); inside a loop, only over a value of the same trip (the next trip reads
  // what was made before the loop again).
  for (int s = 0; s < ns; ++s) {
    const step& st = steps[s];
    const tensor_id src = st.in_place_source();
    if (src < 0) continue;
    const tensor_info& in = tensors[src];
    const tensor_info& res = tensors[st.result];
    const bool state_update = in.kind == role::state;
    const bool reusable = in.kind == role::activation && last[src] == s && region_of(res) == region::activations && in.type == res.type &&
                          in.shp == res.shp &&
                          (!control || (detail::same_trip(p, loop_at.data(), detail::birth(p, pos, src), s) && !detail::read_after(p, src, s)));
    if (state_update || reusable || (control && detail::carried_over(p, src, s))) group[st.result] = group[src];
  }
  if (control) detail::merge_groups(p, pos, last, group);

  // 4 (the part that needs no sizes). Activation groups, numbered in order of their first member.
  lt.group_index = scratch<int>(nt, -1);
  int* const group_index = lt.group_index.data();
  scratch<int> head_v(nt), gfirst_v(nt), glast_v(nt);
  int* const head = head_v.data();
  int* const gfirst = gfirst_v.data();
  int* const glast = glast_v.data();
  std::size_t ng = 0;
  int max_first = 0;
  for (std::size_t t = 0; t < nt; ++t) {
    if (region_of(tensors[t]) != region::activations) continue;
    int& gi = group_index[group[t]];
    if (gi < 0) {
      gi = static_cast<int>(ng);
      head[ng] = group[t];
      gfirst[ng] = first[t];
      glast[ng++] = last[t];
    } else {
      if (first[t] < gfirst[gi]) gfirst[gi] = first[t];
      if (last[t] > glast[gi]) glast[gi] = last[t];
    }
    if (t != static_cast<std::size_t>(group[t])) group_index[t] = gi;
    if (first[t] > max_first) max_first = first[t];
  }
  lt.groups = ng;

  // Birth order (first, head id): a counting sort by first (group numbers ascend within it); when
  // the numbering is not in head-id order (a chain onto a declared tensor), sort by id first.
  scratch<int> by_birth = counting_order(gfirst, ng, static_cast<std::size_t>(max_first) + 1);
  bool ids_ascend = true;
  for (std::size_t i = 1; i < ng; ++i) ids_ascend = ids_ascend && head[i - 1] < head[i];
  if (!ids_ascend) {
    const scratch<int> by_id = counting_order(head, ng, nt);
    scratch<int> key_v(ng);
    for (std::size_t i = 0; i < ng; ++i) key_v.data()[i] = gfirst[by_id.data()[i]];
    const scratch<int> o = counting_order(key_v.data(), ng, static_cast<std::size_t>(max_first) + 1);
    for (std::size_t i = 0; i < ng; ++i) by_birth.data()[i] = by_id.data()[o.data()[i]];
  }
  lt.overlap = detail::overlaps(gfirst, glast, by_birth.data(), ng);
  if (lt.overlap.pairs > detail::max_overlap_pairs)
    throw std::length_error("too many values live at once to plan: " + std::to_string(lt.overlap.pairs) +
                            " pairs of overlapping lifetimes (the planner's limit: " + std::to_string(detail::max_overlap_pairs) +
                            "); '" + std::string(tensors[head[lt.overlap.busiest]].name.str().view()) + "' alone overlaps " +
                            std::to_string(lt.overlap.busiest_overlaps) + " others");
  lt.by_birth = std::move(by_birth);
  lt.head = std::move(head_v);
  lt.group_first = std::move(gfirst_v);
  lt.group_last = std::move(glast_v);
  return lt;
}

// The mode's half: sizes under `bind`, kernels, offsets. `lt` must be lifetimes_of(p); one made for
// a program of another size is not used (the plan makes its own); verify() checks a plan made from
// another program's like any plan.
constexpr memory_plan plan_memory(const program& p, const lifetimes& lt, const binding& bind) {
  const std::size_t nt = p.tensors.size();
  if (lt.first.size() != nt) return plan_memory(p, lifetimes_of(p), bind);
  memory_plan m{};
  m.bind = bind;
  const int ns = static_cast<int>(p.steps.size());
  const tensor_info* const tensors = p.tensors.data();
  const step* const steps = p.steps.data();

  // 1. Lowering.
  m.kernels.reserve(static_cast<std::size_t>(ns));
  for (int s = 0; s < ns; ++s) {
    const step& st = steps[s];
    const auto& in = st.inputs;
    const tensor_info* ins[max_inputs]{};
    for (int k = 0; k < st.n_inputs; ++k) ins[k] = tensors + in[k];
    const auto& by_layout = st.op->kernels_by_layout;
    m.kernels.push_back(by_layout.empty() ? st.op->kernel(bind, ins, st.n_inputs, tensors[st.result])
                                          : by_layout[static_cast<std::size_t>(st.layout)]);
  }

  // Buffers: sizes under the binding, lifetimes and chains from `lt`.
  // (Made at their number and filled by index: cheaper to evaluate than push_back, core/vector.hpp.)
  m.buffers = std::vector<buffer>(nt);
  buffer* const buf = m.buffers.data();
  {
    const int* const first = lt.first.data();
    const int* const last = lt.last.data();
    const int* const group = lt.group.data();
    for (std::size_t t = 0; t < nt; ++t) {
      const tensor_info& ti = tensors[t];
      buf[t] = {ti.id, region_of(ti), 0, bytes_of(ti, bind), first[t], last[t], group[t]};
    }
  }

  // 5. Weights and state: feed order. In-place state results take their group head's bytes.
  std::int64_t end[region_count]{};
  for (std::size_t t = 0; t < nt; ++t) {
    buffer& b = buf[t];
    if (b.where == region::activations || b.group != b.tensor) continue;
    std::int64_t& e = end[static_cast<int>(b.where)];
    b.offset = e;
    e += align_up(b.bytes);
  }

  // 4. Activation groups. Members of a chain have their head's dtype and shape, so its bytes.
  const std::size_t ng = lt.groups;
  const int* const head = lt.head.data();
  const int* const gfirst = lt.group_first.data();
  const int* const glast = lt.group_last.data();
  scratch<std::int64_t> bytes_v(ng), need_v(ng);
  std::int64_t* const bytes = bytes_v.data();
  std::int64_t* const need = need_v.data();
  for (std::size_t i = 0; i < ng; ++i) {
    bytes[i] = buf[head[i]].bytes;
    need[i] = align_up(bytes[i]);
  }

  // Orders. By first use: (first, bytes descending, id) = the birth order with each run of equal
  // firsts sorted by bytes. By size: (bytes descending, first, id) = the by-first order stably
  // sorted by bytes, counted by the rank of each distinct size.
  scratch<int> by_first_v(ng);
  int* const by_first = by_first_v.data();
  {
    const int* const birth = lt.by_birth.data();
    for (std::size_t i = 0; i < ng; ++i) by_first[i] = birth[i];
  }
  for (std::size_t i = 0; i < ng;) {
    std::size_t j = i + 1;
    while (j < ng && gfirst[by_first[j]] == gfirst[by_first[i]]) ++j;
    if (j - i > 1) insertion_sort(by_first + i, by_first + j, [bytes](int x, int y) { return bytes[x] > bytes[y]; });
    i = j;
  }
  // The distinct sizes, largest first (few: a model repeats its shapes), then each group's rank among
  // them; a group usually has the size of the one before it, so that is tried first.
  scratch<std::int64_t> sizes_v(ng);
  std::int64_t* const sizes = sizes_v.data();
  std::size_t nd = 0;
  for (std::size_t i = 0, k = 0; i < ng; ++i) {
    const std::int64_t b = bytes[i];
    if (nd > 0 && sizes[k] == b) continue;
    k = 0;
    while (k < nd && sizes[k] != b) ++k;
    if (k == nd) sizes[nd++] = b;
  }
  insertion_sort(sizes, sizes + nd, [](std::int64_t x, std::int64_t y) { return x > y; });
  scratch<int> key_v(ng);
  int* const key = key_v.data();
  for (std::size_t i = 0, r = 0; i < ng; ++i) {  // key[position in by_first] = rank of that group's size
    const std::int64_t b = bytes[by_first[i]];
    if (sizes[r] != b) {
      r = 0;
      while (sizes[r] != b) ++r;
    }
    key[i] = static_cast<int>(r);
  }
  scratch<int> by_size_v = counting_order(key, ng, nd + 1);
  int* const by_size = by_size_v.data();
  for (std::size_t i = 0; i < ng; ++i) by_size[i] = by_first[by_size[i]];

  // Lower bound: max over positions of the bytes of groups live there (difference array).
  scratch<std::int64_t> delta_v(static_cast<std::size_t>(ns) + 1, 0);
  std::int64_t* const delta = delta_v.data();
  for (std::size_t i = 0; i < ng; ++i) {
    delta[gfirst[i]] += need[i];
    delta[glast[i] + 1] -= need[i];
  }
  std::int64_t live = 0;
  for (int s = 0; s < ns; ++s) {
    live += delta[s];
    if (live > m.lower_bound) m.lower_bound = live;
  }

  // Greedy by size first; greedy by first use only when that left room above the lower bound (no
  // placement can go below it), and kept only when strictly smaller.
  scratch<std::int64_t> at_size(ng), at_first;
  m.arena_by_strategy[0] = detail::place(need, ng, lt.overlap, by_size, true, at_size.data());
  m.arena_by_strategy[1] = -1;
  if (m.arena_by_strategy[0] > m.lower_bound) {
    at_first = scratch<std::int64_t>(ng);
    m.arena_by_strategy[1] = detail::place(need, ng, lt.overlap, by_first, false, at_first.data());
  }
  m.chosen = m.arena_by_strategy[1] >= 0 && m.arena_by_strategy[1] < m.arena_by_strategy[0] ? strategy::greedy_by_first_use
                                                                                              : strategy::greedy_by_size;
  const std::int64_t* const best = m.chosen == strategy::greedy_by_size ? at_size.data() : at_first.data();
  end[static_cast<int>(region::activations)] = m.arena_by_strategy[static_cast<int>(m.chosen)];

  // Every member of a group takes its head's offset.
  const int* const group_index = lt.group_index.data();
  for (std::size_t t = 0; t < nt; ++t) {
    buffer& b = buf[t];
    if (b.where == region::activations)
      b.offset = best[group_index[t]];
    else if (b.group != b.tensor)
      b.offset = buf[b.group].offset;
  }
  for (int r = 0; r < region_count; ++r) m.region_bytes[static_cast<std::size_t>(r)] = end[r];
  return m;
}

constexpr memory_plan plan_memory(const program& p, const binding& bind) { return plan_memory(p, lifetimes_of(p), bind); }

}  // namespace fused
