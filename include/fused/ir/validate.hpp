// The validator of graph files: named rules, every violation reported (not the first), each naming
// the rule, the node (and edge) and what was expected. The same analysis gives the lowering
// (lower.hpp) its order, operands, ops, attributes and types, so what validates is what lowers.
//
// Rules: unique-ids, edge-endpoints, one-producer, input-predecessors, output-edges, inputs-list,
// outputs-list, duplicate-name, reserved-name, cycle, unreachable, unused, unknown-op, call-arity, attributes,
// symbols, unknown-symbol, dim-range, rank, constraint, shape (the op's shape rule), type (a declared
// type that differs from the inferred one), state-carry; control flow: region, control-edges,
// condition, merge, scope, loop-body (docs/GRAPH_FORMAT.md, "Control flow"). Types meet along edges exactly: an op's shape rule states which operand
// shapes it takes, and no implicit broadcasting is done (an op that broadcasts says so in its rule).
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

#include "../core/json_text.hpp"
#include "../core/shape_text.hpp"
#include "../core/text_string.hpp"
#include "../graph/control.hpp"
#include "../graph/program.hpp"
#include "../ops/registry.hpp"
#include "document.hpp"

namespace fused::ir {

// What the validator learns of a document, for the lowering.
struct analysis {
  std::vector<issue> errors;
  std::vector<std::size_t> order;                    // node positions in a topological order, stable by file position
  std::vector<std::vector<std::size_t>> operands;    // per node position: the producer's position of each slot
  std::vector<const op_def*> ops;                    // per node position (Calls)
  std::vector<attrs> call_attrs;                     // per node position (Calls)
  std::vector<std::optional<tensor_info>> types;     // per node position: the value's type, once known
  std::vector<std::string> symbols;                  // symbol id - 1 -> name
  std::map<std::int64_t, std::size_t> position;      // node id -> position
  // Control flow: a Conditional makes two regions (then, else: consecutive), a Loop one, in file order.
  struct control_region {
    std::size_t control = 0;  // the Conditional's or Loop's position
    bool else_branch = false;
    int parent = -1;          // the enclosing region, -1: the top level
  };
  std::vector<control_region> regions;
  std::vector<int> region_of;         // per node position: the region whose body lists it, -1: the top level
  std::vector<int> first_region;      // per node position: a Conditional's then region, a Loop's region, else -1

  bool ok() const { return errors.empty(); }
  // Whether region `inner` is `outer` or nested in it (-1: the top level holds everything).
  bool within(int inner, int outer) const {
    for (int r = inner; r >= 0; r = regions[static_cast<std::size_t>(r)].parent)
      if (r == outer) return true;
    return outer < 0;
  }
};

namespace detail {

inline std::optional<shape> shape_of(const value_type& v, const std::vector<std::string>& symbols, const std::string& where,
                                     std::vector<issue>& errors) {
  if (v.dims.size() > static_cast<std::size_t>(max_rank)) {
    errors.push_back({where, "rank", "rank " + std::to_string(v.dims.size()) + " exceeds the " + std::to_string(max_rank) + " this library plans"});
    return std::nullopt;
  }
  shape s{};
  s.rank = static_cast<int>(v.dims.size());
  bool ok = true;
  for (std::size_t i = 0; i < v.dims.size(); ++i) {
    const dim_expr& d = v.dims[i];
    if (d.n > max_dim) {
      errors.push_back({where, "dim-range", "dim " + std::to_string(i) + " (" + std::to_string(d.n) + ") exceeds " + std::to_string(max_dim)});
      ok = false;
      continue;
    }
    std::uint8_t id = 0;
    if (!d.symbol.empty()) {
      const auto it = std::find(symbols.begin(), symbols.end(), d.symbol);
      if (it == symbols.end()) {
        errors.push_back({where, "unknown-symbol", "dim " + std::to_string(i) + " names symbol \"" + d.symbol + "\", which \"symbols\" does not declare"});
        ok = false;
        continue;
      }
      id = static_cast<std::uint8_t>(it - symbols.begin() + 1);
    }
    s.d[i] = dim{d.n, id};
  }
  return ok ? std::optional<shape>(s) : std::nullopt;
}

inline std::string type_text(const tensor_info& t) { return std::string(name_of(t.type)) + " " + to_string(shape_text(t.shp)); }

// A shape with its symbols named, for messages ("[tokens, 896]").
inline std::string named_shape(const shape& s, const std::vector<std::string>& symbols) {
  std::string out = "[";
  for (int i = 0; i < s.rank; ++i) {
    const dim& d = s.d[i];
    out += i ? ", " : "";
    if (d.symbol == 0) out += std::to_string(d.n);
    else out += (d.n == 1 ? "" : std::to_string(d.n) + "*") + symbols[d.symbol - 1u];
  }
  return out + "]";
}

// The attributes of a Call by the op's names; every defect recorded.
inline attrs read_attributes(const op_def& op, const json& given, const std::string& where, std::vector<issue>& errors) {
  attrs a{};
  for (auto it = given.begin(); it != given.end(); ++it) {
    const std::string& key = it.key();  // (not a structured binding: clang cannot capture one under OpenMP)
    const bool known = std::any_of(op.attributes.begin(), op.attributes.end(), [&](const attr_field& f) { return key == f.name; });
    if (!known) {
      std::string list;
      for (const auto& f : op.attributes) list += (list.empty() ? "" : ", ") + std::string(f.name);
      errors.push_back({where, "attributes", "'" + std::string(op.name) + "' has no attribute \"" + key + "\" (it takes: " + (list.empty() ? "none" : list) + ")"});
    }
  }
  for (const attr_field& f : op.attributes) {
    const auto it = given.find(f.name);
    if (it == given.end()) {
      errors.push_back({where, "attributes", "'" + std::string(op.name) + "' needs the attribute \"" + f.name + "\""});
      continue;
    }
    const int k = static_cast<int>(f.slot);
    if (f.slot == attr_slot::ints) {
      const bool list = it->is_array() && it->size() <= static_cast<std::size_t>(max_rank) &&
                        std::all_of(it->begin(), it->end(), [](const json& v) {
                          if (v.is_number_unsigned()) return v.get<std::uint64_t>() <= static_cast<std::uint64_t>(max_integer_attribute);
                          return v.is_number_integer() && v.get<std::int64_t>() >= -max_integer_attribute && v.get<std::int64_t>() <= max_integer_attribute;
                        });
      if (!list) {
        errors.push_back({where, "attributes", std::string("\"") + f.name + "\" must be a list of at most " + std::to_string(max_rank) + " integers, got " + json_text::excerpt(*it)});
        continue;
      }
      for (int j = 0; j < max_rank; ++j) a.i[j] = j < static_cast<int>(it->size()) ? (*it)[static_cast<std::size_t>(j)].get<std::int64_t>() : no_value;
    } else if (is_integer(f.slot)) {
      const bool fits = it->is_number_integer() && (it->is_number_unsigned() ? it->get<std::uint64_t>() <= static_cast<std::uint64_t>(max_integer_attribute)
                                                                             : it->get<std::int64_t>() >= -max_integer_attribute &&
                                                                                   it->get<std::int64_t>() <= max_integer_attribute);
      if (!fits) {
        errors.push_back({where, "attributes", std::string("\"") + f.name + "\" must be an integer of magnitude at most 2^31, got " + json_text::excerpt(*it)});
        continue;
      }
      a.i[k] = it->get<std::int64_t>();
    } else {
      if (!it->is_number() || !std::isfinite(it->get<double>())) {
        errors.push_back({where, "attributes", std::string("\"") + f.name + "\" must be a finite number, got " + json_text::excerpt(*it)});
        continue;
      }
      const double v = it->get<double>();
      if (f.slot == attr_slot::f) a.f = v;
      else a.extra[k - static_cast<int>(attr_slot::extra0)] = v;
    }
  }
  return a;
}

using slot_map = std::vector<std::map<int, std::size_t>>;  // per node position: slot -> source position

// The Conditional or Loop a Merge names, or SIZE_MAX.
inline std::size_t merged_control(const document& doc, const analysis& an, std::size_t merge) {
  const node& m = doc.nodes[merge];
  if (!m.of) return SIZE_MAX;
  const auto c = an.position.find(*m.of);
  if (c == an.position.end()) return SIZE_MAX;
  const node_type t = doc.nodes[c->second].type;
  return t == node_type::conditional || t == node_type::loop ? c->second : SIZE_MAX;
}

// Control flow's form: regions from the body lists, what may be in them, Conditionals', Loops' and
// Merges' inputs, and which values each node may read (its scope). Fills an.regions, region_of
// and first_region; records every violation.
inline void check_control(const document& doc, analysis& an, const slot_map& slots) {
  const std::size_t n = doc.nodes.size();
  auto fail = [&](std::int64_t id, std::string rule, std::string message) { an.errors.push_back({node_where(id), std::move(rule), std::move(message)}); };
  an.region_of.assign(n, -1);
  an.first_region.assign(n, -1);
  std::vector<std::int64_t> listed_by(n, -1);  // the control node whose body lists each node
  for (std::size_t i = 0; i < n; ++i) {
    const node& c = doc.nodes[i];
    if (c.type != node_type::conditional && c.type != node_type::loop) continue;
    an.first_region[i] = static_cast<int>(an.regions.size());
    const bool conditional = c.type == node_type::conditional;
    an.regions.push_back({.control = i, .else_branch = false});
    if (conditional) an.regions.push_back({.control = i, .else_branch = true});
    const std::vector<std::int64_t>* bodies[2] = {conditional ? &c.then_body : &c.body, conditional ? &c.else_body : nullptr};
    for (int branch = 0; branch < 2; ++branch) {
      if (!bodies[branch]) continue;
      for (const std::int64_t id : *bodies[branch]) {
        const auto it = an.position.find(id);
        const char* field = conditional ? (branch ? "else" : "then") : "body";
        if (it == an.position.end()) {
          fail(c.id, "region", std::string("\"") + field + "\" lists node " + std::to_string(id) + ", which does not exist");
          continue;
        }
        const node& member = doc.nodes[it->second];
        if (member.type == node_type::input || member.type == node_type::output || member.type == node_type::get_attr) {
          fail(c.id, "region", std::string("\"") + field + "\" lists " + name_of(member.type) + " node " + std::to_string(id) + "; Inputs, Outputs and GetAttrs belong to the top level");
          continue;
        }
        if (listed_by[it->second] >= 0) {
          fail(id, "region", "is listed in the bodies of nodes " + std::to_string(listed_by[it->second]) + " and " + std::to_string(c.id) + "; a node is in one body at most");
          continue;
        }
        listed_by[it->second] = c.id;
        an.region_of[it->second] = an.first_region[i] + branch;
      }
    }
  }
  // Parents, no region inside itself, and no deeper than max_control_depth.
  for (auto& r : an.regions) r.parent = an.region_of[r.control];
  for (std::size_t r = 0; r < an.regions.size(); ++r) {
    std::size_t steps = 0;
    for (int a = an.regions[r].parent; a >= 0 && steps <= an.regions.size(); a = an.regions[static_cast<std::size_t>(a)].parent) ++steps;
    const node& control = doc.nodes[an.regions[r].control];
    const bool cycle = steps > an.regions.size(), deep = steps >= static_cast<std::size_t>(max_control_depth);
    if (cycle || deep) {
      if (cycle) fail(control.id, "region", std::string(name_of(control.type)) + " is inside its own body (directly or through others)");
      else
        fail(control.id, "region", std::string(name_of(control.type)) + " sits inside " + std::to_string(steps) +
                                       " Conditionals and Loops; at most " + std::to_string(max_control_depth) + " may nest");
      for (auto& q : an.regions) q.parent = -1;  // so nothing below walks the regions
      std::fill(an.region_of.begin(), an.region_of.end(), -1);
      return;
    }
  }
  // Which values a node may read: its own region's and its enclosing regions', and a Loop's Merges
  // (its carries) wherever the Loop itself may be read from.
  auto visible = [&](std::size_t source, int reader) {
    if (doc.nodes[source].type == node_type::merge) {
      const std::size_t c = merged_control(doc, an, source);
      if (c != SIZE_MAX && doc.nodes[c].type == node_type::loop) return an.within(reader, an.region_of[c]);
    }
    return an.within(reader, an.region_of[source]);
  };
  auto scope = [&](std::size_t target, int slot, std::size_t source, int reader, const std::string& as) {
    if (visible(source, reader)) return;
    fail(doc.nodes[target].id, "scope",
         "slot " + std::to_string(slot) + " reads node " + std::to_string(doc.nodes[source].id) + ", which is inside a branch or loop body that " + as +
             " is not in (values leave a branch through a Merge, a loop through its Merges)");
  };
  for (std::size_t i = 0; i < n; ++i) {
    const node& nd = doc.nodes[i];
    const std::int64_t id = nd.id;
    if (nd.type == node_type::conditional) {
      if (slots[i].size() != 1 || !slots[i].count(0)) fail(id, "condition", "a Conditional takes its condition (one bool) in slot 0, and nothing else");
      for (const auto& [slot, src] : slots[i]) scope(i, slot, src, an.region_of[i], "the Conditional");
    } else if (nd.type == node_type::loop) {
      if (slots[i].size() > 1 || (slots[i].size() == 1 && !slots[i].count(0)))
        fail(id, "condition", "a Loop takes its condition (one bool, computed in its body or before it) in slot 0, or none (it runs max_trips trips)");
      for (const auto& [slot, src] : slots[i]) scope(i, slot, src, an.first_region[i], "the Loop's body");
      bool has_call = false;
      for (std::size_t j = 0; j < n; ++j) has_call = has_call || (doc.nodes[j].type == node_type::call && an.region_of[j] >= 0 && an.within(an.region_of[j], an.first_region[i]));
      if (!has_call) fail(id, "loop-body", "the body has no Call: a Loop needs at least one step to repeat");
    } else if (nd.type == node_type::merge) {
      const std::size_t c = merged_control(doc, an, i);
      if (c == SIZE_MAX) {
        const bool exists = nd.of && an.position.count(*nd.of);
        fail(id, "merge", "\"of\" names node " + std::to_string(nd.of.value_or(-1)) +
                              (exists ? ", which is not a Conditional or a Loop" : ", which the graph does not have"));
        continue;
      }
      if (slots[i].size() != 2 || !slots[i].count(0) || !slots[i].count(1)) {
        fail(id, "merge", doc.nodes[c].type == node_type::conditional ? "a Conditional's Merge takes the then branch's value in slot 0 and the else branch's in slot 1"
                                                                      : "a Loop's Merge takes the initial value in slot 0 and the next trip's in slot 1");
        continue;
      }
      const int first = an.first_region[c];
      if (doc.nodes[c].type == node_type::conditional) {
        if (an.region_of[i] != an.region_of[c]) fail(id, "merge", "a Conditional's Merge sits where the Conditional does (not in its branches)");
        scope(i, 0, slots[i].at(0), first, "the then branch");
        scope(i, 1, slots[i].at(1), first + 1, "the else branch");
      } else {
        if (an.region_of[i] != first) fail(id, "merge", "a Loop's Merge (a value it carries) must be listed in the Loop's \"body\"");
        scope(i, 0, slots[i].at(0), an.region_of[c], "the Loop");
        scope(i, 1, slots[i].at(1), first, "the Loop's body");
      }
    } else {
      for (const auto& [slot, src] : slots[i]) scope(i, slot, src, an.region_of[i], "the node");
    }
  }
}

// Conditions are one bool; a Merge's two inputs have one type.
inline void check_control_types(const document& doc, analysis& an, const slot_map& slots) {
  for (std::size_t i = 0; i < doc.nodes.size(); ++i) {
    const node& nd = doc.nodes[i];
    const std::string where = node_where(nd.id);
    if ((nd.type == node_type::conditional || nd.type == node_type::loop) && slots[i].count(0)) {
      const auto& t = an.types[slots[i].at(0)];
      if (t && !control::is_condition(*t)) an.errors.push_back({where, "condition", "the condition must be one bool ([] or [1]), got " + type_text(*t)});
    }
    if (nd.type == node_type::merge && slots[i].count(0) && slots[i].count(1)) {
      const auto &a = an.types[slots[i].at(0)], &b = an.types[slots[i].at(1)];
      if (a && b && (a->type != b->type || !(a->shp == b->shp)))
        an.errors.push_back({where, "merge", "slot 0 is " + std::string(name_of(a->type)) + " " + named_shape(a->shp, an.symbols) + " but slot 1 is " +
                                                 name_of(b->type) + " " + named_shape(b->shp, an.symbols) + "; a Merge joins values of one type"});
    }
  }
}

}  // namespace detail

inline analysis analyze(const document& doc, const ops::registry& reg = ops::registry::global()) {
  analysis an;
  auto& errors = an.errors;
  auto fail = [&](std::string where, std::string rule, std::string message) { errors.push_back({std::move(where), std::move(rule), std::move(message)}); };
  const std::size_t n = doc.nodes.size();
  an.operands.assign(n, {});
  an.ops.assign(n, nullptr);
  an.call_attrs.assign(n, attrs{});
  an.types.assign(n, std::nullopt);

  // Symbols and their constraints.
  for (const auto& s : doc.symbols) {
    if (std::find(an.symbols.begin(), an.symbols.end(), s.name) != an.symbols.end()) fail("graph", "symbols", "symbol \"" + s.name + "\" is declared twice");
    an.symbols.push_back(s.name);
  }
  if (an.symbols.size() > static_cast<std::size_t>(max_symbols - 1))
    fail("graph", "symbols", std::to_string(an.symbols.size()) + " symbols are declared; a program has at most " + std::to_string(max_symbols - 1));
  {
    std::map<std::string, std::pair<std::int64_t, std::int64_t>> range;
    for (const auto& s : an.symbols) range[s] = {1, max_dim};
    for (std::size_t i = 0; i < doc.constraints.size(); ++i) {
      const constraint& c = doc.constraints[i];
      const std::string where = "constraints[" + std::to_string(i) + "]";
      bool known = true;
      for (const auto& s : c.symbols)
        if (!range.count(s)) fail(where, "constraint", "names symbol \"" + s + "\", which \"symbols\" does not declare"), known = false;
      if (!known) continue;
      if (c.kind == constraint_kind::range) {
        if (c.min < 1 || c.max < c.min) fail(where, "constraint", "Range of \"" + c.symbols[0] + "\" must satisfy 1 <= min <= max, got [" + std::to_string(c.min) + ", " + std::to_string(c.max) + "]");
        else if (c.max > max_dim) fail(where, "constraint", "Range of \"" + c.symbols[0] + "\" has max " + std::to_string(c.max) + "; a dim is at most 2^31 = " + std::to_string(max_dim));
        auto& r = range[c.symbols[0]];
        r = {std::max(r.first, c.min), std::min(r.second, c.max)};
      } else if (c.kind == constraint_kind::divisible && c.by < 1) {
        fail(where, "constraint", "Divisible \"by\" must be positive, got " + std::to_string(c.by));
      }
    }
    for (const auto& c : doc.constraints)
      if (c.kind == constraint_kind::equal && range.count(c.symbols[0]) && range.count(c.symbols[1])) {
        auto &a = range[c.symbols[0]], &b = range[c.symbols[1]];
        a = b = {std::max(a.first, b.first), std::min(a.second, b.second)};
      }
    for (const auto& [s, r] : range) {
      bool possible = r.first <= r.second;
      for (const auto& c : doc.constraints)
        if (possible && c.kind == constraint_kind::divisible && c.by >= 1 && c.symbols[0] == s) {
          // The least multiple of `by` at or above the minimum, without overflow: at most the maximum?
          const std::int64_t rest = r.first % c.by, least_gap = rest == 0 ? 0 : c.by - rest;
          possible = r.first <= r.second - least_gap;
        }
      if (!possible) fail("graph", "constraint", "no value of symbol \"" + s + "\" satisfies all its constraints");
    }
  }

  // Ids, edges, inputs and outputs.
  for (std::size_t i = 0; i < n; ++i)
    if (!an.position.emplace(doc.nodes[i].id, i).second) fail(node_where(doc.nodes[i].id), "unique-ids", "another node has the id " + std::to_string(doc.nodes[i].id));
  std::vector<std::vector<std::size_t>> readers(n);
  detail::slot_map slots(n);  // per target: slot -> source position
  for (std::size_t k = 0; k < doc.edges.size(); ++k) {
    const edge& e = doc.edges[k];
    const auto s = an.position.find(e.source), t = an.position.find(e.target);
    if (s == an.position.end() || t == an.position.end()) {
      fail(edge_where(k, e), "edge-endpoints", std::string("node ") + std::to_string(s == an.position.end() ? e.source : e.target) + " does not exist");
      continue;
    }
    const node& target = doc.nodes[t->second];
    const node& source = doc.nodes[s->second];
    if (target.type == node_type::input || target.type == node_type::get_attr) {
      fail(node_where(target.id), "input-predecessors", std::string("an ") + name_of(target.type) + " node takes no inputs, but " + edge_where(k, e) + " ends at it");
      continue;
    }
    if (source.type == node_type::output) {
      fail(node_where(source.id), "output-edges", "an Output node has no successors, but " + edge_where(k, e) + " starts at it");
      continue;
    }
    if (source.type == node_type::conditional || source.type == node_type::loop) {
      fail(node_where(source.id), "control-edges", std::string("a ") + name_of(source.type) + " node has no value (its Merge nodes do), but " + edge_where(k, e) + " starts at it");
      continue;
    }
    if (!slots[t->second].emplace(e.slot, s->second).second) {
      fail(node_where(target.id), "one-producer", "slot " + std::to_string(e.slot) + " has two producers (" + edge_where(k, e) + " is the second)");
      continue;
    }
    readers[s->second].push_back(t->second);
  }
  std::set<std::int64_t> listed_in(doc.inputs.begin(), doc.inputs.end()), listed_out(doc.outputs.begin(), doc.outputs.end());
  for (auto id : doc.inputs)
    if (!an.position.count(id) || doc.nodes[an.position[id]].type != node_type::input) fail("graph", "inputs-list", "\"inputs\" lists " + std::to_string(id) + ", which is not an Input node");
  for (auto id : doc.outputs)
    if (!an.position.count(id) || doc.nodes[an.position[id]].type != node_type::output) fail("graph", "outputs-list", "\"outputs\" lists " + std::to_string(id) + ", which is not an Output node");
  if (listed_in.size() != doc.inputs.size()) fail("graph", "inputs-list", "\"inputs\" lists a node twice");
  if (listed_out.size() != doc.outputs.size()) fail("graph", "outputs-list", "\"outputs\" lists a node twice");
  if (doc.outputs.empty()) fail("graph", "outputs-list", "the graph has no outputs");
  std::set<std::string> input_names, output_names, targets;
  for (std::size_t i = 0; i < n; ++i) {
    const node& nd = doc.nodes[i];
    const std::string where = node_where(nd.id);
    // Inputs, parameters and outputs travel in safetensors files by name, where this one is the header's own.
    if ((nd.type == node_type::input || nd.type == node_type::get_attr || (nd.type == node_type::output && !nd.carries)) && nd.name == "__metadata__")
      fail(where, "reserved-name", std::string(name_of(nd.type)) + " named '__metadata__': safetensors files, which hold inputs, parameters and outputs by name, reserve it");
    // A NUL would cut the name short in every C string it travels as (safetensors names, messages, the generated C).
    if (nd.name.find('\0') != std::string::npos)
      fail(where, "reserved-name", std::string(name_of(nd.type)) + " name holds a NUL character (U+0000)");
    if (nd.type == node_type::input) {
      if (!listed_in.count(nd.id)) fail(where, "inputs-list", "Input node '" + nd.name + "' is not listed in \"inputs\"");
      if (!input_names.insert(nd.name).second) fail(where, "duplicate-name", "another Input is named '" + nd.name + "'");
    } else if (nd.type == node_type::get_attr) {
      if (!targets.insert(nd.name).second) fail(where, "duplicate-name", "another GetAttr names parameter '" + nd.name + "' (read it once and use it twice)");
    } else if (nd.type == node_type::output) {
      if (!listed_out.count(nd.id)) fail(where, "outputs-list", "Output node '" + nd.name + "' is not listed in \"outputs\"");
      if (!nd.carries && !output_names.insert(nd.name).second) fail(where, "duplicate-name", "another Output is named '" + nd.name + "'");
      if (slots[i].size() != 1 || !slots[i].count(0)) fail(where, "output-edges", "an Output node takes exactly one input, in slot 0; it has " + std::to_string(slots[i].size()));
    }
  }
  detail::check_control(doc, an, slots);

  // Calls: op, arity, attributes.
  std::vector<char> attributes_refused(n, 0);  // (their shape rule would only report the same defect again)
  for (std::size_t i = 0; i < n; ++i) {
    const node& nd = doc.nodes[i];
    if (nd.type != node_type::call) continue;
    const std::string where = node_where(nd.id);
    const op_def* op = reg.find(nd.op);
    if (!op) {
      std::string near;
      for (const auto& c : reg.closest(nd.op)) near += (near.empty() ? "" : ", ") + c;
      fail(where, "unknown-op", "no op is registered as '" + nd.op.substr(0, 64) + "' (" + (near.empty() ? "none is close" : "closest: " + near) + ")");
      continue;
    }
    an.ops[i] = op;
    const int count = static_cast<int>(slots[i].size());
    bool dense = true;
    for (int k = 0; k < count; ++k) dense = dense && slots[i].count(k);
    if (count < op->min_inputs || count > op->max_inputs || !dense)
      fail(where, "call-arity", "'" + std::string(op->name) + "' takes " + std::to_string(op->min_inputs) +
                                    (op->max_inputs != op->min_inputs ? ".." + std::to_string(op->max_inputs) : std::string()) +
                                    " inputs in slots 0.., got " + std::to_string(count) + (dense ? "" : " with a gap"));
    const std::size_t errors_before = errors.size();
    an.call_attrs[i] = detail::read_attributes(*op, nd.attributes, where, errors);
    attributes_refused[i] = errors.size() != errors_before;
  }
  for (std::size_t i = 0; i < n; ++i) {
    auto& ops = an.operands[i];
    for (const auto& [slot, src] : slots[i]) {
      if (ops.size() <= static_cast<std::size_t>(slot)) ops.resize(static_cast<std::size_t>(slot) + 1, SIZE_MAX);
      ops[static_cast<std::size_t>(slot)] = src;
    }
  }

  // A topological order, stable by file position; nodes left over are on (or behind) a cycle.
  // A Loop's condition and its Merges' next values (slot 1) come from its body: those edges are
  // not waited for (the loop's back edges). A body's nodes wait for their Conditional or Loop.
  {
    auto back_edge = [&](std::size_t target, int slot) {
      const node& t = doc.nodes[target];
      if (t.type == node_type::loop) return true;
      if (t.type != node_type::merge || slot != 1 || !t.of) return false;
      const auto c = an.position.find(*t.of);
      return c != an.position.end() && doc.nodes[c->second].type == node_type::loop;
    };
    // As the program runs them, a Conditional or Loop is done when all its bodies are: an "end"
    // (a position past the nodes, one per control node) waits for them, and a Conditional's Merges
    // and whatever reads a Loop's Merges from outside the Loop wait for its end.
    std::vector<std::size_t> end_of(n, SIZE_MAX);
    std::size_t total = n;
    for (std::size_t i = 0; i < n; ++i)
      if (an.first_region[i] >= 0) end_of[i] = total++;
    std::vector<std::size_t> pending(total, 0);
    std::vector<std::vector<std::size_t>> waiting(total);  // per node: the nodes that wait for it
    auto wait = [&](std::size_t first, std::size_t then) { waiting[first].push_back(then), ++pending[then]; };
    for (std::size_t i = 0; i < n; ++i)
      for (const auto& [slot, src] : slots[i]) {
        if (back_edge(i, slot)) continue;
        wait(src, i);
        const std::size_t c = doc.nodes[src].type == node_type::merge ? detail::merged_control(doc, an, src) : SIZE_MAX;
        if (c != SIZE_MAX && doc.nodes[c].type == node_type::loop && !(an.region_of[i] >= 0 && an.within(an.region_of[i], an.first_region[c])))
          wait(end_of[c], i);
      }
    for (std::size_t i = 0; i < n; ++i) {
      if (an.region_of[i] >= 0) {
        const std::size_t c = an.regions[static_cast<std::size_t>(an.region_of[i])].control;
        wait(c, i);
        wait(i, end_of[c]);
        if (end_of[i] != SIZE_MAX) wait(end_of[i], end_of[c]);
      }
      if (doc.nodes[i].type == node_type::merge)
        // (a Merge listed in a branch is refused above; waiting for the end there would add a false cycle)
        if (const std::size_t c = detail::merged_control(doc, an, i);
            c != SIZE_MAX && doc.nodes[c].type == node_type::conditional && an.region_of[i] == an.region_of[c])
          wait(end_of[c], i);
    }
    std::set<std::size_t> ready;
    for (std::size_t i = 0; i < total; ++i)
      if (pending[i] == 0) ready.insert(i);
    while (!ready.empty()) {
      const std::size_t i = *ready.begin();
      ready.erase(ready.begin());
      if (i < n) an.order.push_back(i);
      for (std::size_t r : waiting[i])
        if (--pending[r] == 0) ready.insert(r);
    }
    if (an.order.size() < n) {
      std::string on;
      std::size_t first = SIZE_MAX, shown = 0;
      for (std::size_t i = 0; i < n; ++i)
        if (pending[i] > 0) {
          if (first == SIZE_MAX) first = i;
          if (shown++ < 8) on += (on.empty() ? "" : ", ") + std::to_string(doc.nodes[i].id);
        }
      fail(node_where(doc.nodes[first].id), "cycle", "nodes " + on + (shown > 8 ? ", ..." : "") + " depend on each other (a cycle outside a Loop body)");
    }
  }

  // Reachability: every node is reached from a source (an Input, a GetAttr or a Call of no inputs)
  // through its operands, and reaches an Output.
  {
    std::vector<bool> reaches_output(n, false);
    std::vector<std::size_t> work;
    for (std::size_t i = 0; i < n; ++i)
      if (doc.nodes[i].type == node_type::output) reaches_output[i] = true, work.push_back(i);
    while (!work.empty()) {
      const std::size_t i = work.back();
      work.pop_back();
      for (const auto& [slot, src] : slots[i])
        if (!reaches_output[src]) reaches_output[src] = true, work.push_back(src);
      if (const node& nd = doc.nodes[i]; nd.type == node_type::merge && nd.of)
        if (const auto c = an.position.find(*nd.of); c != an.position.end() && !reaches_output[c->second]) reaches_output[c->second] = true, work.push_back(c->second);
    }
    for (std::size_t i = 0; i < n; ++i)
      if (!reaches_output[i])
        fail(node_where(doc.nodes[i].id), "unused",
             doc.nodes[i].type == node_type::conditional || doc.nodes[i].type == node_type::loop
                 ? std::string(name_of(doc.nodes[i].type)) + " '" + doc.nodes[i].name + "' has no Merge that reaches an output"
                 : "the value of " + std::string(name_of(doc.nodes[i].type)) + " '" + doc.nodes[i].name + "' reaches no output");
  }

  // Types, in order.
  for (const std::size_t i : an.order) {
    const node& nd = doc.nodes[i];
    const std::string where = node_where(nd.id);
    std::optional<shape> declared;
    if (nd.value) declared = detail::shape_of(*nd.value, an.symbols, where, errors);
    if (nd.type == node_type::input || nd.type == node_type::get_attr) {
      if (!declared) continue;
      if (nd.type == node_type::get_attr && nd.value->type != dtype::bf16) {
        fail(where, "type", "parameter '" + nd.name + "' is " + name_of(nd.value->type) + "; parameters are bf16 (the weight loader binds them so)");
        continue;
      }
      tensor_info t{};
      t.type = nd.value->type;
      t.shp = *declared;
      an.types[i] = t;
    } else if (nd.type == node_type::output || nd.type == node_type::merge) {
      const auto it = slots[i].find(0);
      if (it != slots[i].end()) an.types[i] = an.types[it->second];
      if (nd.type == node_type::merge && an.types[i] && nd.value && declared && (nd.value->type != an.types[i]->type || !(*declared == an.types[i]->shp)))
        fail(where, "type", "declared " + std::string(name_of(nd.value->type)) + " " + detail::named_shape(*declared, an.symbols) + ", but the Merge's slot 0 is " +
                                name_of(an.types[i]->type) + " " + detail::named_shape(an.types[i]->shp, an.symbols));
    } else if (nd.type == node_type::call && an.ops[i]) {
      const op_def& op = *an.ops[i];
      const auto& src = an.operands[i];
      if (static_cast<int>(src.size()) < op.min_inputs || static_cast<int>(src.size()) > op.max_inputs) continue;
      const tensor_info* in[max_inputs]{};
      bool known = true;
      for (std::size_t k = 0; k < src.size(); ++k) {
        known = known && src[k] != SIZE_MAX && an.types[src[k]];
        if (known) in[k] = &*an.types[src[k]];
      }
      if (!known || attributes_refused[i]) continue;
      const inferred r = op.infer(in, static_cast<int>(src.size()), an.call_attrs[i]);
      if (!r.error.empty()) {
        std::string who = r.culprit >= 0 ? " (input " + std::to_string(r.culprit) + " from node " + std::to_string(doc.nodes[src[static_cast<std::size_t>(r.culprit)]].id) + ")" : "";
        fail(where, "shape", "'" + std::string(op.name) + "'" + who + ": " + to_string(r.error));
        continue;
      }
      tensor_info t{};
      t.type = r.type;
      t.shp = r.shp;
      if (nd.value && declared && (nd.value->type != r.type || !(*declared == r.shp)))
        fail(where, "type", "declared " + std::string(name_of(nd.value->type)) + " " + detail::named_shape(*declared, an.symbols) + ", but '" + op.name +
                                "' gives " + name_of(r.type) + " " + detail::named_shape(r.shp, an.symbols));
      an.types[i] = t;
    }
  }

  detail::check_control_types(doc, an, slots);

  // State: an Output that carries names a state Input, and its value has the Input's type.
  std::set<std::int64_t> carried;
  for (std::size_t i = 0; i < n; ++i) {
    const node& nd = doc.nodes[i];
    if (nd.type != node_type::output || !nd.carries) continue;
    const std::string where = node_where(nd.id);
    const auto it = an.position.find(*nd.carries);
    if (it == an.position.end() || doc.nodes[it->second].type != node_type::input || !doc.nodes[it->second].state) {
      fail(where, "state-carry", "\"carries\" names node " + std::to_string(*nd.carries) + ", which is not a state Input");
      continue;
    }
    if (!carried.insert(*nd.carries).second) fail(where, "state-carry", "another Output carries state node " + std::to_string(*nd.carries) + " too");
    const auto &from = an.types[it->second], &to = an.types[i];
    if (from && to && (from->type != to->type || !(from->shp == to->shp)))
      fail(where, "state-carry", "carries " + detail::type_text(*to) + " into state '" + doc.nodes[it->second].name + "' of " + detail::type_text(*from));
  }
  for (std::size_t i = 0; i < n; ++i)
    if (doc.nodes[i].type == node_type::input && doc.nodes[i].state && !carried.count(doc.nodes[i].id))
      fail(node_where(doc.nodes[i].id), "state-carry", "state Input '" + doc.nodes[i].name + "' has no Output that carries its next value");
  return an;
}


}  // namespace fused::ir
