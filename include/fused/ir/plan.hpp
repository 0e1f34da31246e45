// Planning a program lowered from a graph file: its symbols bound by name (each value checked
// against the file's constraints), then the run-time pipeline every program goes through: sizes
// checked without overflow, memory planned, the plan verified.
#pragma once
#include <cstdint>
#include <map>
#include <stdexcept>
#include <string>

#include "../core/text_string.hpp"
#include "../graph/graph_error.hpp"
#include "../plan/memory_plan.hpp"
#include "../plan/planner.hpp"
#include "../plan/size_check.hpp"
#include "../plan/verifier.hpp"
#include "document.hpp"

namespace fused::ir {

// The binding of `values` (symbol name -> value) for the document's symbols; throws
// std::invalid_argument naming the symbol when one is unbound, unknown or breaks a constraint.
inline binding bind(const document& doc, const std::map<std::string, std::int64_t>& values) {
  binding b{};
  for (const auto& [name, value] : values) {
    bool known = false;
    for (const auto& s : doc.symbols) known = known || s.name == name;
    if (!known) throw std::invalid_argument("the graph has no symbol \"" + name + "\"");
  }
  for (std::size_t i = 0; i < doc.symbols.size() && i + 1 < static_cast<std::size_t>(max_symbols); ++i) {
    const std::string& name = doc.symbols[i].name;
    const auto it = values.find(name);
    if (it == values.end()) throw std::invalid_argument("symbol \"" + name + "\" is not bound (--bind " + name + "=VALUE)");
    const std::int64_t v = it->second;
    if (v < 1) throw std::invalid_argument("symbol \"" + name + "\" = " + std::to_string(v) + " must be positive");
    if (v > max_dim) throw std::invalid_argument("symbol \"" + name + "\" = " + std::to_string(v) + " exceeds 2^31 = " + std::to_string(max_dim) + ", the largest dim a graph may have");
    for (const auto& c : doc.constraints) {
      if (c.symbols.empty() || c.symbols[0] != name) continue;
      if (c.kind == constraint_kind::range && (v < c.min || v > c.max))
        throw std::invalid_argument("symbol \"" + name + "\" = " + std::to_string(v) + " is outside its Range [" + std::to_string(c.min) + ", " + std::to_string(c.max) + "]");
      if (c.kind == constraint_kind::divisible && v % c.by != 0)
        throw std::invalid_argument("symbol \"" + name + "\" = " + std::to_string(v) + " is not Divisible by " + std::to_string(c.by));
      if (c.kind == constraint_kind::equal) {
        const auto other = values.find(c.symbols[1]);
        if (other != values.end() && other->second != v)
          throw std::invalid_argument("symbol \"" + name + "\" = " + std::to_string(v) + " must Equal \"" + c.symbols[1] + "\" = " + std::to_string(other->second));
      }
    }
    b.value[i + 1] = v;
  }
  return b;
}

// The verified memory plan of `p` under `b`; throws std::invalid_argument when a tensor or region
// would exceed max_region_bytes, graph_error when the verifier rejects the plan.
inline memory_plan plan(const program& p, const binding& b) {
  if (const auto big = find_oversize(p, b)) {
    const std::string what = big->tensor >= 0 ? "tensor '" + to_string(p.tensor(big->tensor).name) + "'" : std::string("the total");
    throw std::invalid_argument(what + " of region " + name_of(big->where) + " needs more than " + std::to_string(max_region_bytes) + " bytes under this binding");
  }
  memory_plan m = plan_memory(p, b);
  const verdict v = verify(p, m);
  if (!v.ok) throw graph_error("fused: the memory plan failed verification: " + to_string(v.what));
  return m;
}

}  // namespace fused::ir
