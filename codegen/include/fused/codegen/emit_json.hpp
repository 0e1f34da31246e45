// The generated model's two JSON companions:
//   memory_layout.json  both modes' memory plans in the `fused plan` format (plan/json.hpp), each
//                       buffer also giving its offset in the debug layout, plus the region sizes
//                       of both layouts and the fingerprints;
//   graph.json          the FusedProgram: tensors, feeds, steps (schedule order, each with the kernel
//                       of each mode), outputs, state pairs, and meta (config, limits, fingerprints).
// Both are printed one top-level key a line and one array element a line (dump_plan_json's format).
#pragma once
#include <string>

#include <nlohmann/json.hpp>

#include <fused/core/json_text.hpp>
#include <fused/plan/json.hpp>

#include "c_program.hpp"
#include "layout.hpp"

namespace fused::codegen {

namespace detail {
inline program as_program(const mode_plan& m) {
  program p;
  p.tensors = m.tensors;
  p.steps = m.steps;
  p.regions = m.regions;
  p.carries = m.carries;
  return p;
}
inline memory_plan as_memory_plan(const mode_plan& m) {
  memory_plan mp;
  mp.bind = m.bind;
  mp.buffers = m.buffers;
  mp.kernels = m.kernels;
  mp.region_bytes = m.region_bytes;
  mp.lower_bound = m.lower_bound;
  mp.chosen = m.chosen;
  return mp;
}
FUSED_UNOPTIMIZED inline std::string indent(const std::string& text) {
  std::string out;
  for (std::size_t i = 0; i < text.size(); ++i) {
    out += text[i];
    if (text[i] == '\n' && i + 1 < text.size()) out += ' ';
  }
  while (!out.empty() && out.back() == '\n') out.pop_back();
  return out;
}
inline nlohmann::ordered_json dim_json(const dim& d) {
  if (d.symbol == 0) return d.n;
  return (d.n == 1 ? std::string() : std::to_string(d.n) + "*") + "$" + std::to_string(d.symbol);
}
}  // namespace detail

FUSED_UNOPTIMIZED inline std::string emit_memory_layout(const c_program& p) {
  using json = nlohmann::ordered_json;
  const debug_region dstate = with_canaries(p.prefill, region::state);
  std::string out = "{\n";
  // append() rather than operator+ on temporaries: g++ 12 warns falsely (-Wrestrict) on the latter.
  auto key = [&](const char* k, const json& v) { out.append(" ").append(json_text::dump(json(k))).append(": ").append(json_text::dump(v)).append(",\n"); };
  key("format", "fused-c-layout");
  key("version", 1);
  key("name", p.name);
  key("fingerprint", hex64(layout_fingerprint(p)));
  key("weights_fingerprint", hex64(weights_fingerprint(p)));
  key("mem_align", mem_align);
  key("canary_bytes", canary_bytes);
  key("max_seq", p.max_seq);
  key("max_ctx", p.max_ctx);
  const std::vector<const mode_plan*> modes = p.modes();
  std::vector<debug_region> debug;
  json regions{{"weights", p.weights_bytes()}, {"state", p.state_bytes()}, {"arena", p.arena_bytes()}};
  json debug_regions{{"weights", p.weights_bytes()}, {"state", dstate.bytes}, {"arena", 0}};
  for (const mode_plan* m : modes) {
    debug.push_back(with_canaries(*m, region::activations));
    regions[std::string(m->mode) + "_arena"] = m->bytes(region::activations);
    debug_regions[std::string(m->mode) + "_arena"] = debug.back().bytes;
    debug_regions["arena"] = std::max(debug_regions["arena"].get<std::int64_t>(), debug.back().bytes);
  }
  key("regions", regions);
  key("debug_regions", debug_regions);
  for (std::size_t k = 0; k < modes.size(); ++k) {
    const mode_plan* m = modes[k];
    json doc = plan_to_json(detail::as_program(*m), detail::as_memory_plan(*m));
    doc.erase("arena_by_strategy");  // a record of the planner's search, which a frozen static plan does not keep
    const debug_region& dr = debug[k];
    for (auto& b : doc["buffers"]) {
      const auto id = b["id"].get<std::size_t>();
      const region r = m->buffers[id].where;
      // A state buffer's debug offset is its prefill feed's (the generate mode's state tensors sit on those bytes).
      const auto feed = [&] { return static_cast<std::size_t>(m->mode == std::string_view("generate") ? p.state_feed_at(m->buffers[id].offset) : static_cast<tensor_id>(id)); };
      b["debug_offset"] = r == region::weights ? m->buffers[id].offset : r == region::state ? dstate.offset[feed()] : dr.offset[id];
      b["c_name"] = bytes_macro(p, *m, static_cast<tensor_id>(id));
    }
    out.append(" ").append(json_text::dump(json(m->mode))).append(": ").append(detail::indent(dump_plan_json(doc))).append(k + 1 < modes.size() ? ",\n" : "\n");
  }
  return out + "}\n";
}

FUSED_UNOPTIMIZED inline std::string emit_graph(const c_program& p) {
  using json = nlohmann::ordered_json;
  const mode_plan& m = p.prefill;
  json doc = json::object();
  doc["format"] = "fused-program";
  doc["version"] = 1;
  json cfg = json::object();
  for (const auto& [k, v] : config_fields(p.cfg)) cfg[k] = json_text::parse_ordered(v);
  cfg["tie_word_embeddings"] = p.cfg.tie_word_embeddings;
  doc["meta"] = json{{"name", p.name},
                     {"architecture", std::string(p.model_type)},
                     {"config", cfg},
                     {"symbols", {{"$1", "tokens in this call"}, {"$2", "KV-cache positions"}}},
                     {"modes", {{"prefill", {{"$1", p.max_seq}, {"$2", p.max_ctx}}}, {"decode", {{"$1", 1}, {"$2", p.max_ctx}}}}},
                     {"logits", p.all_rows() ? "all" : "last"},

                     {"fingerprint", hex64(layout_fingerprint(p))},
                     {"weights_fingerprint", hex64(weights_fingerprint(p))}};
  if (p.generate)  // generation as one program: its plan (tensors, steps, control) is memory_layout.json's "generate"
    doc["meta"]["generate"] = json{{"max_new_tokens", p.generation.max_new_tokens}, {"stop_ids", p.generation.stop_ids}};
  json tensors = json::array(), feeds = json::array();
  for (const auto& t : m.tensors) {
    json shape = json::array();
    for (int i = 0; i < t.shp.rank; ++i) shape.push_back(detail::dim_json(t.shp[i]));
    tensors.push_back(json{{"id", t.id}, {"name", tensor_name(t)}, {"role", name_of(t.kind)}, {"dtype", name_of(t.type)}, {"shape", shape},
                           {"producer", t.producer >= 0 ? json(t.producer) : json(nullptr)}});
    if (t.is_feed) feeds.push_back(t.id);
  }
  doc["tensors"] = std::move(tensors);
  doc["feeds"] = std::move(feeds);
  json steps = json::array();
  for (std::size_t i = 0; i < m.steps.size(); ++i) {
    const step& s = m.steps[i];
    json inputs = json::array();
    for (int k = 0; k < s.n_inputs; ++k) inputs.push_back(s.inputs[static_cast<std::size_t>(k)]);
    json at = json::object();
    at["i"] = s.at.i;
    at["f"] = s.at.f;
    json entry{{"id", s.id},
               {"op", s.op->name},
               {"inputs", inputs},
               {"result", s.result},
               {"work", s.work >= 0 ? json(s.work) : json(nullptr)},
               {"attrs", at},
               {"level", s.level},
               {"kernels", {{"prefill", m.kernels[i] ? m.kernels[i] : ""}, {"decode", p.decode.kernels[i] ? p.decode.kernels[i] : ""}}}};
    if (s.mode_sensitive) entry["mode_sensitive"] = true;  // honours training (dropout); absent: false
    steps.push_back(std::move(entry));
  }
  doc["steps"] = std::move(steps);
  json outputs = json::array(), state = json::array();
  for (const auto& o : p.outputs) outputs.push_back(json{{"name", o.name}, {"tensor", o.id}});
  for (const auto& s : p.state) state.push_back(json{{"in", s.in}, {"out", s.out}});
  doc["outputs"] = std::move(outputs);
  doc["state"] = std::move(state);
  return dump_plan_json(doc);
}

}  // namespace fused::codegen
