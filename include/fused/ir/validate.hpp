// The validator of graph files: named rules, every violation reported (not the first), each naming
// the rule, the node (and edge) and what was expected. The same analysis gives the lowering
// (lower.hpp) its order, operands, ops, attributes and types, so what validates is what lowers.
//
// Rules: unique-ids, edge-endpoints, one-producer, input-predecessors, output-edges, inputs-list,
// outputs-list, duplicate-name, cycle, unreachable, unused, unknown-op, call-arity, attributes,
// symbols, unknown-symbol, dim-range, rank, constraint, shape (the op's shape rule), type (a declared
// type that differs from the inferred one), state-carry, unsupported (control flow; see
// docs/GRAPH_FORMAT.md). Types meet along edges exactly: an op's shape rule states which operand
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

#include "../core/shape_text.hpp"
#include "../core/text_string.hpp"
#include "../graph/program.hpp"
#include "../ops/registry.hpp"
#include "document.hpp"

namespace fused::ir {

// Bounds that keep every shape rule's arithmetic far from overflow (dims and integer attributes
// multiply in pairs at most before a size check).
inline constexpr std::int64_t max_dim = std::int64_t{1} << 31;
inline constexpr std::int64_t max_integer_attribute = std::int64_t{1} << 31;

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

  bool ok() const { return errors.empty(); }
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
        errors.push_back({where, "attributes", std::string("\"") + f.name + "\" must be a list of at most " + std::to_string(max_rank) + " integers, got " + it->dump().substr(0, 60)});
        continue;
      }
      for (int j = 0; j < max_rank; ++j) a.i[j] = j < static_cast<int>(it->size()) ? (*it)[static_cast<std::size_t>(j)].get<std::int64_t>() : no_value;
    } else if (is_integer(f.slot)) {
      const bool fits = it->is_number_integer() && (it->is_number_unsigned() ? it->get<std::uint64_t>() <= static_cast<std::uint64_t>(max_integer_attribute)
                                                                             : it->get<std::int64_t>() >= -max_integer_attribute &&
                                                                                   it->get<std::int64_t>() <= max_integer_attribute);
      if (!fits) {
        errors.push_back({where, "attributes", std::string("\"") + f.name + "\" must be an integer of magnitude at most 2^31, got " + it->dump()});
        continue;
      }
      a.i[k] = it->get<std::int64_t>();
    } else {
      if (!it->is_number() || !std::isfinite(it->get<double>())) {
        errors.push_back({where, "attributes", std::string("\"") + f.name + "\" must be a finite number, got " + it->dump().substr(0, 60)});
        continue;
      }
      const double v = it->get<double>();
      if (f.slot == attr_slot::f) a.f = v;
      else a.extra[k - static_cast<int>(attr_slot::extra0)] = v;
    }
  }
  return a;
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
        if (possible && c.kind == constraint_kind::divisible && c.by >= 1 && c.symbols[0] == s) possible = (r.first + c.by - 1) / c.by * c.by <= r.second;
      if (!possible) fail("graph", "constraint", "no value of symbol \"" + s + "\" satisfies all its constraints");
    }
  }

  // Ids, edges, inputs and outputs.
  for (std::size_t i = 0; i < n; ++i)
    if (!an.position.emplace(doc.nodes[i].id, i).second) fail(node_where(doc.nodes[i].id), "unique-ids", "another node has the id " + std::to_string(doc.nodes[i].id));
  std::vector<std::vector<std::size_t>> readers(n);
  std::vector<std::map<int, std::size_t>> slots(n);  // per target: slot -> source position
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
    if (nd.type == node_type::input) {
      if (!listed_in.count(nd.id)) fail(where, "inputs-list", "Input node '" + nd.name + "' is not listed in \"inputs\"");
      if (!input_names.insert(nd.name).second) fail(where, "duplicate-name", "another Input is named '" + nd.name + "'");
    } else if (nd.type == node_type::get_attr) {
      if (!targets.insert(nd.name).second) fail(where, "duplicate-name", "another GetAttr names parameter '" + nd.name + "' (read it once and use it twice)");
    } else if (nd.type == node_type::output) {
      if (!listed_out.count(nd.id)) fail(where, "outputs-list", "Output node '" + nd.name + "' is not listed in \"outputs\"");
      if (!nd.carries && !output_names.insert(nd.name).second) fail(where, "duplicate-name", "another Output is named '" + nd.name + "'");
      if (slots[i].size() != 1 || !slots[i].count(0)) fail(where, "output-edges", "an Output node takes exactly one input, in slot 0; it has " + std::to_string(slots[i].size()));
    } else if (nd.type != node_type::call) {
      fail(where, "unsupported", std::string(name_of(nd.type)) + " nodes are read and checked for form, but this version lowers no control flow");
    }
  }

  // Calls: op, arity, attributes.
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
    an.call_attrs[i] = detail::read_attributes(*op, nd.attributes, where, errors);
  }
  for (std::size_t i = 0; i < n; ++i) {
    auto& ops = an.operands[i];
    for (const auto& [slot, src] : slots[i]) {
      if (ops.size() <= static_cast<std::size_t>(slot)) ops.resize(static_cast<std::size_t>(slot) + 1, SIZE_MAX);
      ops[static_cast<std::size_t>(slot)] = src;
    }
  }

  // A topological order, stable by file position; nodes left over are on (or behind) a cycle.
  {
    std::vector<std::size_t> pending(n, 0);
    for (std::size_t i = 0; i < n; ++i) pending[i] = slots[i].size();
    std::set<std::size_t> ready;
    for (std::size_t i = 0; i < n; ++i)
      if (pending[i] == 0) ready.insert(i);
    while (!ready.empty()) {
      const std::size_t i = *ready.begin();
      ready.erase(ready.begin());
      an.order.push_back(i);
      for (std::size_t r : readers[i])
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
    }
    for (std::size_t i = 0; i < n; ++i)
      if (!reaches_output[i]) fail(node_where(doc.nodes[i].id), "unused", "the value of " + std::string(name_of(doc.nodes[i].type)) + " '" + doc.nodes[i].name + "' reaches no output");
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
    } else if (nd.type == node_type::output) {
      const auto it = slots[i].find(0);
      if (it != slots[i].end()) an.types[i] = an.types[it->second];
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
      if (!known) continue;
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

inline std::vector<issue> validate(const document& doc, const ops::registry& reg = ops::registry::global()) { return analyze(doc, reg).errors; }

}  // namespace fused::ir
