// Graph files written node by node and run the whole way in (a document, validated, lowered,
// planned, executed by runtime::execute), for the tests of graph-file ops and control flow.
#pragma once
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <map>
#include <string>
#include <vector>

#include <fused/ir/format.hpp>
#include <fused/ir/lower.hpp>
#include <fused/ir/plan.hpp>
#include <fused/runtime/execute.hpp>
#include <fused/runtime/weights.hpp>

namespace graph_test {

using fused::ir::json;

// A document written node by node: values are named, edges follow the names.
class graph {
 public:
  graph() { doc_ = fused::json_text::parse_ordered(R"({"metadata": {"version": "1.0"}, "symbols": [], "nodes": [], "edges": [], "inputs": [], "outputs": []})"); }
  graph& input(const std::string& name, const char* dtype, json shape) {
    add("Input", {{"name", name}, {"dtype", dtype}, {"shape", std::move(shape)}}, name);
    doc_["inputs"].push_back(next_ - 1);
    return *this;
  }
  graph& param(const std::string& name, json shape) {
    add("GetAttr", {{"target", name}, {"dtype", "bf16"}, {"shape", std::move(shape)}}, name);
    return *this;
  }
  graph& call(const std::string& name, const std::string& op, std::vector<std::string> args, json attributes = json::object()) {
    const std::int64_t id = next_;
    add("Call", {{"op", op}, {"name", name}, {"attributes", std::move(attributes)}}, name);
    for (std::size_t k = 0; k < args.size(); ++k) doc_["edges"].push_back({{"source", ids_.at(args[k])}, {"target", id}, {"name", args[k]}, {"slot", k}});
    return *this;
  }
  graph& output(const std::string& value) {
    const std::int64_t id = next_;
    add("Output", {{"name", value}}, "output:" + value);
    doc_["edges"].push_back({{"source", ids_.at(value)}, {"target", id}, {"name", value}, {"slot", 0}});
    doc_["outputs"].push_back(id);
    return *this;
  }
  // Control flow. A Conditional on `condition`; its branches' nodes are listed by `body`.
  graph& conditional(const std::string& name, const std::string& condition) {
    const std::int64_t id = next_;
    add("Conditional", {{"name", name}, {"then", json::array()}, {"else", json::array()}}, name);
    doc_["edges"].push_back({{"source", ids_.at(condition)}, {"target", id}, {"name", condition}, {"slot", 0}});
    return *this;
  }
  // A Loop; `condition` ("": none) is named before its node exists, so its edge comes with `body`.
  graph& loop(const std::string& name, std::int64_t max_trips) {
    add("Loop", {{"name", name}, {"body", json::array()}, {"max_trips", max_trips}}, name);
    return *this;
  }
  // Lists nodes in a body: field "then", "else" or "body".
  graph& body(const std::string& control, const char* field, const std::vector<std::string>& names) {
    json& data = node(control)["data"];
    for (const auto& n : names) data[field].push_back(ids_.at(n));
    return *this;
  }
  // A Merge of `of`; a Loop's Merge gets its slot 1 (the next value) by `edge` once that exists.
  graph& merge(const std::string& name, const std::string& of, const std::vector<std::string>& args) {
    const std::int64_t id = next_;
    add("Merge", {{"name", name}, {"of", ids_.at(of)}}, name);
    for (std::size_t k = 0; k < args.size(); ++k) doc_["edges"].push_back({{"source", ids_.at(args[k])}, {"target", id}, {"name", args[k]}, {"slot", k}});
    return *this;
  }
  graph& edge(const std::string& from, const std::string& to, int slot) {
    doc_["edges"].push_back({{"source", ids_.at(from)}, {"target", ids_.at(to)}, {"name", from}, {"slot", slot}});
    return *this;
  }
  std::int64_t id(const std::string& name) const { return ids_.at(name); }
  json& node(const std::string& name) {
    for (json& n : doc_["nodes"])
      if (n["id"] == ids_.at(name)) return n;
    throw std::out_of_range(name);
  }
  json& doc() { return doc_; }
  const json& doc() const { return doc_; }

 private:
  void add(const char* type, json data, const std::string& name) {
    doc_["nodes"].push_back({{"id", next_}, {"type", type}, {"data", std::move(data)}});
    ids_[name] = next_++;
  }
  json doc_;
  std::map<std::string, std::int64_t> ids_;
  std::int64_t next_ = 0;
};

using values = std::map<std::string, std::vector<float>>;

// Runs the document on f32 inputs (bool outputs read as 0/1, i32 as their values); `weights`: a safetensors file or "".
inline values run(const json& j, const values& inputs, const std::string& weights = "") {
  const fused::ir::read_result r = fused::ir::from_json(j);
  REQUIRE_MESSAGE(r.ok(), fused::ir::report(r.errors));
  const auto issues = fused::ir::validate(r.doc);
  REQUIRE_MESSAGE(issues.empty(), fused::ir::report(issues));
  const fused::ir::lowered g = fused::ir::lower(r.doc);
  const fused::binding b = fused::ir::bind(r.doc, {});
  const fused::memory_plan mem = fused::ir::plan(g.prog, b);
  std::vector<fused::wire_state> wires(g.prog.tensors.size(), fused::wire_state{true, std::nullopt});
  const auto calls = fused::runtime::lower_all(g.prog, mem, wires);
  const auto store = weights.empty() ? fused::runtime::weight_store{} : fused::runtime::weight_store::load(weights, g.prog.tensors, false);
  fused::runtime::aligned_bytes state(static_cast<std::size_t>(mem.region_bytes[1]) + 64), arena(static_cast<std::size_t>(mem.arena_bytes()));
  const fused::runtime::regions regions{store.table(), state.data(), arena.data()};
  for (const auto& t : g.prog.tensors)
    if (t.kind == fused::role::input) {
      const std::vector<float>& v = inputs.at(fused::to_string(t.name));
      REQUIRE(static_cast<std::int64_t>(v.size() * 4) == fused::bytes_of(t, b));
      std::memcpy(arena.data() + mem.buffers[static_cast<std::size_t>(t.id)].offset, v.data(), v.size() * 4);
    }
  fused::runtime::execute(g.prog, mem, calls, regions, b);
  values out;
  for (const auto& o : g.prog.outputs) {
    const fused::tensor_info& t = g.prog.tensor(o.id);
    const std::byte* p = arena.data() + mem.buffers[static_cast<std::size_t>(o.id)].offset;
    const auto n = static_cast<std::size_t>(t.shp.elements(b));
    std::vector<float>& v = out[o.name];
    for (std::size_t i = 0; i < n; ++i) {
      if (t.type == fused::dtype::boolean) v.push_back(static_cast<float>(reinterpret_cast<const std::uint8_t*>(p)[i]));
      else if (t.type == fused::dtype::i32) v.push_back(static_cast<float>(reinterpret_cast<const std::int32_t*>(p)[i]));
      else v.push_back(reinterpret_cast<const float*>(p)[i]);
    }
  }
  return out;
}

inline void check_close(const std::vector<float>& got, const std::vector<float>& want, float tolerance = 1e-6f) {
  REQUIRE(got.size() == want.size());
  for (std::size_t i = 0; i < got.size(); ++i) CHECK_MESSAGE(std::fabs(got[i] - want[i]) <= tolerance, "element " << i << ": " << got[i] << " vs " << want[i]);
}

// Values exact in bf16 (the tests use small integers and halves): the top half of the f32 bits.
inline std::uint16_t bf16(float f) {
  std::uint32_t u = 0;
  std::memcpy(&u, &f, sizeof u);
  return static_cast<std::uint16_t>(u >> 16);
}


}  // namespace graph_test
