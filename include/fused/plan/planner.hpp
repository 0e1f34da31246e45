// The memory planner: program + bound mode -> memory_plan.
//
// 1. Lowering: the binding gives every tensor its byte size; each step's op names its kernel.
// 2. Lifetimes in schedule order (inclusive). Inputs are live from position 0 (the caller writes
//    them before the call), outputs to the last position (the caller reads them after).
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
#include <algorithm>
#include <cstdint>
#include <vector>

#include "memory_plan.hpp"

namespace fused {

namespace detail {

struct group_info {
  int id = -1;
  std::int64_t bytes = 0;
  int first = 0;
  int last = 0;
  std::int64_t offset = -1;
};

// For each group, the groups whose lifetimes overlap it. Sweep in order of birth: a later-born
// group overlaps an earlier one iff it is born before the earlier one dies. O(n log n + pairs),
// and pairs are few: most activations live inside one layer.
constexpr std::vector<std::vector<int>> overlaps(const std::vector<group_info>& g) {
  std::vector<int> by_first = iota_vector(g.size());
  std::sort(by_first.begin(), by_first.end(), [&](int a, int b) { return g[static_cast<std::size_t>(a)].first < g[static_cast<std::size_t>(b)].first; });
  std::vector<std::vector<int>> out = filled(g.size(), std::vector<int>{});
  for (std::size_t i = 0; i < by_first.size(); ++i) {
    const auto a = static_cast<std::size_t>(by_first[i]);
    for (std::size_t j = i + 1; j < by_first.size(); ++j) {
      const auto b = static_cast<std::size_t>(by_first[j]);
      if (g[b].first > g[a].last) break;
      out[a].push_back(static_cast<int>(b));
      out[b].push_back(static_cast<int>(a));
    }
  }
  return out;
}

// Places `order`'s groups into one arena; returns its size. first_fit: lowest gap; else best fit.
constexpr std::int64_t place(std::vector<group_info>& g, const std::vector<std::vector<int>>& overlap,
                             const std::vector<int>& order, bool first_fit) {
  std::vector<std::pair<std::int64_t, std::int64_t>> busy;  // [begin, end) of placed, colliding groups
  busy.reserve(g.size());
  std::int64_t arena = 0;
  for (int gi : order) {
    auto& cur = g[static_cast<std::size_t>(gi)];
    busy.clear();
    for (int oj : overlap[static_cast<std::size_t>(gi)]) {
      const auto& o = g[static_cast<std::size_t>(oj)];
      if (o.offset >= 0) busy.push_back({o.offset, o.offset + align_up(o.bytes)});
    }
    std::sort(busy.begin(), busy.end());
    const std::int64_t need = align_up(cur.bytes);
    std::int64_t best = -1, best_gap = 0, at = 0;
    for (const auto& [b, e] : busy) {
      if (b - at >= need) {
        if (first_fit) { best = at; break; }
        if (best < 0 || b - at < best_gap) { best = at; best_gap = b - at; }
      }
      at = std::max(at, e);
    }
    if (best < 0) best = at;  // after everything that collides
    cur.offset = best;
    arena = std::max(arena, best + need);
  }
  return arena;
}

}  // namespace detail

// Byte size of a tensor under a binding.
constexpr std::int64_t bytes_of(const tensor_info& t, const binding& b) { return t.shp.elements(b) * size_of(t.type); }

constexpr region region_of(const tensor_info& t) {
  if (t.kind == role::weight) return region::weights;
  if (t.kind == role::state) return region::state;
  return region::activations;
}

constexpr memory_plan plan_memory(const program& p, const binding& bind) {
  memory_plan m{};
  m.bind = bind;
  const std::size_t nt = p.tensors.size();
  const int ns = static_cast<int>(p.steps.size());
  const std::vector<int> pos = p.position_of_step();
  m.buffers = filled(nt, buffer{});

  // 1. Lowering.
  m.kernels = filled(static_cast<std::size_t>(ns), static_cast<const char*>(nullptr));
  for (int s = 0; s < ns; ++s) {
    const auto& st = p.steps[static_cast<std::size_t>(s)];
    const tensor_info* ins[max_inputs]{};
    for (int k = 0; k < st.n_inputs; ++k) ins[k] = &p.tensor(st.inputs[static_cast<std::size_t>(k)]);
    m.kernels[static_cast<std::size_t>(s)] = st.op->kernel(bind, ins, st.n_inputs, p.tensor(st.result));
  }

  // 2. Lifetimes.
  for (std::size_t t = 0; t < nt; ++t) {
    const auto& ti = p.tensors[t];
    auto& b = m.buffers[t];
    b.tensor = ti.id;
    b.where = region_of(ti);
    b.bytes = bytes_of(ti, bind);
    b.group = ti.id;
    b.first = ti.producer >= 0 ? pos[static_cast<std::size_t>(ti.producer)] : (ti.kind == role::input ? 0 : -1);
    b.last = b.first;
  }
  for (int s = 0; s < ns; ++s) {
    const auto& st = p.steps[static_cast<std::size_t>(s)];
    for (int k = 0; k < st.n_inputs; ++k) {
      auto& b = m.buffers[static_cast<std::size_t>(st.inputs[static_cast<std::size_t>(k)])];
      if (b.first < 0) b.first = s;
      b.last = std::max(b.last, s);
    }
  }
  for (auto& b : m.buffers) {
    if (b.first < 0) b.first = 0;  // a feed nobody reads
    if (p.tensor(b.tensor).kind == role::output) b.last = ns - 1;
  }

  // 3. In-place chains (schedule order, so a chain's head is always already grouped).
  for (int s = 0; s < ns; ++s) {
    const auto& st = p.steps[static_cast<std::size_t>(s)];
    const int k = st.op->in_place_input;
    if (k < 0 || k >= st.n_inputs) continue;
    const auto& in = p.tensor(st.inputs[static_cast<std::size_t>(k)]);
    auto& rb = m.buffers[static_cast<std::size_t>(st.result)];
    const auto& ib = m.buffers[static_cast<std::size_t>(in.id)];
    const bool state_update = in.kind == role::state;
    const bool reusable = in.kind == role::activation && ib.last == s && ib.bytes == rb.bytes && rb.where == ib.where;
    if (state_update || reusable) rb.group = ib.group;
  }

  // 4. Weights and state: feed order. In-place state results take their group head's bytes.
  std::int64_t end[region_count]{};
  for (auto& b : m.buffers) {
    if (b.where == region::activations || b.group != b.tensor) continue;
    auto& e = end[static_cast<int>(b.where)];
    b.offset = e;
    e += align_up(b.bytes);
  }

  // 5. Activation groups.
  std::vector<detail::group_info> groups;
  groups.reserve(nt);
  std::vector<int> group_index = filled(nt, -1);
  for (const auto& b : m.buffers) {
    if (b.where != region::activations) continue;
    auto& gi = group_index[static_cast<std::size_t>(b.group)];
    if (gi < 0) {
      gi = static_cast<int>(groups.size());
      groups.push_back({b.group, b.bytes, b.first, b.last, -1});
    } else {
      auto& g = groups[static_cast<std::size_t>(gi)];
      g.bytes = std::max(g.bytes, b.bytes);
      g.first = std::min(g.first, b.first);
      g.last = std::max(g.last, b.last);
    }
  }
  std::vector<int> by_size = iota_vector(groups.size()), by_first = iota_vector(groups.size());
  std::sort(by_size.begin(), by_size.end(), [&](int a, int b) {
    const auto &x = groups[static_cast<std::size_t>(a)], &y = groups[static_cast<std::size_t>(b)];
    if (x.bytes != y.bytes) return x.bytes > y.bytes;
    if (x.first != y.first) return x.first < y.first;
    return x.id < y.id;
  });
  std::sort(by_first.begin(), by_first.end(), [&](int a, int b) {
    const auto &x = groups[static_cast<std::size_t>(a)], &y = groups[static_cast<std::size_t>(b)];
    if (x.first != y.first) return x.first < y.first;
    if (x.bytes != y.bytes) return x.bytes > y.bytes;
    return x.id < y.id;
  });
  const auto overlap = detail::overlaps(groups);
  auto g_size = groups, g_first = groups;
  m.arena_by_strategy[0] = detail::place(g_size, overlap, by_size, true);
  m.arena_by_strategy[1] = detail::place(g_first, overlap, by_first, false);
  m.chosen = m.arena_by_strategy[1] < m.arena_by_strategy[0] ? strategy::greedy_by_first_use : strategy::greedy_by_size;
  const auto& best = m.chosen == strategy::greedy_by_size ? g_size : g_first;
  end[static_cast<int>(region::activations)] = m.arena_by_strategy[static_cast<int>(m.chosen)];

  // Lower bound: max over positions of the bytes of groups live there (difference array).
  std::vector<std::int64_t> delta = filled(static_cast<std::size_t>(ns) + 1, std::int64_t{0});
  for (const auto& g : groups) {
    delta[static_cast<std::size_t>(g.first)] += align_up(g.bytes);
    delta[static_cast<std::size_t>(g.last) + 1] -= align_up(g.bytes);
  }
  std::int64_t live = 0;
  for (int s = 0; s < ns; ++s) m.lower_bound = std::max(m.lower_bound, live += delta[static_cast<std::size_t>(s)]);

  // Every member of a group takes its head's offset.
  for (auto& b : m.buffers) {
    if (b.where == region::activations)
      b.offset = best[static_cast<std::size_t>(group_index[static_cast<std::size_t>(b.group)])].offset;
    else if (b.group != b.tensor)
      b.offset = m.buffers[static_cast<std::size_t>(b.group)].offset;
  }
  for (int r = 0; r < region_count; ++r) m.region_bytes[static_cast<std::size_t>(r)] = end[r];
  return m;
}

}  // namespace fused
