// A memory plan as JSON: the format `fused plan --format json` prints, documented in docs/PLAN_FORMAT.md.
//
//   {"arena_bytes", "lower_bound_bytes", "regions": [{"name", "bytes"}],
//    "buffers": [{"id", "name", "region", "offset", "bytes", "first_step", "last_step", ...}],
//    "steps":   [{"id", "op", "inputs", "outputs", "level", "kernel", ...}],
//    "control": [{"region", "kind", "parent", "first", "count", "condition", ...}]}   (control flow only)
//
// Units are bytes; offsets are relative to the start of the buffer's region. Steps are listed in
// schedule order. Buffer ids are tensor ids, so a step's inputs/outputs name buffers directly.
// first_step/last_step are step ids (not schedule positions): the step at which the buffer must
// first hold its value and the last step that needs it. For a buffer a step writes, that is its
// writer; for a weight or state feed, its first reader; for an input the caller fills, the first
// step of the schedule; an output stays live to the last step (the caller reads it afterwards).
// Extra keys beyond the required ones are listed in docs/PLAN_FORMAT.md.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>

#include <nlohmann/json.hpp>

#include "../core/json_text.hpp"
#include "../core/text_string.hpp"
#include "memory_plan.hpp"

namespace fused {

inline constexpr int plan_json_version = 1;

namespace detail {
// The id of the step at schedule position `pos`, or null when no step is there (an empty program).
inline nlohmann::ordered_json step_id_at(const program& p, int pos) {
  if (pos < 0 || static_cast<std::size_t>(pos) >= p.steps.size()) return nullptr;
  return p.steps[static_cast<std::size_t>(pos)].id;
}
}  // namespace detail

// The bound shape of a tensor, e.g. [512, 896].
inline nlohmann::ordered_json bound_shape_json(const tensor_info& t, const binding& b) {
  nlohmann::ordered_json s = nlohmann::ordered_json::array();
  for (int i = 0; i < t.shp.rank; ++i) s.push_back(b(t.shp[i]));
  return s;
}

// @pre m is the (verified) plan of p: m.buffers.size() == p.tensors.size(), m.kernels.size() == p.steps.size().
FUSED_UNOPTIMIZED inline nlohmann::ordered_json plan_to_json(const program& p, const memory_plan& m) {
  using json = nlohmann::ordered_json;
  json doc = json::object();
  doc["format"] = "fused-plan";
  doc["version"] = plan_json_version;
  doc["arena_bytes"] = m.arena_bytes();
  doc["lower_bound_bytes"] = m.lower_bound;
  doc["alignment"] = mem_align;
  doc["strategy"] = name_of(m.chosen);
  if (p.training) doc["training"] = true;  // its mode-sensitive steps run their training behaviour
  doc["arena_by_strategy"] = json{{name_of(strategy::greedy_by_size), m.arena_by_strategy[0]},
                                  {name_of(strategy::greedy_by_first_use), nullptr}};
  if (m.arena_by_strategy[1] >= 0) doc["arena_by_strategy"][name_of(strategy::greedy_by_first_use)] = m.arena_by_strategy[1];

  json regions = json::array();
  for (int r = 0; r < region_count; ++r)
    regions.push_back(json{{"name", name_of(static_cast<region>(r))}, {"bytes", m.region_bytes[static_cast<std::size_t>(r)]}});
  doc["regions"] = std::move(regions);

  json buffers = json::array();
  for (const auto& b : m.buffers) {
    const tensor_info& t = p.tensor(b.tensor);
    json j = json::object();
    j["id"] = b.tensor;
    j["name"] = to_string(t.name);
    j["region"] = name_of(b.where);
    j["offset"] = b.offset;
    j["bytes"] = b.bytes;
    j["first_step"] = detail::step_id_at(p, b.first);
    j["last_step"] = detail::step_id_at(p, b.last);
    j["role"] = name_of(t.kind);
    j["dtype"] = name_of(t.type);
    j["shape"] = bound_shape_json(t, m.bind);
    j["producer"] = t.producer >= 0 ? json(t.producer) : json(nullptr);
    j["group"] = b.group;
    buffers.push_back(std::move(j));
  }
  doc["buffers"] = std::move(buffers);

  json steps = json::array();
  for (std::size_t s = 0; s < p.steps.size(); ++s) {
    const step& st = p.steps[s];
    json inputs = json::array();
    for (int k = 0; k < st.n_inputs; ++k) inputs.push_back(st.inputs[static_cast<std::size_t>(k)]);
    json j = json::object();
    j["id"] = st.id;
    j["op"] = st.op->name;
    j["inputs"] = std::move(inputs);
    j["outputs"] = st.work >= 0 ? json::array({st.result, st.work}) : json::array({st.result});
    if (st.work >= 0) j["work"] = st.work;
    j["level"] = st.level;
    j["kernel"] = s < m.kernels.size() && m.kernels[s] ? json(m.kernels[s]) : json(nullptr);
    j["category"] = st.op->category;
    if (st.mode_sensitive) j["mode_sensitive"] = true;  // honours the program's training flag (dropout)
    steps.push_back(std::move(j));
  }
  doc["steps"] = std::move(steps);
  // Control flow (only a program that has it): each region's schedule positions, its condition
  // (a tensor id), a loop's header, bound and carries.
  if (!p.regions.empty()) {
    json control = json::array();
    for (std::size_t r = 0; r < p.regions.size(); ++r) {
      const region_info& g = p.regions[r];
      json j = json::object();
      j["region"] = r;
      j["kind"] = name_of(g.kind);
      j["parent"] = g.parent >= 0 ? json(g.parent) : json(nullptr);
      j["first"] = g.first;
      j["count"] = g.count;
      j["condition"] = g.condition >= 0 ? json(g.condition) : json(nullptr);
      if (g.kind == region_kind::loop_body) {
        j["header"] = g.header;
        j["max_trips"] = g.max_trips;
        json carries = json::array();
        for (const loop_carry& c : p.carries)
          if (c.loop == static_cast<int>(r)) carries.push_back({{"value", c.value}, {"next", c.next}});
        j["carries"] = std::move(carries);
      }
      control.push_back(std::move(j));
    }
    doc["control"] = std::move(control);
  }
  return doc;
}

// The document as text for people and diffs: one top-level key per line, and each element of an
// array of objects (buffers, steps, regions) on a line of its own.
inline std::string dump_plan_json(const nlohmann::ordered_json& doc) {
  if (!doc.is_object()) return json_text::dump(doc);
  // append() rather than operator+ on temporaries: g++ 12 warns falsely (-Wrestrict) on the latter.
  std::string out = "{\n";
  std::size_t i = 0;
  for (auto it = doc.begin(); it != doc.end(); ++it, ++i) {
    out.append(" ").append(json_text::dump(nlohmann::ordered_json(it.key()))).append(": ");
    const auto& v = it.value();
    if (v.is_array() && !v.empty() && v.front().is_object()) {
      out.append("[\n");
      for (std::size_t k = 0; k < v.size(); ++k) out.append("  ").append(json_text::dump(v[k])).append(k + 1 < v.size() ? ",\n" : "\n");
      out.append(" ]");
    } else {
      out.append(json_text::dump(v));
    }
    out.append(i + 1 < doc.size() ? ",\n" : "\n");
  }
  return out.append("}\n");
}

}  // namespace fused
