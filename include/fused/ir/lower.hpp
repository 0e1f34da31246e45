// Checked lowering of a graph file to a FusedProgram (graph/program.hpp), the value every planner,
// executor and emitter reads. The validator (validate.hpp) runs first and its report is the error
// when it finds anything; then each node, in the validator's topological order, becomes a feed or
// a step through graph_builder, whose shape rules run again: nothing unchecked reaches a kernel.
#pragma once
#include <algorithm>
#include <cstdint>
#include <deque>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "../graph/builder.hpp"
#include "../graph/graph_error.hpp"
#include "format.hpp"
#include "validate.hpp"

namespace fused::ir {

// A program built from a graph file, with the storage its names point into.
struct lowered {
  std::deque<std::string> names;     // the program's tensor and output names (stable addresses)
  program prog;
  std::vector<std::string> symbols;  // symbol id - 1 -> name
  std::vector<std::int64_t> node_of_tensor;  // tensor id -> graph node id (-1: a workspace)

  lowered() = default;
  lowered(lowered&&) = default;  // a deque's elements keep their addresses when it moves
  lowered& operator=(lowered&&) = default;
  lowered(const lowered&) = delete;
  lowered& operator=(const lowered&) = delete;

  // The node each step computes (its result's; -1: none), by step id: what a run-time message that
  // names "step N" (the executor's, the generated C's) says to the file's reader.
  std::vector<std::int64_t> node_of_step() const {
    std::vector<std::int64_t> node(prog.steps.size(), -1);
    for (const step& s : prog.steps) node[static_cast<std::size_t>(s.id)] = node_of_tensor[static_cast<std::size_t>(s.result)];
    return node;
  }
};

// Every issue as lines, for an exception's message.
inline std::string report(const std::vector<issue>& issues, std::size_t max_lines = 50) {
  std::string r;
  // append(), not operator+ on temporaries: g++ 12 warns falsely (-Wrestrict) on the latter.
  for (std::size_t i = 0; i < issues.size() && i < max_lines; ++i) r.append(i ? "\n" : "").append(to_line(issues[i]));
  if (issues.size() > max_lines) r += "\n... and " + std::to_string(issues.size() - max_lines) + " more";
  return r;
}

namespace detail {
// The program's steps are the file's Call, Merge and carry nodes in the analysis's order
// (node_of_step); a message from the builder or the executor names steps, and a graph file's
// reader knows nodes.
inline std::string steps_as_nodes(std::string_view message, const std::vector<std::int64_t>& node_of_step) {
  std::string out;
  auto digit = [&](std::size_t i) { return i < message.size() && message[i] >= '0' && message[i] <= '9'; };
  for (std::size_t i = 0; i < message.size();) {
    if (message.substr(i, 5) == "step " && digit(i + 5)) {
      std::size_t j = i + 5, id = 0;
      for (; digit(j) && id < node_of_step.size(); ++j) id = id * 10 + static_cast<std::size_t>(message[j] - '0');
      if (!digit(j) && id < node_of_step.size() && node_of_step[id] >= 0) {  // -1: a step of no node (a copy)
        out += node_where(node_of_step[id]);
        i = j;
        continue;
      }
    }
    out += message[i++];
  }
  return out;
}
}  // namespace detail

// The document lowered through its analysis, which must be ok(); throws graph_error when the program
// as a whole is refused (one set of bytes read in two layouts).
inline lowered lower(const document& doc, const analysis& an) {
  lowered out;
  out.symbols = an.symbols;
  graph_builder b;
  b.reserve(doc.nodes.size() * 2, doc.nodes.size());
  std::vector<tensor_id> tensor_of(doc.nodes.size(), -1);
  auto keep = [&](const std::string& s) -> name_ref { return {out.names.emplace_back(s).c_str()}; };
  std::vector<std::int64_t> node_of_step;
  // Control flow: the builder's region of each of the analysis's, made when its Conditional or Loop
  // comes in the order (after what encloses it, before what it holds); back edges set at the end.
  std::vector<int> region_in_builder(an.regions.size(), -1);
  auto enter = [&](int analysis_region) { b.set_region(analysis_region < 0 ? -1 : region_in_builder[static_cast<std::size_t>(analysis_region)]); };
  std::vector<std::pair<tensor_id, std::size_t>> carries;  // a loop carry's value, and the node of its next value
  std::map<std::size_t, tensor_id> feed_copy;               // an Output node of a feed -> the feed's copy
  std::vector<std::vector<std::size_t>> outputs_of_feed(doc.nodes.size());  // a node -> the plain Outputs of it, in file order
  for (std::size_t o = 0; o < doc.nodes.size(); ++o)
    if (doc.nodes[o].type == node_type::output && !doc.nodes[o].carries) outputs_of_feed[an.operands[o][0]].push_back(o);
  for (const std::size_t i : an.order) {
    const node& nd = doc.nodes[i];
    const tensor_info* t = an.types[i] ? &*an.types[i] : nullptr;
    const int first = an.first_region[i];
    switch (nd.type) {
      case node_type::conditional:
        enter(an.region_of[i]);
        region_in_builder[static_cast<std::size_t>(first)] = b.conditional(tensor_of[an.operands[i][0]]);
        region_in_builder[static_cast<std::size_t>(first) + 1] = region_in_builder[static_cast<std::size_t>(first)] + 1;
        break;
      case node_type::loop:
        enter(an.region_of[i]);
        region_in_builder[static_cast<std::size_t>(first)] = b.loop(*nd.max_trips);
        break;
      case node_type::merge: {
        const std::size_t c = detail::merged_control(doc, an, i);
        const int control_region = an.first_region[c];
        const name_ref result = keep(nd.name.empty() ? "node." + std::to_string(nd.id) : nd.name);
        enter(an.region_of[c]);
        if (doc.nodes[c].type == node_type::conditional) {
          tensor_of[i] = b.merge(region_in_builder[static_cast<std::size_t>(control_region)], tensor_of[an.operands[i][0]], tensor_of[an.operands[i][1]], result);
        } else {
          tensor_of[i] = b.carry(region_in_builder[static_cast<std::size_t>(control_region)], tensor_of[an.operands[i][0]], result);
          carries.emplace_back(tensor_of[i], an.operands[i][1]);
        }
        node_of_step.push_back(nd.id);
        if (!b.peek().ok()) throw graph_error(node_where(nd.id) + ": " + to_string(b.peek().message));
        break;
      }
      default: enter(an.region_of[i]); break;
    }
    switch (nd.type) {
      case node_type::input:
      case node_type::get_attr:
        tensor_of[i] = nd.type == node_type::get_attr ? b.weight(keep(nd.name), t->type, t->shp)
                       : nd.state                    ? b.state(keep(nd.name), t->type, t->shp)
                                                     : b.input(keep(nd.name), t->type, t->shp);
        // An Output of the feed as it is gets bytes of its own, a copy made first (before any step
        // could update a state in place): the feed keeps its role and its bytes (the caller's
        // inputs, the weights, the state), which an output's would take over.
        for (const std::size_t o : outputs_of_feed[i]) {
          feed_copy[o] = b.apply(control::copy_apart, {tensor_of[i]}, {}, keep(doc.nodes[o].name));
          node_of_step.push_back(doc.nodes[o].id);
          if (!b.peek().ok()) throw graph_error(node_where(doc.nodes[o].id) + ": " + to_string(b.peek().message));
        }
        break;
      case node_type::call: {
        tensor_id in[max_inputs]{};
        const auto& src = an.operands[i];
        for (std::size_t k = 0; k < src.size(); ++k) in[k] = tensor_of[src[k]];
        const op_def& op = *an.ops[i];
        const attrs& a = an.call_attrs[i];
        const name_ref result = keep(nd.name.empty() ? "node." + std::to_string(nd.id) : nd.name);
        switch (src.size()) {
          case 0: tensor_of[i] = b.apply(op, {}, a, result); break;
          case 1: tensor_of[i] = b.apply(op, {in[0]}, a, result); break;
          case 2: tensor_of[i] = b.apply(op, {in[0], in[1]}, a, result); break;
          case 3: tensor_of[i] = b.apply(op, {in[0], in[1], in[2]}, a, result); break;
          default: tensor_of[i] = b.apply(op, {in[0], in[1], in[2], in[3]}, a, result); break;
        }
        node_of_step.push_back(nd.id);
        if (!b.peek().ok()) throw graph_error(node_where(nd.id) + ": " + to_string(b.peek().message));
        break;
      }
      default: break;
    }
  }
  for (const auto& [value, next] : carries) b.carry_next(value, tensor_of[next]);
  for (std::size_t i = 0; i < doc.nodes.size(); ++i)
    if (doc.nodes[i].type == node_type::loop && !an.operands[i].empty())
      b.loop_while(region_in_builder[static_cast<std::size_t>(an.first_region[i])], tensor_of[an.operands[i][0]]);
  b.set_region(-1);
  // Outputs and state carries in file order. An Output of a value on a state's bytes (computed in
  // place over the state, or a loop carry of it) gets a copy of its own, as an Output of a feed does:
  // an output's role would take those bytes out of the state's chain.
  for (std::size_t i = 0; i < doc.nodes.size(); ++i) {
    const node& nd = doc.nodes[i];
    if (nd.type != node_type::output) continue;
    tensor_id value = tensor_of[an.operands[i][0]];
    if (nd.carries) {
      b.carry_state(tensor_of[an.position.at(*nd.carries)], value);
      continue;
    }
    if (feed_copy.count(i)) {
      value = feed_copy.at(i);
    } else if (b.peek().tensor(value).kind == role::state) {
      value = b.apply(control::copy_apart, {value}, {}, keep(nd.name));
      node_of_step.push_back(nd.id);
      if (!b.peek().ok()) throw graph_error(node_where(nd.id) + ": " + to_string(b.peek().message));
    }
    b.output(out.names.emplace_back(nd.name).c_str(), value);
  }
  out.prog = std::move(b).finish();
  if (!out.prog.ok())
    throw graph_error("the graph lowers to a program that cannot run: " + std::string(name_of(out.prog.error)) + ": " +
                      detail::steps_as_nodes(to_string(out.prog.message), node_of_step));
  // States. The plan updates a state only in place: its next value must be computed on its bytes,
  // each op from the state Input to it writing over the operand that holds it (or be a loop carry of
  // such a value); anything else would never reach the next call.
  const program& p = out.prog;
  std::vector<std::size_t> position(p.steps.size());  // step id -> schedule position
  for (std::size_t s = 0; s < p.steps.size(); ++s) position[static_cast<std::size_t>(p.steps[s].id)] = s;
  for (const state_pair& sp : p.state) {
    tensor_id t = sp.out;
    while (t >= 0 && t != sp.in && p.tensor(t).kind == role::state && p.tensor(t).producer >= 0)
      t = p.steps[position[static_cast<std::size_t>(p.tensor(t).producer)]].in_place_source();
    if (t == sp.in) continue;
    const tensor_info& next = p.tensor(sp.out);
    std::string where = "the Output";
    for (const node& nd : doc.nodes)
      if (nd.type == node_type::output && nd.carries && tensor_of[an.position.at(*nd.carries)] == sp.in) where = node_where(nd.id);
    const std::string made_by = next.producer >= 0 ? node_where(node_of_step[static_cast<std::size_t>(next.producer)]) : "a feed";
    throw graph_error(where + " carries state Input '" + to_string(p.tensor(sp.in).name) + "', but its value, '" + to_string(next.name) +
                      "' (" + made_by + "), is not computed on the state's bytes: a state is updated in place, so each op from the state "
                      "to its next value must write over the operand that holds it (as `add`'s first, `kv_write`'s cache, a Loop's "
                      "Merge of it)");
  }
  // A step that writes over a value on a state's bytes ends that value: no step after it may read it,
  // in any region (the plan's verifier checks one region, naming steps), except a loop's carry that
  // its own body updates, read after the loop (its last value).
  std::vector<std::vector<std::size_t>> readers(p.tensors.size());  // tensor -> positions of the steps reading it
  for (std::size_t s = 0; s < p.steps.size(); ++s)
    for (int k = 0; k < p.steps[s].n_inputs; ++k) readers[static_cast<std::size_t>(p.steps[s].inputs[k])].push_back(s);
  for (std::size_t s = 0; s < p.steps.size(); ++s) {
    const step& update = p.steps[s];
    const tensor_id src = update.in_place_source();
    if (src < 0 || p.tensor(src).kind != role::state) continue;
    const int loop = p.carried_by(src);
    const std::vector<std::size_t>& read_at = readers[static_cast<std::size_t>(src)];
    for (auto later = std::upper_bound(read_at.begin(), read_at.end(), s); later != read_at.end(); ++later) {
      const step& reader = p.steps[*later];
      if (loop >= 0 && p.within(update.region, loop) && !p.within(reader.region, loop)) continue;
      const std::string what = p.tensor(src).is_feed ? "state Input '" + to_string(p.tensor(src).name) + "'"
                                                     : "'" + to_string(p.tensor(src).name) + "' (on a state's bytes)";
      throw graph_error(node_where(node_of_step[static_cast<std::size_t>(reader.id)]) + " reads " + what + " after " +
                        node_where(node_of_step[static_cast<std::size_t>(update.id)]) +
                        " writes over its bytes (in place): read it before, or carry a value computed from a copy");
    }
  }
  out.node_of_tensor.assign(out.prog.tensors.size(), -1);
  for (std::size_t i = 0; i < doc.nodes.size(); ++i)
    if (tensor_of[i] >= 0) out.node_of_tensor[static_cast<std::size_t>(tensor_of[i])] = doc.nodes[i].id;
  return out;
}

// Throws graph_error listing every violation when the document does not validate.
inline lowered lower(const document& doc, const ops::registry& reg = ops::registry::global()) {
  const analysis an = analyze(doc, reg);
  if (!an.ok()) throw graph_error(std::to_string(an.errors.size()) + " error(s) in the graph:\n" + report(an.errors));
  return lower(doc, an);
}

// Every violation of the format's rules; when there is none, whether the document lowers (rule
// `lowering`, where `graph`): what validates is what lowers.
inline std::vector<issue> validate(const document& doc, const ops::registry& reg = ops::registry::global()) {
  const analysis an = analyze(doc, reg);
  if (!an.ok()) return an.errors;
  try {
    (void)lower(doc, an);
  } catch (const graph_error& e) {
    return {{.where = "graph", .rule = "lowering", .message = e.what()}};
  }
  return {};
}

// A graph file read and lowered: throws graph_error naming the file, with its first defect of form
// (`fused graph check` lists every one) or every validation error.
struct loaded_graph {
  document doc;
  lowered graph;
};

inline loaded_graph load_graph(const std::filesystem::path& file, const ops::registry& reg = ops::registry::global()) {
  read_result r = read_file(file);
  if (!r.ok()) throw graph_error(file.string() + ": " + to_phrase(r.errors.front()) + " (fused graph check lists every error)");
  try {
    lowered g = lower(r.doc, reg);
    return {std::move(r.doc), std::move(g)};
  } catch (const graph_error& e) {
    throw graph_error(file.string() + ": " + e.what());
  }
}

}  // namespace fused::ir
