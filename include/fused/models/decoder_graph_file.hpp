// A decoder model as a graph file (fused/ir/): the family's program exported node for node, with
// its symbols named ("tokens", "ctx"), their ranges, and the config it was made from in the
// metadata, so that `fused plan --graph` prints what `fused plan --config` prints.
#pragma once
#include <algorithm>
#include <string>
#include <type_traits>

#include "../ir/export.hpp"
#include "../version.hpp"
#include "decoder_config_fields.hpp"
#include "decoder_mode.hpp"
#include "family.hpp"

namespace fused::decoder {

// The config's fields as JSON (features only when set), model_type first: what a plan records.
inline ir::json config_json(const family_entry& f, const config& c) {
  ir::json j = ir::json::object();
  j["model_type"] = f.model_type;
  for_each_printed_field(c, [&](const char* name, auto value) {
    if constexpr (std::is_enum_v<decltype(value)>) j[name] = name_of(value);
    else j[name] = value;
  });
  return j;
}

inline constexpr const char* name_of(logits_rows l) { return l == logits_rows::all ? "all" : "last"; }

// `source`: the config file the model was read from, recorded as the plan's "config".
inline ir::document to_graph_file(const family_entry& f, const config& c, graph_options o, const std::string& source) {
  ir::json meta = ir::json::object();
  meta["producer"] = "fused " FUSED_VERSION_STRING;
  meta["name"] = std::string(f.model_type);
  meta["source"] = source;
  meta["model"] = config_json(f, c);
  meta["options"] = {{"logits", name_of(o.logits)}};
  // Symbol ids follow decoder_graph.hpp: $1 tokens, $2 ctx.
  static_assert(sym_tokens == 1 && sym_ctx == 2);
  ir::document doc = ir::from_program(f.graph(c, o),
                                      {{"tokens", "tokens in one call (a prefill's tokens; 1 to decode)"},
                                       {"ctx", "KV-cache capacity in positions"}},
                                      meta);
  const std::int64_t max_pos = c.max_position_embeddings;
  const std::int64_t max_ctx = c.sliding_window ? std::min<std::int64_t>(max_pos, c.sliding_window) : max_pos;
  doc.constraints.push_back({.kind = ir::constraint_kind::range, .symbols = {"tokens"}, .min = 1, .max = max_pos});
  doc.constraints.push_back({.kind = ir::constraint_kind::range, .symbols = {"ctx"}, .min = 1, .max = max_ctx});
  return doc;
}

}  // namespace fused::decoder
