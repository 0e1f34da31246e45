// The scheduler: level = longest path from the feeds; steps ordered by (level, id). Deterministic:
// the order depends only on the graph, never on addresses or hash order.
//
// @pre  every step input is a feed or the result of some step (the builder guarantees it).
// @post p.steps sorted by (level, id); on a cycle, p.error == cycle and the message names the steps.
// Example: feeds a, b; s0 = f(a); s1 = g(s0, b); s2 = h(a)  ->  levels 1, 2, 1; order s0, s2, s1.
#pragma once
#include <algorithm>
#include <utility>
#include <string>
#include <vector>

#include "program.hpp"

namespace fused {

constexpr void schedule(program& p) {
  const std::size_t n = p.steps.size();
  // Kahn's algorithm over steps: a step is ready when each input is a feed or has its level.
  std::vector<int> level = filled(p.tensors.size(), -1);
  for (const auto& t : p.tensors)
    if (t.is_feed) level[static_cast<std::size_t>(t.id)] = 0;
  std::vector<int> pending = filled(n, 0);
  std::vector<std::vector<int>> waiting = filled(p.tensors.size(), std::vector<int>{});
  std::vector<int> ready;
  ready.reserve(n);
  for (std::size_t s = 0; s < n; ++s) {
    const auto& st = p.steps[s];
    for (int k = 0; k < st.n_inputs; ++k) {
      const auto t = static_cast<std::size_t>(st.inputs[static_cast<std::size_t>(k)]);
      if (level[t] < 0) { ++pending[s]; waiting[t].push_back(static_cast<int>(s)); }
    }
    if (pending[s] == 0) ready.push_back(static_cast<int>(s));
  }
  std::size_t done = 0;
  while (!ready.empty()) {
    const auto s = static_cast<std::size_t>(ready.back());
    ready.pop_back();
    auto& st = p.steps[s];
    int lv = 0;
    for (int k = 0; k < st.n_inputs; ++k) lv = std::max(lv, level[static_cast<std::size_t>(st.inputs[static_cast<std::size_t>(k)])]);
    st.level = lv + 1;
    level[static_cast<std::size_t>(st.result)] = st.level;
    ++done;
    for (int w : waiting[static_cast<std::size_t>(st.result)])
      if (--pending[static_cast<std::size_t>(w)] == 0) ready.push_back(w);
  }
  if (done != n) {
    text names;
    int listed = 0;
    for (std::size_t s = 0; s < n && listed < 6; ++s)
      if (pending[s] > 0) {
        names += (listed++ ? ", " : "") + text("step ") + to_text(p.steps[s].id) + " '" + p.steps[s].op->name +
                 "' -> " + p.tensor(p.steps[s].result).name.str();
      }
    p.error = error_kind::cycle;
    p.message = "the steps form a cycle (each waits for another's result): " + names;
    return;
  }
  // Counting sort by level; within a level, id order (steps are stored in id order). Stable and
  // O(n), and it moves each step once: copying steps is what costs in constant evaluation.
  int max_level = 0;
  for (const auto& st : p.steps) max_level = std::max(max_level, st.level);
  std::vector<int> start = filled(static_cast<std::size_t>(max_level) + 2, 0);
  for (const auto& st : p.steps) ++start[static_cast<std::size_t>(st.level) + 1];
  for (std::size_t l = 1; l < start.size(); ++l) start[l] += start[l - 1];
  std::vector<step> sorted = filled(n, step{});
  for (const auto& st : p.steps) sorted[static_cast<std::size_t>(start[static_cast<std::size_t>(st.level)]++)] = st;
  p.steps = std::move(sorted);
}

}  // namespace fused
