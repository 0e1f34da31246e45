// The scheduler: level = longest path from the feeds; steps ordered by (level, id). Deterministic:
// the order depends only on the graph, never on addresses or hash order.
//
// @pre  every step input is a feed or the result of some step (the builder guarantees it).
// @post p.steps sorted by (level, id); on a cycle, p.error == cycle and the message names the steps.
// Example: feeds a, b; s0 = f(a); s1 = g(s0, b); s2 = h(a)  ->  levels 1, 2, 1; order s0, s2, s1.
// Control flow (program::regions): each region is ordered on its own by the same rule, a nested
// conditional or loop being one item of its parent; a region's steps end up at consecutive
// positions, a conditional's then branch before its else branch, a loop's carry copies just before
// its body and, within the body, the steps its condition depends on first (the trip's header).
#pragma once
#include <climits>
#include <utility>
#include <vector>

#include "../core/sort.hpp"
#include "program.hpp"

namespace fused {

namespace detail {

// The scheduler for programs with regions (straight-line programs take the faster path below).
class region_scheduler {
 public:
  explicit constexpr region_scheduler(program& p) : p_(p), home_(p.steps.size(), -1), init_(p.steps.size(), false) {
    for (std::size_t s = 0; s < p.steps.size(); ++s) home_[s] = p.steps[s].region;
    for (const loop_carry& c : p.carries) {
      const auto s = static_cast<std::size_t>(p.tensor(c.value).producer);
      home_[s] = c.loop;
      init_[s] = true;
    }
  }

  constexpr void run() {
    emit(-1);
    if (!p_.ok()) return;
    std::vector<step> sorted;
    sorted.reserve(order_.size());
    for (int s : order_) sorted.push_back(p_.steps[static_cast<std::size_t>(s)]);
    p_.steps = std::move(sorted);
  }

 private:
  static constexpr int none = INT_MIN;
  // A region's item in its parent: a conditional's two branches are one (its then branch).
  constexpr int block_of(int r) const { return p_.regions[static_cast<std::size_t>(r)].kind == region_kind::else_branch ? r - 1 : r; }
  static constexpr int as_item(int block) { return -(block + 2); }
  static constexpr int block_of_item(int item) { return -item - 2; }
  // The item of region r that step s belongs to: the step itself, or the nested block holding it;
  // `none` when s is not inside r (a loop's carry copies are not inside the loop).
  constexpr int item_in(int s, int r) const {
    int h = home_[static_cast<std::size_t>(s)];
    if (h == r) return init_[static_cast<std::size_t>(s)] ? none : s;
    while (h >= 0 && p_.regions[static_cast<std::size_t>(h)].parent != r) h = p_.regions[static_cast<std::size_t>(h)].parent;
    return h < 0 ? none : as_item(block_of(h));
  }
  constexpr int region_item_in(int region, int r) const {  // the item of r holding region `region`
    int h = region;
    while (h >= 0 && p_.regions[static_cast<std::size_t>(h)].parent != r) h = p_.regions[static_cast<std::size_t>(h)].parent;
    return h < 0 ? none : as_item(block_of(h));
  }
  constexpr int producer_item(tensor_id t, int r) const {
    const int q = p_.tensor(t).producer;
    return q < 0 ? none : item_in(q, r);
  }

  // Appends the steps of region r (-1: the whole program) in execution order.
  constexpr void emit(int r) {
    const std::size_t n = p_.steps.size(), nr = p_.regions.size();
    std::vector<int> items;         // each item once, in order of its smallest step id
    scratch<int> item_of(n, none);  // per step
    scratch<int> step_index(n, -1), block_index(nr, -1);  // an item's place in `items`
    for (std::size_t s = 0; s < n; ++s) {
      const int it = item_in(static_cast<int>(s), r);
      item_of[s] = it;
      if (it == none) continue;
      int& at = it >= 0 ? step_index[static_cast<std::size_t>(it)] : block_index[static_cast<std::size_t>(block_of_item(it))];
      if (at < 0) {
        at = static_cast<int>(items.size());
        items.push_back(it);
      }
    }
    // A region without steps (an empty branch) is an item too: its condition still orders it, and
    // it is placed, with no steps, like any other.
    for (std::size_t g = 0; g < nr; ++g) {
      const int it = region_item_in(static_cast<int>(g), r);
      if (it == none) continue;
      int& at = block_index[static_cast<std::size_t>(block_of_item(it))];
      if (at < 0) {
        at = static_cast<int>(items.size());
        items.push_back(it);
      }
    }
    const std::size_t ni = items.size();
    auto index = [&](int it) { return it >= 0 ? step_index[static_cast<std::size_t>(it)] : block_index[static_cast<std::size_t>(block_of_item(it))]; };
    // Dependencies between items: a step reading another item's tensor, a region reading its
    // condition or its carries' next values from another item.
    scratch<std::vector<int>> after(ni);  // after[i]: items that wait for item i
    scratch<int> pending(ni, 0);
    auto depend = [&](int from, int to) {
      if (from == none || to == none || from == to) return;
      const int a = index(from), b = index(to);
      for (int x : after[static_cast<std::size_t>(a)])
        if (x == b) return;
      after[static_cast<std::size_t>(a)].push_back(b);
      ++pending[static_cast<std::size_t>(b)];
    };
    for (std::size_t s = 0; s < n; ++s) {
      if (item_of[s] == none) continue;
      const step& st = p_.steps[s];
      for (int k = 0; k < st.n_inputs; ++k) depend(producer_item(st.inputs[k], r), item_of[s]);
    }
    for (std::size_t g = 0; g < p_.regions.size(); ++g) {
      const int holder = region_item_in(static_cast<int>(g), r);
      if (holder == none) continue;
      if (const tensor_id c = p_.regions[g].condition; c >= 0) depend(producer_item(c, r), holder);
    }
    for (const loop_carry& c : p_.carries)
      if (c.next >= 0) depend(producer_item(c.next, r), region_item_in(c.loop, r));
    // A loop's header: the items its condition depends on, within the body.
    scratch<bool> header(ni, false);
    if (r >= 0 && p_.regions[static_cast<std::size_t>(r)].kind == region_kind::loop_body) {
      const tensor_id c = p_.regions[static_cast<std::size_t>(r)].condition;
      scratch<std::vector<int>> before(ni);  // before[i]: the items item i waits for
      for (std::size_t j = 0; j < ni; ++j)
        for (int x : after[j]) before[static_cast<std::size_t>(x)].push_back(static_cast<int>(j));
      std::vector<int> work;
      if (c >= 0 && producer_item(c, r) != none) work.push_back(index(producer_item(c, r)));
      while (!work.empty()) {
        const int i = work.back();
        work.pop_back();
        if (header[static_cast<std::size_t>(i)]) continue;
        header[static_cast<std::size_t>(i)] = true;
        for (int j : before[static_cast<std::size_t>(i)])
          if (!header[static_cast<std::size_t>(j)]) work.push_back(j);
      }
    }
    // Levels (longest path), then the order: header first, then (level, smallest step id).
    scratch<int> level(ni, 0);
    std::vector<int> ready;
    for (std::size_t i = 0; i < ni; ++i)
      if (pending[i] == 0) ready.push_back(static_cast<int>(i));
    std::size_t placed = 0;
    while (!ready.empty()) {
      const int i = ready.back();
      ready.pop_back();
      ++placed;
      for (int x : after[static_cast<std::size_t>(i)]) {
        const auto xi = static_cast<std::size_t>(x);
        if (level[static_cast<std::size_t>(i)] + 1 > level[xi]) level[xi] = level[static_cast<std::size_t>(i)] + 1;
        if (--pending[xi] == 0) ready.push_back(x);
      }
    }
    if (placed != ni) {
      text names;
      int listed = 0;
      for (std::size_t s = 0; s < n && listed < 6; ++s)
        if (item_of[s] != none && pending[static_cast<std::size_t>(index(item_of[s]))] > 0)
          names += (listed++ ? ", " : "") + text("step ") + to_text(p_.steps[s].id) + " '" + p_.steps[s].op->name + "'";
      p_.error = error_kind::cycle;
      p_.message = "the steps form a cycle (each waits for another's result): " + names;
      return;
    }
    // A counting sort by (header first, level); stable, so ties keep item order (smallest step id).
    scratch<int> key(ni);
    for (std::size_t i = 0; i < ni; ++i) key[i] = header[i] ? level[i] : level[i] + static_cast<int>(ni);
    const scratch<int> by = counting_order(key.data(), ni, 2 * ni);
    const std::size_t start = order_.size();
    for (std::size_t k = 0; k < ni && p_.ok(); ++k) {
      const auto i = static_cast<std::size_t>(by[k]);
      const int it = items[i];
      if (it >= 0) {
        p_.steps[static_cast<std::size_t>(it)].level = level[i] + 1;
        order_.push_back(it);
      } else if (const int b = block_of_item(it); p_.regions[static_cast<std::size_t>(b)].kind == region_kind::loop_body) {
        for (std::size_t s = 0; s < n; ++s)  // the carry copies, run once before the first trip
          if (init_[s] && home_[s] == b) {
            p_.steps[s].level = level[i] + 1;
            order_.push_back(static_cast<int>(s));
          }
        place(b);
      } else {
        place(b);
        place(b + 1);
      }
      if (header[i]) p_.regions[static_cast<std::size_t>(r)].header = static_cast<int>(order_.size() - start);  // header items come first
    }
  }
  constexpr void place(int r) {
    region_info& g = p_.regions[static_cast<std::size_t>(r)];
    g.first = static_cast<int>(order_.size());
    emit(r);
    g.count = static_cast<int>(order_.size()) - g.first;
  }

  program& p_;
  scratch<int> home_;   // per step: its region; a carry copy: its loop
  scratch<bool> init_;  // per step: a loop carry's copy
  std::vector<int> order_;
};

}  // namespace detail

// Compile-cost note: this runs in constant evaluation for every static model, so it walks raw
// pointers (each vector::operator[] is a call the evaluator interprets), works in scratch arrays
// filled by index (core/vector.hpp) and keeps the readers of each tensor in one array (one vector
// per tensor costs an allocation each).
constexpr void schedule(program& p) {
  if (!p.regions.empty()) {
    detail::region_scheduler(p).run();
    return;
  }
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
