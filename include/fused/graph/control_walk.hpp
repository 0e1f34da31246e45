// How every executor walks a scheduled program's control flow (program::regions): positions in
// schedule order, where a conditional (by its then branch) or a loop starts a block that runs as a
// whole. runtime::execute runs the blocks and the C emitter prints them, both from this one walk.
#pragma once
#include <cstddef>
#include <span>
#include <vector>

#include "program.hpp"

namespace fused {

class control_walk {
 public:
  control_walk(std::span<const region_info> regions, std::span<const loop_carry> carries, std::size_t steps)
      : regions_(regions), starting_(steps + 1), swaps_(regions.size(), false) {
    for (std::size_t g = 0; g < regions.size(); ++g) {
      const region_info& r = regions[g];
      // An empty conditional does nothing and is left out.
      if (r.kind == region_kind::loop_body || (r.kind == region_kind::then_branch && r.count + regions[g + 1].count > 0))
        starting_[static_cast<std::size_t>(r.first)].push_back(static_cast<int>(g));
    }
    // Decided once here, not per trip: a next value that is another carry of the same loop.
    for (const loop_carry& c : carries)
      if (c.next != c.value)
        for (const loop_carry& d : carries)
          if (d.loop == c.loop && d.value == c.next) swaps_[static_cast<std::size_t>(c.loop)] = true;
  }

  const region_info& region(int g) const { return regions_[static_cast<std::size_t>(g)]; }
  // A conditional block's else branch (the region after its then branch).
  const region_info& else_of(int block) const { return region(block + 1); }
  // The first position after a block: a loop's end, a conditional's else branch's end.
  int end_of(int block) const { return region(block).kind == region_kind::loop_body ? region(block).end() : else_of(block).end(); }
  // Whether a loop's next values include its own carries (a swap): then they must be staged, to be
  // copied all at once.
  bool swaps(int loop) const { return swaps_[static_cast<std::size_t>(loop)]; }

  // Calls on_step(position) for each step of [begin, end) that region `parent` (-1: the top level)
  // holds directly, and on_block(region) for each conditional or loop of `parent` starting there, in
  // place of the positions the block holds.
  template <class OnStep, class OnBlock>
  void each(int begin, int end, int parent, OnStep&& on_step, OnBlock&& on_block) const {
    for (int at = begin; at < end;) {
      int block = -1;
      for (const int g : starting_[static_cast<std::size_t>(at)])
        if (region(g).parent == parent) block = g;
      if (block < 0) {
        on_step(at++);
        continue;
      }
      on_block(block);
      at = end_of(block);
    }
  }

 private:
  std::span<const region_info> regions_;
  std::vector<std::vector<int>> starting_;
  std::vector<bool> swaps_;  // by region
};

}  // namespace fused
