// The scheduler: level = longest path from the feeds; steps ordered by (level, id). Deterministic:
// the order depends only on the graph, never on addresses or hash order.
//
// @pre  every step input is a feed or the result of some step (the builder guarantees it).
// @post p.steps sorted by (level, id); on a cycle, p.error == cycle and the message names the steps.
// Example: feeds a, b; s0 = f(a); s1 = g(s0, b); s2 = h(a)  ->  levels 1, 2, 1; order s0, s2, s1.
#pragma once
#include <utility>
#include <vector>

#include "program.hpp"

namespace fused {

// Compile-cost note: this runs in constant evaluation for every static model, so it walks raw
// pointers (each vector::operator[] is a call the evaluator interprets), works in scratch arrays
// filled by index (core/vector.hpp) and keeps the readers of each tensor in one array (one vector
// per tensor costs an allocation each).
constexpr void schedule(program& p) {
  const std::size_t n = p.steps.size();
  const std::size_t nt = p.tensors.size();
  const tensor_info* const tensors = p.tensors.data();
  step* const steps = p.steps.data();
  // Levels in one pass in id order: a step whose inputs all have levels by then gets its own at once,
  // which is every step when the model adds each step after those it reads (Qwen2 does).
  scratch<int> level_v(nt, -1);
  int* const level = level_v.data();
  for (std::size_t t = 0; t < nt; ++t)
    if (tensors[t].is_feed) level[t] = 0;
  std::size_t done = 0;
  for (std::size_t s = 0; s < n; ++s) {
    step& st = steps[s];
    const auto& in = st.inputs;  // indexed in place (core/shape.hpp)
    int lv = 0;
    int k = 0;
    for (; k < st.n_inputs && level[in[k]] >= 0; ++k) lv = level[in[k]] > lv ? level[in[k]] : lv;
    if (k < st.n_inputs) continue;  // reads a tensor declared ahead of its step: waits below
    st.level = lv + 1;
    level[st.result] = st.level;
    ++done;
  }
  // The steps left (those reading a declared tensor, directly or not): Kahn's algorithm over them.
  // A step is ready when each of its inputs has a level. (Unresolved steps have level[result] < 0.)
  scratch<int> pending_v(n, 0);
  int* const pending = pending_v.data();
  if (done != n) {
    // waiting[t]: the steps that wait for tensor t, as lists in one array (wait_begin[t] ..).
    scratch<int> wait_begin_v(nt + 1, 0);
    int* const wait_begin = wait_begin_v.data();
    for (std::size_t s = 0; s < n; ++s) {
      if (level[steps[s].result] >= 0) continue;
      const auto& in = steps[s].inputs;
      for (int k = 0; k < steps[s].n_inputs; ++k)
        if (level[in[k]] < 0) ++wait_begin[in[k] + 1];
    }
    for (std::size_t t = 0; t < nt; ++t) wait_begin[t + 1] += wait_begin[t];
    scratch<int> waiting_v(static_cast<std::size_t>(wait_begin[nt])), fill_v(nt + 1);
    int* const waiting = waiting_v.data();
    int* const fill = fill_v.data();
    for (std::size_t t = 0; t <= nt; ++t) fill[t] = wait_begin[t];
    scratch<int> ready_v(n);
    int* const ready = ready_v.data();
    int n_ready = 0;
    for (std::size_t s = 0; s < n; ++s) {
      const step& st = steps[s];
      if (level[st.result] >= 0) continue;
      const auto& in = st.inputs;
      for (int k = 0; k < st.n_inputs; ++k)
        if (level[in[k]] < 0) {
          ++pending[s];
          waiting[fill[in[k]]++] = static_cast<int>(s);
        }
      if (pending[s] == 0) ready[n_ready++] = static_cast<int>(s);
    }
    while (n_ready > 0) {
      step& st = steps[ready[--n_ready]];
      const auto& in = st.inputs;
      int lv = 0;
      for (int k = 0; k < st.n_inputs; ++k) lv = level[in[k]] > lv ? level[in[k]] : lv;
      st.level = lv + 1;
      level[st.result] = st.level;
      ++done;
      for (int w = wait_begin[st.result]; w < wait_begin[st.result + 1]; ++w)
        if (--pending[waiting[w]] == 0) ready[n_ready++] = waiting[w];
    }
  }
  if (done != n) {
    text names;
    int listed = 0;
    for (std::size_t s = 0; s < n && listed < 6; ++s)
      if (pending[s] > 0) {
        names += (listed++ ? ", " : "") + text("step ") + to_text(steps[s].id) + " '" + steps[s].op->name + "' -> " +
                 tensors[steps[s].result].name.str();
      }
    p.error = error_kind::cycle;
    p.message = "the steps form a cycle (each waits for another's result): " + names;
    return;
  }
  // Counting sort by level; within a level, id order (steps are stored in id order). Stable and
  // O(n), and it copies each step twice (out and back), by index.
  int max_level = 0;
  for (std::size_t s = 0; s < n; ++s) max_level = steps[s].level > max_level ? steps[s].level : max_level;
  scratch<int> start_v(static_cast<std::size_t>(max_level) + 2, 0);
  int* const start = start_v.data();
  for (std::size_t s = 0; s < n; ++s) ++start[steps[s].level + 1];
  for (int l = 1; l <= max_level + 1; ++l) start[l] += start[l - 1];
  scratch<int> order_v(n);
  int* const order = order_v.data();
  for (std::size_t s = 0; s < n; ++s) order[start[steps[s].level]++] = static_cast<int>(s);
  scratch<step> sorted(n);
  for (std::size_t i = 0; i < n; ++i) sorted[i] = steps[order[i]];
  for (std::size_t i = 0; i < n; ++i) steps[i] = sorted[i];
}

}  // namespace fused
