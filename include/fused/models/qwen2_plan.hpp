// Plans of a Qwen2 model: the compile-time ones (static_plans, qwen2_static_plan.hpp) and the same
// pipeline at run time for a config known only then (plan_for), which throws graph_error.
#pragma once
#include <stdexcept>
#include <string>

#include "../core/text_string.hpp"
#include "../graph/graph_error.hpp"
#include "qwen2_static_plan.hpp"

namespace fused::qwen2 {

// The same pipeline at run time, for a config known only then (a config.json): build, schedule,
// lower, plan, verify. Throws graph_error on an invalid graph or a plan the verifier rejects.
struct planned {
  program prog;
  memory_plan mem;
};

inline planned plan_for(const config& c, const mode& m, graph_options o = {}) {
  if (m.tokens < 1) throw std::invalid_argument("a prefill must take at least one token");
  if (m.ctx < m.tokens) throw std::invalid_argument("the KV capacity (" + std::to_string(m.ctx) + ") must hold the prefill (" + std::to_string(m.tokens) + " tokens)");
  if (m.ctx > c.max_position_embeddings)
    throw std::invalid_argument("the KV capacity " + std::to_string(m.ctx) + " exceeds max_position_embeddings " + std::to_string(c.max_position_embeddings));
  planned r{build_graph(c, o), {}};
  if (!r.prog.ok()) throw graph_error(std::string("fused: ") + name_of(r.prog.error) + ": " + to_string(r.prog.message));
  r.mem = plan_memory(r.prog, m.bind());
  const verdict v = verify(r.prog, r.mem);
  if (!v.ok) throw graph_error("fused: the memory plan failed verification: " + to_string(v.what));
  return r;
}

}  // namespace fused::qwen2
