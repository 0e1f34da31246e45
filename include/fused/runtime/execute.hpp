// Runs any planned program once, on caller-owned regions: every step lowered by lower_calls (the
// one lowering every executor reads) and invoked in schedule order. For programs known only at
// run time (a graph file); the decoder models keep their own sessions (session.hpp).
#pragma once
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "../graph/cut_wire.hpp"
#include "calls.hpp"
#include "invoke.hpp"

namespace fused::runtime {

// The calls of `p` under plan `m` and binding `b`, every symbol resolved. Throws graph_error with
// the cut-wire report of the first step no kernel implements (wires: what the runner has bound).
inline std::vector<call> lower_all(const program& p, const memory_plan& m, std::span<const wire_state> wires) {
  lowering_error err{};
  std::vector<call> calls = lower_calls(p.tensors, p.steps, m.buffers, m.kernels, m.bind, 0, &err);
  if (calls.size() != p.steps.size()) {
    std::size_t pos = 0;
    while (pos < p.steps.size() && p.steps[pos].id != err.step) ++pos;
    if (pos == p.steps.size()) throw graph_error("cannot lower the program: " + std::string(err.what));
    throw graph_error(std::string(err.what) + " (op '" + p.steps[pos].op->name + "' has no kernel here)\n" + cut_wire_report(p, pos, wires));
  }
  for (const call& c : calls)
    if ((c.k == kernel::attention_prefill || c.k == kernel::attention_decode) && c.sizes.head_dim > FK_MAX_HEAD_DIM)
      throw graph_error("step " + std::to_string(c.step) + " 'attention': head_dim " + std::to_string(c.sizes.head_dim) +
                        " exceeds the kernels' limit of " + std::to_string(FK_MAX_HEAD_DIM));
  return calls;
}

// Runs the calls in order, with row 0 of the program at position `pos0`. What a kernel would read
// or write out of bounds is checked first, as the decoder's session checks it for its own calls:
// rows past a KV cache's capacity (its symbols bound apart from the tokens'), token ids outside
// the embedding table (read from the arena when the step runs, since a step may compute them).
// Throws std::out_of_range naming the step; nothing past that step runs.
inline void execute(std::span<const call> calls, const regions& r, const binding& b, std::int64_t pos0 = 0) {
  call_dims d{};
  d.b = b;
  d.pos0 = pos0;
  for (const call& c : calls) {
    const std::int64_t rows = c.rows.n * b.value[c.rows.symbol];
    const bool uses_cache = c.k == kernel::kv_store || c.k == kernel::attention_prefill || c.k == kernel::attention_decode;
    if (uses_cache && (pos0 < 0 || pos0 + rows > c.sizes.capacity))
      throw std::out_of_range("step " + std::to_string(c.step) + ": positions " + std::to_string(pos0) + ".." + std::to_string(pos0 + rows - 1) +
                              " do not fit a KV cache of " + std::to_string(c.sizes.capacity) + " positions");
    if (c.k == kernel::embed) {
      const auto* ids = reinterpret_cast<const std::int32_t*>((c.in[0].where == region::state ? r.state : r.arena) + c.in[0].offset);
      for (std::int64_t t = 0; t < rows; ++t)
        if (ids[t] < 0 || ids[t] >= c.sizes.vocab)
          throw std::out_of_range("step " + std::to_string(c.step) + ": token id " + std::to_string(ids[t]) + " (row " + std::to_string(t) +
                                  ") is outside the embedding table [0, " + std::to_string(c.sizes.vocab) + ")");
    }
    invoke(c, r, d);
  }
}

}  // namespace fused::runtime
