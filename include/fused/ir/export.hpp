// A FusedProgram as a graph file: each feed an Input (state: "state": true) or a GetAttr (a weight,
// by its name), each step a Call with its op's attributes by name, each output an Output, each
// state pair an Output that "carries" the state Input. Nodes follow the program's tensor ids, so
// lowering the file (lower.hpp) builds the same program: same ids, same names, same plan.
// Control flow becomes Conditional and Loop nodes (after the others) and Merges; such a file
// lowers to an equivalent program (its steps may be numbered in another order).
#pragma once
#include <algorithm>
#include <cstdint>
#include <utility>
#include <string>
#include <vector>

#include "../core/text_string.hpp"
#include "../graph/program.hpp"
#include "document.hpp"

namespace fused::ir {

namespace detail {
inline value_type value_of(const tensor_info& t, const std::vector<std::string>& symbols) {
  value_type v{};
  v.type = t.type;
  for (int i = 0; i < t.shp.rank; ++i) {
    const dim& d = t.shp.d[i];
    v.dims.push_back({d.n, d.symbol ? symbols.at(d.symbol - 1u) : std::string()});
  }
  return v;
}

inline json attributes_of(const step& s) {
  json a = json::object();
  for (const attr_field& f : s.op->attributes) {
    const int k = static_cast<int>(f.slot);
    if (f.slot == attr_slot::ints) {
      json list = json::array();
      for (int j = 0; j < max_rank && s.at.i[j] != no_value; ++j) list.push_back(s.at.i[j]);
      a[f.name] = std::move(list);
    } else if (is_integer(f.slot)) a[f.name] = s.at.i[k];
    else a[f.name] = f.slot == attr_slot::f ? s.at.f : s.at.extra[k - static_cast<int>(attr_slot::extra0)];
  }
  return a;
}
}  // namespace detail

// `symbols` names symbol ids 1, 2, ... of the program's shapes (with a line of documentation each).
inline document from_program(const program& p, const std::vector<symbol_decl>& symbols, json metadata = json::object()) {
  document doc;
  doc.metadata = json::object();
  doc.metadata["version"] = std::to_string(format_major) + "." + std::to_string(format_minor);
  for (const auto& [k, v] : metadata.items()) doc.metadata[k] = v;
  doc.symbols = symbols;
  std::vector<std::string> names;
  for (const auto& s : symbols) names.push_back(s.name);

  std::vector<const step*> writer(p.tensors.size(), nullptr);
  for (const step& s : p.steps) writer[static_cast<std::size_t>(s.result)] = &s;
  std::vector<std::int64_t> node_of(p.tensors.size(), -1);
  std::int64_t next = 0;
  // Control flow: a node per Conditional (its then region) and per Loop, after the tensors' nodes;
  // a merge step becomes a Merge of its Conditional, a carry's copy a Merge of its Loop.
  std::vector<std::int64_t> control_node(p.regions.size(), -1);
  {
    std::int64_t count = 0;
    for (const tensor_info& t : p.tensors) count += t.is_feed || writer[static_cast<std::size_t>(t.id)];
    for (std::size_t r = 0; r < p.regions.size(); ++r)
      if (p.regions[r].kind != region_kind::else_branch) control_node[r] = count++;
  }
  std::vector<std::pair<int, std::int64_t>> members;  // (region, node id) for the body lists
  for (const tensor_info& t : p.tensors) {
    const std::size_t id = static_cast<std::size_t>(t.id);
    node nd{};
    nd.name = to_string(t.name.str());
    nd.value = detail::value_of(t, names);
    if (t.is_feed) {
      nd.type = t.kind == role::weight ? node_type::get_attr : node_type::input;
      nd.state = t.kind == role::state;
    } else if (const step* s = writer[id]) {
      const int loop = p.carried_by(t.id);
      if (s->op->selects) {
        nd.type = node_type::merge;
        nd.of = control_node[static_cast<std::size_t>(s->at.i[0])];
      } else if (loop >= 0) {
        nd.type = node_type::merge;
        nd.of = control_node[static_cast<std::size_t>(loop)];
      } else {
        nd.type = node_type::call;
        nd.op = s->op->name;
        nd.attributes = detail::attributes_of(*s);
      }
      members.emplace_back(loop >= 0 ? loop : s->region, next);
    } else {
      continue;  // a step's workspace: the builder makes it again
    }
    nd.id = next++;
    node_of[id] = nd.id;
    if (nd.type == node_type::input) doc.inputs.push_back(nd.id);
    if (nd.type == node_type::call || nd.type == node_type::merge) {
      const step& s = *writer[id];
      const int skip = s.op->selects ? 1 : 0;  // a merge's condition is its Conditional's
      for (int k = skip; k < s.n_inputs; ++k) {
        const tensor_id in = s.inputs[static_cast<std::size_t>(k)];
        doc.edges.push_back({node_of[static_cast<std::size_t>(in)], nd.id, to_string(p.tensor(in).name.str()), k - skip});
      }
    }
    doc.nodes.push_back(std::move(nd));
  }
  for (std::size_t r = 0; r < p.regions.size(); ++r) {
    const region_info& g = p.regions[r];
    if (g.kind == region_kind::else_branch) continue;
    node nd{};
    nd.id = control_node[r];
    nd.type = g.kind == region_kind::loop_body ? node_type::loop : node_type::conditional;
    nd.name = (g.kind == region_kind::loop_body ? "loop." : "conditional.") + std::to_string(r);
    if (g.kind == region_kind::loop_body) nd.max_trips = g.max_trips;
    if (g.condition >= 0) doc.edges.push_back({node_of[static_cast<std::size_t>(g.condition)], nd.id, to_string(p.tensor(g.condition).name.str()), 0});
    members.emplace_back(g.parent, nd.id);
    doc.nodes.push_back(std::move(nd));
  }
  for (const loop_carry& c : p.carries)
    doc.edges.push_back({node_of[static_cast<std::size_t>(c.next)], node_of[static_cast<std::size_t>(c.value)], to_string(p.tensor(c.next).name.str()), 1});
  for (const auto& [region, id] : members) {
    if (region < 0) continue;
    const region_info& g = p.regions[static_cast<std::size_t>(region)];
    const std::int64_t owner = control_node[static_cast<std::size_t>(g.kind == region_kind::else_branch ? region - 1 : region)];
    for (node& nd : doc.nodes)
      if (nd.id == owner) (g.kind == region_kind::then_branch ? nd.then_body : g.kind == region_kind::else_branch ? nd.else_body : nd.body).push_back(id);
  }
  next += static_cast<std::int64_t>(std::count_if(control_node.begin(), control_node.end(), [](std::int64_t n) { return n >= 0; }));
  auto output = [&](const std::string& name, tensor_id value, std::optional<std::int64_t> carries) {
    node nd{};
    nd.id = next++;
    nd.type = node_type::output;
    nd.name = name;
    nd.carries = carries;
    doc.edges.push_back({node_of[static_cast<std::size_t>(value)], nd.id, to_string(p.tensor(value).name.str()), 0});
    doc.outputs.push_back(nd.id);
    doc.nodes.push_back(std::move(nd));
  };
  for (const named_output& o : p.outputs) output(o.name, o.id, std::nullopt);
  for (const state_pair& s : p.state) output(to_string(p.tensor(s.in).name.str()), s.out, node_of[static_cast<std::size_t>(s.in)]);
  return doc;
}

}  // namespace fused::ir
