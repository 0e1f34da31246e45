// A decoder model as a graph file (fused/ir/): the family's program exported node for node, with
// its symbols named ("tokens", "ctx"), their ranges, and the config it was made from in the
// metadata, so that `fused plan --graph` prints what `fused plan --config` prints; and back: a
// graph file recognized as the family program of the config it records (`fused gen-c --graph`).
#pragma once
#include <algorithm>
#include <climits>
#include <cstdint>
#include <string>
#include <type_traits>

#include "../core/json_text.hpp"
#include "../graph/graph_error.hpp"
#include "../ir/export.hpp"
#include "../version.hpp"
#include "decoder_config_fields.hpp"
#include "decoder_generate.hpp"
#include "decoder_mode.hpp"
#include "family.hpp"
#include "registry.hpp"

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

namespace detail {
// Program `p` of family `f` as a graph file: symbols named, their ranges, the config and `options`
// in the metadata. `source`: the config file the model was read from, recorded as the plan's "config".
inline ir::document decoder_document(const program& p, const family_entry& f, const config& c, const std::string& source, ir::json options) {
  ir::json meta = ir::json::object();
  meta["producer"] = "fused " FUSED_VERSION_STRING;
  meta["name"] = std::string(f.model_type);
  meta["source"] = source;
  meta["model"] = config_json(f, c);
  meta["options"] = std::move(options);
  // Symbol ids follow decoder_graph.hpp: $1 tokens, $2 ctx.
  static_assert(sym_tokens == 1 && sym_ctx == 2);
  ir::document doc = ir::from_program(p,
                                      {{"tokens", "tokens in one call (a prefill's tokens; 1 to decode)"},
                                       {"ctx", "KV-cache capacity in positions"}},
                                      meta);
  const std::int64_t max_pos = c.max_position_embeddings;
  const std::int64_t max_ctx = c.sliding_window ? std::min<std::int64_t>(max_pos, c.sliding_window) : max_pos;
  doc.constraints.push_back({.kind = ir::constraint_kind::range, .symbols = {"tokens"}, .min = 1, .max = max_pos});
  doc.constraints.push_back({.kind = ir::constraint_kind::range, .symbols = {"ctx"}, .min = 1, .max = max_ctx});
  return doc;
}
}  // namespace detail

inline ir::document to_graph_file(const family_entry& f, const config& c, graph_options o, const std::string& source) {
  return detail::decoder_document(f.graph(c, o), f, c, source, {{"logits", name_of(o.logits)}});
}

// Generation as one program (decoder_generate.hpp) as a graph file, with options.generate (the
// most new tokens) and options.stop_ids. ctx must hold the prompt and the new tokens: a run that
// would pass it stops at the step that would, naming it.
inline ir::document generation_graph_file(const family_entry& f, const config& c, const generation_options& g, const std::string& source) {
  return detail::decoder_document(generation(f, c, g).prog, f, c, source,
                                  {{"logits", "last"}, {"generate", g.max_new_tokens}, {"stop_ids", g.stop_ids}});
}

// The config config_json wrote (`where` names it in errors): every field it holds, by name, of the
// field's type; fields absent keep their defaults (config_json omits unset features).
inline config config_from_json(const ir::json& j, const std::string& where) {
  if (!j.is_object()) throw graph_error(where + " must be an object of config fields");
  config c{};
  std::size_t read = 0;
  boost::hana::for_each(boost::hana::accessors<config>(), [&](auto field) {
    const char* name = boost::hana::to<const char*>(boost::hana::first(field));
    const auto it = j.find(name);
    if (it == j.end()) return;
    ++read;
    auto& value = boost::hana::second(field)(c);
    using T = std::remove_reference_t<decltype(value)>;
    const std::string what = where + "." + name;
    if constexpr (std::is_same_v<T, rope_kind>) {
      if (!it->is_string() || (*it != "default" && *it != "llama3")) throw graph_error(what + " must be \"default\" or \"llama3\"");
      value = *it == "llama3" ? rope_kind::llama3 : rope_kind::plain;
    } else if constexpr (std::is_same_v<T, bool>) {
      if (!it->is_boolean()) throw graph_error(what + " must be true or false");
      value = it->template get<bool>();
    } else if constexpr (std::is_integral_v<T>) {
      if (!it->is_number_integer() || it->template get<std::int64_t>() < 0 || it->template get<std::int64_t>() > INT32_MAX)
        throw graph_error(what + " must be an integer in 0 .. 2^31-1");
      value = static_cast<T>(it->template get<std::int64_t>());
    } else {
      if (!it->is_number()) throw graph_error(what + " must be a number");
      value = static_cast<T>(it->template get<double>());
    }
  });
  if (read + 1 != j.size() || !j.contains("model_type")) throw graph_error(where + " holds fields that are not a decoder config's, or no \"model_type\"");
  return c;
}

// metadata.options.logits: "last" or "all" (absent: last); anything else is refused, naming it.
inline logits_rows logits_option(const ir::json& meta) {
  if (!meta.contains("options") || !meta["options"].is_object() || !meta["options"].contains("logits")) return logits_rows::last;
  const ir::json& v = meta["options"]["logits"];
  if (v == "all") return logits_rows::all;
  if (v != "last") throw graph_error("metadata.options.logits must be \"last\" or \"all\", got " + json_text::excerpt(v));
  return logits_rows::last;
}

// What a decoder's graph file was exported from: its family, config and options.
struct decoder_source {
  const family_entry* family = nullptr;
  config cfg{};
  graph_options options{};
};

// The family, config and options a graph file records in its metadata (`model`, `options`),
// checked against the graph itself: lowered, it must be that family's program for that config,
// tensor for tensor and step for step. Throws graph_error naming the first difference.
inline decoder_source decoder_source_of(const ir::document& doc, const program& p) {
  const ir::json& meta = doc.metadata;
  if (!meta.contains("model") || !meta["model"].is_object() || !meta["model"].contains("model_type") || !meta["model"]["model_type"].is_string())
    throw graph_error("metadata.model holds no decoder config (a file `fused graph export` wrote records one)");
  decoder_source s;
  const std::string model_type = meta["model"]["model_type"].get<std::string>();
  s.family = find_family(model_type);
  if (!s.family) throw graph_error("metadata.model.model_type \"" + model_type + "\" is not a family this build knows");
  s.cfg = config_from_json(meta["model"], "metadata.model");
  s.options.logits = logits_option(meta);
  const program expected = s.family->graph(s.cfg, s.options);
  if (!expected.ok()) throw graph_error("metadata.model: " + to_string(expected.message));
  auto differs = [](const std::string& what) { throw graph_error("the graph is not the " + what + " (hand-edited?)"); };
  const std::string family_program = "'" + model_type + "' program of its metadata.model";
  if (p.tensors.size() != expected.tensors.size() || p.steps.size() != expected.steps.size() || !p.regions.empty())
    differs(family_program + ": it has another number of tensors or steps, or control flow");
  for (std::size_t t = 0; t < p.tensors.size(); ++t) {
    const tensor_info &a = p.tensors[t], &b = expected.tensors[t];
    if (a.name.str() != b.name.str() || a.type != b.type || !(a.shp == b.shp) || a.kind != b.kind || a.is_feed != b.is_feed)
      differs(family_program + ": tensor " + std::to_string(t) + " '" + to_string(a.name.str()) + "' differs");
  }
  const scratch<int> at = expected.position_of_step();
  for (const step& a : p.steps) {
    const step& b = expected.steps[static_cast<std::size_t>(at[static_cast<std::size_t>(a.id)])];
    bool same = std::string_view(a.op->name) == b.op->name && a.n_inputs == b.n_inputs && a.result == b.result && a.at == b.at;
    for (int k = 0; same && k < a.n_inputs; ++k) same = a.inputs[k] == b.inputs[k];
    if (!same) differs(family_program + ": step " + std::to_string(a.id) + " '" + a.op->name + "' differs");
  }
  return s;
}

}  // namespace fused::decoder
