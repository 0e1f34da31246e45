// The memory planner: program + bound mode -> memory_plan.
//
// 1. Lowering: the binding gives every tensor its byte size; each step's op names its kernel.
// 2. Lifetimes in schedule order (inclusive). Inputs are live from position 0 (the caller writes
//    them before the call), outputs to the last position (the caller reads them after), a
//    workspace from the first step that uses it to the last (steps may share one: op_def::work).
// 3. In-place chains: a step whose op declares an in-place input writes its result over that input
//    when the input is an activation of the same size whose last reader is this very step (residual
//    add, SwiGLU, RoPE). Over a state feed the in-place write is how state is updated (KV cache).
// 4. Activation groups are placed by two strategies and the smaller arena is kept:
//    - greedy by size (TFLite Micro's planner): largest first, each at the lowest offset that
//      does not collide with an already placed group whose lifetime overlaps;
//    - greedy by first use: in order of birth, best fit (the smallest gap that holds it).
// 5. Weights and state are laid out in feed order, each buffer 64-byte aligned.
// The result always goes through verify() (fused/plan/verifier.hpp) before anyone uses it.
#pragma once
#include <cstdint>
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

struct group_info {
  int id = -1;
  std::int64_t bytes = 0;
  int first = 0;
  int last = 0;
  std::int64_t offset = -1;
};

// Which groups' lifetimes overlap, as adjacency lists in one array: the neighbours of group g are
// list[begin[g] .. begin[g + 1]). Sweep in order of birth: a later-born group overlaps an earlier
// one iff it is born before the earlier one dies. O(n + pairs), and pairs are few: most activations
// live inside one layer.
struct overlap_lists {
  scratch<int> begin;
  scratch<int> list;
};

constexpr overlap_lists overlaps(const group_info* g, const int* by_first, std::size_t n) {
  overlap_lists o;
  // In birth order, group i overlaps exactly the later groups i+1 .. reach[i]-1 (born before it
  // dies). Its degree is that count plus the number of earlier groups whose reach covers it.
  scratch<int> reach_v(n), cover_v(n + 1, 0);
  int* const reach = reach_v.data();
  int* const cover = cover_v.data();
  {
    scratch<int> first_v(n);
    int* const first = first_v.data();
    for (std::size_t i = 0; i < n; ++i) first[i] = g[by_first[i]].first;
    for (std::size_t i = 0; i < n; ++i) {
      const int last = g[by_first[i]].last;
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
  for (std::size_t i = 0; i < n; ++i) {
    covered += cover[i];
    deg[by_first[i]] = reach[i] - static_cast<int>(i) - 1 + covered;
  }
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
// lowest gap that holds the group; else best fit (the smallest such gap).
constexpr std::int64_t place(const group_info* g, std::size_t n, const overlap_lists& o, const int* order, bool first_fit,
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
    const std::int64_t need = align_up(g[gi].bytes);
    std::int64_t best = -1, best_gap = 0, at = 0;
    for (int k = 0; k < nb; ++k) {
      const std::int64_t bb = busy[2 * k], e = busy[2 * k + 1];
      if (bb - at >= need) {
        if (first_fit) { best = at; break; }
        if (best < 0 || bb - at < best_gap) { best = at; best_gap = bb - at; }
      }
      if (e > at) at = e;
    }
    if (best < 0) best = at;  // after everything that collides
    offset[gi] = best;
    end[gi] = best + need;
    if (best + need > arena) arena = best + need;
  }
  return arena;
}

}  // namespace detail

constexpr memory_plan plan_memory(const program& p, const binding& bind) {
  memory_plan m{};
  m.bind = bind;
  const std::size_t nt = p.tensors.size();
  const int ns = static_cast<int>(p.steps.size());
  const tensor_info* const tensors = p.tensors.data();
  const step* const steps = p.steps.data();
  const scratch<int> pos_v = p.position_of_step();
  const int* const pos = pos_v.data();

  // 1. Lowering.
  m.kernels.reserve(static_cast<std::size_t>(ns));
  for (int s = 0; s < ns; ++s) {
    const step& st = steps[s];
    const tensor_id* const in = st.inputs.data();
    const tensor_info* ins[max_inputs]{};
    for (int k = 0; k < st.n_inputs; ++k) ins[k] = tensors + in[k];
    m.kernels.push_back(st.op->kernel(bind, ins, st.n_inputs, tensors[st.result]));
  }

  // 2. Lifetimes.
  m.buffers.reserve(nt);
  for (std::size_t t = 0; t < nt; ++t) {
    const tensor_info& ti = tensors[t];
    const int first = ti.producer >= 0 ? pos[ti.producer] : (ti.kind == role::input ? 0 : -1);
    m.buffers.push_back({ti.id, region_of(ti), 0, bytes_of(ti, bind), first, first, ti.id});
  }
  buffer* const buf = m.buffers.data();
  for (int s = 0; s < ns; ++s) {
    const step& st = steps[s];
    const tensor_id* const in = st.inputs.data();
    for (int k = 0; k < st.n_inputs; ++k) {
      buffer& b = buf[in[k]];
      if (b.first < 0) b.first = s;
      if (s > b.last) b.last = s;
    }
    if (st.work >= 0) {  // a workspace shared by consecutive steps lives across all of them
      buffer& w = buf[st.work];
      if (s < w.first) w.first = s;
      if (s > w.last) w.last = s;
    }
  }
  for (std::size_t t = 0; t < nt; ++t) {
    buffer& b = buf[t];
    if (b.first < 0) b.first = 0;  // a feed nobody reads
    if (tensors[t].kind == role::output) b.last = ns - 1;
  }

  // 3. In-place chains (schedule order, so a chain's head is always already grouped).
  for (int s = 0; s < ns; ++s) {
    const step& st = steps[s];
    const tensor_id src = st.in_place_source();
    if (src < 0) continue;
    const tensor_info& in = tensors[src];
    buffer& rb = buf[st.result];
    const buffer& ib = buf[in.id];
    const bool state_update = in.kind == role::state;
    const bool reusable = in.kind == role::activation && ib.last == s && ib.bytes == rb.bytes && rb.where == ib.where;
    if (state_update || reusable) rb.group = ib.group;
  }

  // 4. Weights and state: feed order. In-place state results take their group head's bytes.
  std::int64_t end[region_count]{};
  for (std::size_t t = 0; t < nt; ++t) {
    buffer& b = buf[t];
    if (b.where == region::activations || b.group != b.tensor) continue;
    std::int64_t& e = end[static_cast<int>(b.where)];
    b.offset = e;
    e += align_up(b.bytes);
  }

  // 5. Activation groups, numbered in order of their head's id.
  scratch<detail::group_info> groups_v(nt);
  std::size_t ng = 0;
  scratch<int> group_index_v(nt, -1);
  int* const group_index = group_index_v.data();
  for (std::size_t t = 0; t < nt; ++t) {
    const buffer& b = buf[t];
    if (b.where != region::activations) continue;
    int& gi = group_index[b.group];
    if (gi < 0) {
      gi = static_cast<int>(ng);
      groups_v[ng++] = {b.group, b.bytes, b.first, b.last, -1};
    } else {
      detail::group_info& g = groups_v.data()[gi];
      if (b.bytes > g.bytes) g.bytes = b.bytes;
      if (b.first < g.first) g.first = b.first;
      if (b.last > g.last) g.last = b.last;
    }
  }
  const detail::group_info* const groups = groups_v.data();

  // Orders. By first use: (first, bytes descending, id) = a counting sort by first (ids ascend within
  // it), then each run of equal firsts by bytes. By size: (bytes descending, first, id) = the by-first
  // order stably sorted by bytes, counted by the rank of each distinct size.
  scratch<int> key_v(ng);
  int* const key = key_v.data();
  int range = 1;
  for (std::size_t i = 0; i < ng; ++i) {
    key[i] = groups[i].first;
    if (key[i] + 1 > range) range = key[i] + 1;
  }
  scratch<int> by_first_v = counting_order(key, ng, static_cast<std::size_t>(range));
  int* const by_first = by_first_v.data();
  bool ids_ascend = true;  // groups are numbered in order of their first member, nearly always their head
  for (std::size_t i = 1; i < ng; ++i) ids_ascend = ids_ascend && groups[i - 1].id < groups[i].id;
  if (!ids_ascend) {  // ties in first must still fall in id order: sort by id, then stably by first
    for (std::size_t i = 0; i < ng; ++i) key[i] = groups[i].id;
    const scratch<int> by_id = counting_order(key, ng, nt);
    for (std::size_t i = 0; i < ng; ++i) key[i] = groups[by_id.data()[i]].first;
    const scratch<int> o = counting_order(key, ng, static_cast<std::size_t>(range));
    for (std::size_t i = 0; i < ng; ++i) by_first[i] = by_id.data()[o.data()[i]];
  }
  for (std::size_t i = 0; i < ng;) {
    std::size_t j = i + 1;
    while (j < ng && groups[by_first[j]].first == groups[by_first[i]].first) ++j;
    if (j - i > 1)
      insertion_sort(by_first + i, by_first + j, [groups](int x, int y) { return groups[x].bytes > groups[y].bytes; });
    i = j;
  }
  std::vector<std::int64_t> sizes_v;
  for (std::size_t i = 0; i < ng; ++i) {
    bool seen = false;
    for (std::size_t k = 0; k < sizes_v.size() && !seen; ++k) seen = sizes_v.data()[k] == groups[i].bytes;
    if (!seen) sizes_v.push_back(groups[i].bytes);
  }
  std::int64_t* const sizes = sizes_v.data();
  insertion_sort(sizes, sizes + sizes_v.size(), [](std::int64_t x, std::int64_t y) { return x > y; });
  for (std::size_t i = 0; i < ng; ++i) {  // key[position in by_first] = rank of that group's size
    int r = 0;
    while (sizes[r] != groups[by_first[i]].bytes) ++r;
    key[i] = r;
  }
  scratch<int> by_size_v = counting_order(key, ng, sizes_v.size() + 1);
  int* const by_size = by_size_v.data();
  for (std::size_t i = 0; i < ng; ++i) by_size[i] = by_first[by_size[i]];

  const detail::overlap_lists overlap = detail::overlaps(groups, by_first, ng);
  scratch<std::int64_t> at_size(ng), at_first(ng);
  m.arena_by_strategy[0] = detail::place(groups, ng, overlap, by_size, true, at_size.data());
  m.arena_by_strategy[1] = detail::place(groups, ng, overlap, by_first, false, at_first.data());
  m.chosen = m.arena_by_strategy[1] < m.arena_by_strategy[0] ? strategy::greedy_by_first_use : strategy::greedy_by_size;
  const std::int64_t* const best = m.chosen == strategy::greedy_by_size ? at_size.data() : at_first.data();
  end[static_cast<int>(region::activations)] = m.arena_by_strategy[static_cast<int>(m.chosen)];

  // Lower bound: max over positions of the bytes of groups live there (difference array).
  scratch<std::int64_t> delta_v(static_cast<std::size_t>(ns) + 1, 0);
  std::int64_t* const delta = delta_v.data();
  for (std::size_t i = 0; i < ng; ++i) {
    delta[groups[i].first] += align_up(groups[i].bytes);
    delta[groups[i].last + 1] -= align_up(groups[i].bytes);
  }
  std::int64_t live = 0;
  for (int s = 0; s < ns; ++s) {
    live += delta[s];
    if (live > m.lower_bound) m.lower_bound = live;
  }

  // Every member of a group takes its head's offset.
  for (std::size_t t = 0; t < nt; ++t) {
    buffer& b = buf[t];
    if (b.where == region::activations)
      b.offset = best[group_index[b.group]];
    else if (b.group != b.tensor)
      b.offset = buf[b.group].offset;
  }
  for (int r = 0; r < region_count; ++r) m.region_bytes[static_cast<std::size_t>(r)] = end[r];
  return m;
}

}  // namespace fused
