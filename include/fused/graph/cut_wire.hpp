// Run-time "cut-wire" diagnostics: when whatever runs a program finds a step it cannot feed (an
// unbound weight, a tensor whose actual shape is not the planned one), it reports the step, the op,
// each input with its bound/missing status and expected vs actual shape, the producers of the inputs
// and the consumers of the result — the wire that is cut and both of its ends.
#pragma once
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <vector>

#include "../core/text_string.hpp"
#include "../core/shape_text.hpp"
#include "graph_error.hpp"
#include "program.hpp"

namespace fused {

// What the runner knows of one tensor: whether data is bound to it, and (optionally) its actual shape.
struct wire_state {
  bool bound = false;
  std::optional<shape> actual{};
};

namespace detail {
inline std::string step_label(const program& p, const step& s) {
  return "step " + std::to_string(s.id) + " '" + s.op->name + "' -> '" + to_string(p.tensor(s.result).name) + "'";
}
}  // namespace detail

// The report for the step at schedule position `pos`; `wires` is indexed by tensor id.
inline std::string cut_wire_report(const program& p, std::size_t pos, std::span<const wire_state> wires) {
  const step& s = p.steps.at(pos);
  std::string r = "cut wire at " + detail::step_label(p, s) + " (schedule position " + std::to_string(pos) + ", level " +
                  std::to_string(s.level) + ")\n";
  for (int k = 0; k < s.n_inputs; ++k) {
    const tensor_info& t = p.tensor(s.inputs[static_cast<std::size_t>(k)]);
    const wire_state& w = wires[static_cast<std::size_t>(t.id)];
    const bool shape_ok = !w.actual || *w.actual == t.shp;
    r += "  input " + std::to_string(k) + " #" + std::to_string(t.id) + " '" + to_string(t.name) + "' (" + std::string(name_of(t.kind)) + "): ";
    if (!shape_ok) r += "SHAPE MISMATCH";
    else if (t.is_feed) r += w.bound ? "bound" : "MISSING";
    else r += "computed";
    r += ", expected " + std::string(name_of(t.type)) + " " + to_string(shape_text(t.shp));
    if (w.actual) r += ", actual " + to_string(shape_text(*w.actual));
    if (t.producer >= 0) {
      for (const auto& ps : p.steps)
        if (ps.id == t.producer) r += "; produced by " + detail::step_label(p, ps);
    } else {
      r += "; a feed";
    }
    r += "\n";
  }
  std::string consumers;
  for (const auto& cs : p.steps)
    for (int k = 0; k < cs.n_inputs; ++k)
      if (cs.inputs[static_cast<std::size_t>(k)] == s.result) {
        consumers += (consumers.empty() ? "" : ", ") + detail::step_label(p, cs);
        break;
      }
  bool is_output = false;
  for (const auto& o : p.outputs) is_output |= o.id == s.result;
  r += "  result consumed by: " + (consumers.empty() ? std::string("nothing") : consumers) + (is_output ? " (and a program output)" : "");
  return r;
}

// Checks every step's inputs against what the runner has; throws graph_error with the cut-wire
// report of the first step (in schedule order) that reads a missing or misshapen tensor.
inline void check_wires(const program& p, std::span<const wire_state> wires) {
  if (wires.size() != p.tensors.size())
    throw graph_error("cut wire: the runner describes " + std::to_string(wires.size()) + " tensors, the program has " +
                      std::to_string(p.tensors.size()));
  std::vector<bool> written(p.tensors.size(), false);
  for (std::size_t pos = 0; pos < p.steps.size(); ++pos) {
    const step& s = p.steps[pos];
    for (int k = 0; k < s.n_inputs; ++k) {
      const tensor_info& t = p.tensor(s.inputs[static_cast<std::size_t>(k)]);
      const wire_state& w = wires[static_cast<std::size_t>(t.id)];
      const bool ready = t.is_feed ? w.bound : written[static_cast<std::size_t>(t.id)];
      if (!ready || (w.actual && !(*w.actual == t.shp))) throw graph_error(cut_wire_report(p, pos, wires));
    }
    written[static_cast<std::size_t>(s.result)] = true;
  }
}

}  // namespace fused
