// Plans of a decoder model: the compile-time ones (static_plans, decoder_static_plan.hpp) and the same
// pipeline at run time for a config known only then (plan_for), which throws graph_error.
#pragma once
#include <stdexcept>
#include <string>
#include <utility>

#include "../core/text_string.hpp"
#include "../graph/graph_error.hpp"
#include "../plan/size_check.hpp"
#include "decoder_limits.hpp"
#include "decoder_static_plan.hpp"
#include "family.hpp"

namespace fused::decoder {

// The same pipeline at run time, for a config known only then (a config.json): build, schedule,
// lower, plan, verify. Throws graph_error on an invalid graph or a plan the verifier rejects, and
// std::invalid_argument naming the config field or the mode's tokens/ctx when the model is too
// large to plan (decoder_limits.hpp): sizes are checked without overflow before anything is built.
struct planned {
  program prog;
  memory_plan mem;
};

// A built program planned for `b` and verified: graph_error for an invalid program or a plan the
// verifier rejects, std::invalid_argument when a tensor or region outgrows max_region_bytes (the
// sentence starts with `sizes(big, prog)`, which names the sizes asked for).
template <class DescribeSizes>
planned plan_built(program prog, const binding& b, DescribeSizes sizes) {
  planned r{std::move(prog), {}};
  if (!r.prog.ok()) throw graph_error(std::string("fused: ") + name_of(r.prog.error) + ": " + to_string(r.prog.message));
  if (const auto big = find_oversize(r.prog, b)) {
    const std::string what = big->tensor >= 0 ? "tensor " + to_string(r.prog.tensor(big->tensor).name) : std::string("the total");
    throw std::invalid_argument(sizes(*big, r.prog) + ": " + what + " of region " + name_of(big->where) + " needs more than " +
                                std::to_string(max_region_bytes) + " bytes");
  }
  r.mem = plan_memory(r.prog, b);
  if (const verdict v = verify(r.prog, r.mem); !v.ok) throw graph_error("fused: the memory plan failed verification: " + to_string(v.what));
  return r;
}

// Refuses positions past the config's max_position_embeddings or sliding_window (only full attention
// is implemented). `exceed`: the positions asked for and the verb, e.g. "the KV capacity 4096 exceeds".
inline void check_positions(const config& c, std::int64_t positions, const std::string& exceed) {
  if (positions > c.max_position_embeddings) throw std::invalid_argument(exceed + " max_position_embeddings " + std::to_string(c.max_position_embeddings));
  if (c.sliding_window != 0 && positions > c.sliding_window)
    throw std::invalid_argument(exceed + " sliding_window " + std::to_string(c.sliding_window) +
                                ": only full attention is implemented, which differs from the model's windowed attention past " +
                                std::to_string(c.sliding_window) + " positions");
}

inline planned plan_for(const family_entry& f, const config& c, const mode& m, graph_options o = {}) {
  if (m.tokens < 1) throw std::invalid_argument("a prefill must take at least one token");
  if (m.ctx < m.tokens) throw std::invalid_argument("the KV capacity (" + std::to_string(m.ctx) + ") must hold the prefill (" + std::to_string(m.tokens) + " tokens)");
  check_positions(c, m.ctx, "the KV capacity " + std::to_string(m.ctx) + " exceeds");
  if (const auto p = check_sizes(c)) throw std::invalid_argument(std::string("config field \"") + p->field + "\": " + p->message);
  const binding b = m.bind();
  return plan_built(f.graph(c, o), b, [&](const oversize& big, const program& prog) {
    const bool by_ctx = big.tensor >= 0 && [&] {
      const shape& s = prog.tensor(big.tensor).shp;
      for (int i = 0; i < s.rank; ++i)
        if (s.d[i].symbol == sym_ctx) return true;
      return false;
    }();
    return std::string(by_ctx ? "ctx" : "tokens") + ": " + name_of(m.ph) + " of " + std::to_string(m.tokens) + " tokens with KV capacity " +
           std::to_string(m.ctx);
  });
}

}  // namespace fused::decoder
