// Runs any planned program once, on caller-owned regions: every step lowered by lower_calls (the
// one lowering every executor reads) and invoked in schedule order. For programs known only at
// run time (a graph file); the decoder models keep their own sessions (session.hpp).
#pragma once
#include <cstring>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "../core/vector.hpp"
#include "../graph/control_walk.hpp"
#include "../graph/cut_wire.hpp"
#include "calls.hpp"
#include "invoke.hpp"

namespace fused::runtime {

// The calls of `p` under plan `m` and binding `b`, every symbol resolved. Throws graph_error with
// the cut-wire report of the first step no kernel implements (wires: what the runner has bound).
inline std::vector<call> lower_all(const program& p, const memory_plan& m, std::span<const wire_state> wires) {
  lowering_error err{};
  std::vector<call> calls = lower_calls(p.tensors, p.steps, m.buffers, m.kernels, m.bind, p.training, 0, &err);
  const scratch<int> position = p.position_of_step();
  if (calls.size() != p.steps.size()) {
    if (err.step < 0 || static_cast<std::size_t>(err.step) >= p.steps.size()) throw graph_error("cannot lower the program: " + std::string(err.what));
    const auto pos = static_cast<std::size_t>(position[static_cast<std::size_t>(err.step)]);
    throw graph_error(std::string(err.what) + " (op '" + p.steps[pos].op->name + "' has no kernel here)\n" + cut_wire_report(p, pos, wires));
  }
  for (const call& c : calls) {
    if (c.k == kernel::host) {
      const auto pos = static_cast<std::size_t>(position[static_cast<std::size_t>(c.step)]);
      if (!p.steps[pos].op->has_host)
        throw graph_error("step " + std::to_string(c.step) + " '" + p.steps[pos].op->name + "' names the host kernel but its op has no host function\n" +
                          cut_wire_report(p, pos, wires));
    }
    if ((c.k == kernel::attention_prefill || c.k == kernel::attention_decode) && c.sizes.head_dim > FK_MAX_HEAD_DIM)
      throw graph_error("step " + std::to_string(c.step) + " 'attention': head_dim " + std::to_string(c.sizes.head_dim) +
                        " exceeds the kernels' limit of " + std::to_string(FK_MAX_HEAD_DIM));
  }
  return calls;
}

// What execute reads of a planned program: its tensors (index == id), steps in schedule order,
// buffers (index == tensor id) and control flow. A program and its memory_plan give one; so does a
// static program's frozen plan (plan/static_program.hpp), which runs through the same code.
struct plan_view {
  std::span<const tensor_info> tensors;
  std::span<const step> steps;
  std::span<const buffer> buffers;
  std::span<const region_info> control;
  std::span<const loop_carry> carries;

  const tensor_info& tensor(tensor_id t) const { return tensors[static_cast<std::size_t>(t)]; }
  const buffer& of(tensor_id t) const { return buffers[static_cast<std::size_t>(t)]; }
};

inline plan_view view_of(const program& p, const memory_plan& m) { return {p.tensors, p.steps, m.buffers, p.regions, p.carries}; }

// Runs the calls of a plan in order, with row 0 of the program at position `pos0`.
// What a kernel would read or write out of bounds is checked first, as the decoder's session checks
// it for its own calls: rows past a KV cache's capacity (its symbols bound apart from the tokens'),
// token ids outside the embedding table (read from the arena when the step runs, since a step may
// compute them). Throws std::out_of_range naming the step; nothing past that step runs. A host call
// runs its op's host function on the operands' bytes and bound shapes. Control flow runs as the
// regions say (graph/control_walk.hpp): a conditional's taken branch, a loop's trips (header,
// condition, the rest, then each carry's next value copied into its bytes) up to its bound.
inline void execute(const plan_view& p, std::span<const call> calls, const regions& r, const binding& b, std::int64_t pos0 = 0) {
  call_dims d{};
  d.b = b;
  d.pos0 = pos0;
  const scratch<int> position = schedule_positions(p.steps.data(), p.steps.size());
  auto step_of = [&](const call& c) -> const step& { return p.steps[static_cast<std::size_t>(position[static_cast<std::size_t>(c.step)])]; };
  auto bytes_of_operand = [&](const operand& o) -> std::byte* {
    if (o.where == region::weights) return reinterpret_cast<std::byte*>(const_cast<std::uint16_t*>(r.weights[static_cast<std::size_t>(o.slot)]));
    return detail::data_ptr<std::byte>(o, r);
  };
  auto view = [&](const operand& o) {
    const tensor_info& t = p.tensor(o.tensor);
    host_tensor h{};
    h.data = bytes_of_operand(o);
    h.type = t.type;
    h.rank = t.shp.rank;
    for (int i = 0; i < t.shp.rank; ++i) h.dims[i] = b(t.shp[i]);
    return h;
  };
  auto run_call = [&](const call& c) {
    const std::int64_t rows = c.rows.n * b.value[c.rows.symbol];
    const bool uses_cache = c.k == kernel::kv_store || c.k == kernel::k_store || c.k == kernel::attention_prefill || c.k == kernel::attention_decode;
    const std::int64_t start = detail::position_of(c, r, d);
    if (start < 0) throw std::out_of_range("step " + std::to_string(c.step) + ": position " + std::to_string(start) + " is negative");
    if (uses_cache && start + rows > c.sizes.capacity)
      throw std::out_of_range("step " + std::to_string(c.step) + ": positions " + std::to_string(start) + ".." + std::to_string(start + rows - 1) +
                              " do not fit a KV cache of " + std::to_string(c.sizes.capacity) + " positions");
    if (c.k == kernel::embed || c.k == kernel::embed_f32 || c.k == kernel::embed_backward) {
      const auto* ids = reinterpret_cast<const std::int32_t*>(bytes_of_operand(c.in[0]));
      for (std::int64_t t = 0; t < rows; ++t)
        if (ids[t] < 0 || ids[t] >= c.sizes.vocab)
          throw std::out_of_range("step " + std::to_string(c.step) + ": token id " + std::to_string(ids[t]) + " (row " + std::to_string(t) +
                                  ") is outside the embedding table [0, " + std::to_string(c.sizes.vocab) + ")");
    }
    if (c.k == kernel::host) {
      const step& s = step_of(c);
      host_tensor in[max_inputs]{};
      for (int k = 0; k < c.n_in; ++k) in[k] = view(c.in[static_cast<std::size_t>(k)]);
      s.op->host({.in = in, .n_in = c.n_in, .out = view(c.out), .at = &s.at});
      return;
    }
    if (invoke(c, r, d) != 0)
      throw std::out_of_range("step " + std::to_string(c.step) + " '" + step_of(c).op->name + "' (" + std::string(spec_of(c.k).name) + "): " + spec_of(c.k).refuses);
  };
  if (p.control.empty()) {
    for (const call& c : calls) run_call(c);
    return;
  }

  // Control flow. The bytes of a tensor (conditions and carries live in the arena or in state).
  auto bytes_at = [&](tensor_id t) {
    const buffer& f = p.of(t);
    if (f.where == region::weights) throw graph_error("control flow reads weight '" + to_string(p.tensor(t).name.str()) + "' as a condition or carry");
    return (f.where == region::state ? r.state : r.arena) + f.offset;
  };
  auto holds = [&](tensor_id condition) { return *bytes_at(condition) != std::byte{0}; };
  const control_walk walk(p.control, p.carries, calls.size());
  auto carry_over = [&](int loop) {  // after a trip: each next value into its carry's bytes
    const bool swap = walk.swaps(loop);
    std::vector<std::vector<std::byte>> staged;
    for (const loop_carry& c : p.carries) {
      if (c.loop != loop) continue;
      const auto n = static_cast<std::size_t>(bytes_of(p.tensor(c.value), b));
      const std::byte* from = bytes_at(c.next);
      if (swap) staged.emplace_back(from, from + n);
      else if (from != bytes_at(c.value)) std::memmove(bytes_at(c.value), from, n);
    }
    std::size_t k = 0;
    if (swap)
      for (const loop_carry& c : p.carries)
        if (c.loop == loop) {
          std::memcpy(bytes_at(c.value), staged[k].data(), staged[k].size());
          ++k;
        }
  };
  auto run = [&](auto& self, int begin, int end, int parent) -> void {
    walk.each(begin, end, parent, [&](int at) { run_call(calls[static_cast<std::size_t>(at)]); }, [&](int block) {
      const region_info& reg = walk.region(block);
      if (reg.kind == region_kind::then_branch) {
        const region_info& other = walk.else_of(block);
        if (holds(reg.condition)) self(self, reg.first, reg.end(), block);
        else self(self, other.first, other.end(), block + 1);
        return;
      }
      for (std::int64_t trip = 0; trip < reg.max_trips; ++trip) {
        self(self, reg.first, reg.first + reg.header, block);
        if (reg.condition >= 0 && !holds(reg.condition)) break;
        self(self, reg.first + reg.header, reg.end(), block);
        carry_over(block);
      }
    });
  };
  run(run, 0, static_cast<int>(calls.size()), -1);
}

inline void execute(const program& p, const memory_plan& m, std::span<const call> calls, const regions& r, const binding& b, std::int64_t pos0 = 0) {
  execute(view_of(p, m), calls, r, b, pos0);
}

}  // namespace fused::runtime
