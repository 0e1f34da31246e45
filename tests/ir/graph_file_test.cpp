// Graph files: a built-in model exported, written as JSON and MessagePack, read back and lowered
// is the same program with the same plan; every damaged document is refused naming its rule and
// node; custom ops registered by name take part like built-in ones.
#include <doctest/doctest.h>

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <string>
#include <tuple>
#include <vector>

#include <fused/ir/format.hpp>
#include <fused/ir/lower.hpp>
#include <fused/ir/plan.hpp>
#include <fused/models/decoder_graph_file.hpp>
#include <fused/models/decoder_model.hpp>
#include <fused/runtime/execute.hpp>
#include <fused/models/hf_config.hpp>
#include <fused/plan/json.hpp>

namespace {

using fused::ir::json;

fused::decoder::hf_model_info config(const char* name) { return fused::decoder::load_hf_config(std::string(FUSED_TEST_DATA "/configs/") + name); }

fused::ir::document exported(const char* name, fused::decoder::graph_options o = {}) {
  const auto info = config(name);
  return fused::decoder::to_graph_file(*info.family, info.arch, o, name);
}

fused::ir::document reread(const fused::ir::document& doc, fused::ir::encoding enc) {
  const fused::ir::read_result r = fused::ir::parse(fused::ir::encode(doc, enc));
  REQUIRE_MESSAGE(r.ok(), (r.ok() ? "" : fused::ir::to_line(r.errors.front())));
  return r.doc;
}

bool has_issue(const std::vector<fused::ir::issue>& issues, const std::string& where, const std::string& rule) {
  return std::any_of(issues.begin(), issues.end(), [&](const auto& i) { return i.where == where && i.rule == rule; });
}

std::string lines(const std::vector<fused::ir::issue>& issues) { return fused::ir::report(issues); }

// A small valid graph: y = linear(x, w) for x f32 [n, 4], w bf16 [3, 4].
json small_graph() {
  return fused::json_text::parse_ordered(R"({
    "metadata": {"version": "1.0"},
    "symbols": [{"name": "n"}],
    "constraints": [{"type": "Range", "symbols": ["n"], "min": 1, "max": 64}],
    "nodes": [
      {"id": 10, "type": "Input", "data": {"name": "x", "dtype": "f32", "shape": ["n", 4]}},
      {"id": 11, "type": "GetAttr", "data": {"target": "w", "dtype": "bf16", "shape": [3, 4]}},
      {"id": 12, "type": "Call", "data": {"op": "linear", "name": "y", "attributes": {}, "dtype": "f32", "shape": ["n", 3]}},
      {"id": 13, "type": "Output", "data": {"name": "y"}}
    ],
    "edges": [{"source": 10, "target": 12, "name": "x", "slot": 0}, {"source": 11, "target": 12, "name": "w", "slot": 1},
              {"source": 12, "target": 13, "name": "y", "slot": 0}],
    "inputs": [10],
    "outputs": [13]
  })");
}

std::vector<fused::ir::issue> issues_of(const json& j) {
  const fused::ir::read_result r = fused::ir::from_json(j);
  if (!r.ok()) return r.errors;
  return fused::ir::validate(r.doc);
}

}  // namespace

TEST_CASE("every family exported, written and read back lowers to the same program and plan") {
  // Each family's graph with the last row's logits through JSON, and with every row's through
  // MessagePack (the two encodings are one document: the next test).
  struct variant {
    fused::decoder::logits_rows logits;
    fused::ir::encoding enc;
  };
  for (const char* name : {"qwen2-0.5b.json", "qwen3-0.6b.json", "llama-3.2-1b.json", "mistral-7b-v0.3.json", "smollm2-360m.json"}) {
    for (const variant v : {variant{fused::decoder::logits_rows::last, fused::ir::encoding::json_text},
                            variant{fused::decoder::logits_rows::all, fused::ir::encoding::msgpack}}) {
      CAPTURE(name);
      const auto info = config(name);
      fused::decoder::graph_options o{};
      o.logits = v.logits;
      const fused::program built = info.family->graph(info.arch, o);
      const fused::ir::document doc = fused::decoder::to_graph_file(*info.family, info.arch, o, name);
      CHECK(fused::ir::validate(doc).empty());
      const fused::ir::lowered g = fused::ir::lower(reread(doc, v.enc));
      const fused::program& p = g.prog;
      REQUIRE(p.tensors.size() == built.tensors.size());
      REQUIRE(p.steps.size() == built.steps.size());
      for (std::size_t t = 0; t < p.tensors.size(); ++t) {
        CHECK(fused::to_string(p.tensors[t].name) == fused::to_string(built.tensors[t].name));
        CHECK(p.tensors[t].type == built.tensors[t].type);
        CHECK(p.tensors[t].shp == built.tensors[t].shp);
        CHECK(p.tensors[t].kind == built.tensors[t].kind);
      }
      for (std::size_t s = 0; s < p.steps.size(); ++s) {
        CHECK(std::string(p.steps[s].op->name) == built.steps[s].op->name);
        CHECK(p.steps[s].at == built.steps[s].at);
        CHECK(p.steps[s].id == built.steps[s].id);
        CHECK(std::equal(p.steps[s].inputs, p.steps[s].inputs + fused::max_inputs, built.steps[s].inputs));
      }
      CHECK(p.state.size() == built.state.size());
      fused::binding b{};
      b.value[1] = 16;
      b.value[2] = 64;
      CHECK(fused::plan_to_json(p, fused::ir::plan(p, b)) == fused::plan_to_json(built, fused::ir::plan(built, b)));
    }
  }
}

TEST_CASE("JSON and MessagePack are one document: JSON -> msgpack -> JSON is lossless") {
  const fused::ir::document doc = exported("llama-3.2-1b.json");
  const std::string text = fused::ir::encode(doc, fused::ir::encoding::json_text);
  const std::string packed = fused::ir::encode(doc, fused::ir::encoding::msgpack);
  CHECK(packed.size() < text.size());
  const json from_text = fused::json_text::parse_ordered(text);
  const json back = json::from_msgpack(json::to_msgpack(from_text));
  CHECK(back == from_text);
  CHECK(fused::json_text::dump(back) == fused::json_text::dump(from_text));
  CHECK(fused::ir::encode(reread(doc, fused::ir::encoding::msgpack), fused::ir::encoding::json_text) == text);
  CHECK(fused::ir::encode(reread(doc, fused::ir::encoding::json_text), fused::ir::encoding::msgpack) == packed);
}

TEST_CASE("a JSON graph file may start with a byte-order mark; JSON that is not an object is called that") {
  const std::string text = fused::ir::encode(fused::ir::from_json(small_graph()).doc, fused::ir::encoding::json_text);
  const fused::ir::read_result with_bom = fused::ir::parse("\xEF\xBB\xBF" + text);
  REQUIRE(with_bom.ok());
  CHECK(fused::ir::encode(with_bom.doc, fused::ir::encoding::json_text) == text);
  for (const char* not_a_graph : {"[]", " \"graph\"", "\xEF\xBB\xBF[1, 2]"}) {
    CAPTURE(not_a_graph);
    const fused::ir::read_result r = fused::ir::parse(not_a_graph);
    REQUIRE(r.errors.size() == 1);
    CHECK(r.errors[0].message == "a graph file is an object with \"nodes\", \"edges\", \"inputs\", \"outputs\" and \"metadata\"");
  }
}

TEST_CASE("a small graph validates, lowers and plans under its symbols") {
  const fused::ir::read_result r = fused::ir::from_json(small_graph());
  REQUIRE(r.ok());
  CHECK(fused::ir::validate(r.doc).empty());
  const fused::ir::lowered g = fused::ir::lower(r.doc);
  REQUIRE(g.prog.steps.size() == 1);
  CHECK(std::string(g.prog.steps[0].op->name) == "linear");
  CHECK(g.prog.outputs.size() == 1);
  const fused::binding b = fused::ir::bind(r.doc, {{"n", 5}});
  CHECK(b.value[1] == 5);
  const fused::memory_plan m = fused::ir::plan(g.prog, b);
  CHECK(m.buffers[static_cast<std::size_t>(g.prog.output("y"))].bytes == 5 * 3 * 4);
  CHECK_THROWS_WITH_AS(fused::ir::bind(r.doc, {{"n", 65}}), "symbol \"n\" = 65 is outside its Range [1, 64]", std::invalid_argument);
  CHECK_THROWS_WITH_AS(fused::ir::bind(r.doc, {}), "symbol \"n\" is not bound (--bind n=VALUE)", std::invalid_argument);
  CHECK_THROWS_WITH_AS(fused::ir::bind(r.doc, {{"n", 2}, {"m", 1}}), "the graph has no symbol \"m\"", std::invalid_argument);
}

TEST_CASE("versions: any 1.x is read, another major version or a malformed one is refused naming it") {
  json j = small_graph();
  j["metadata"]["version"] = "1.7";
  CHECK(issues_of(j).empty());
  j["metadata"]["version"] = "2.0";
  const auto e = issues_of(j);
  REQUIRE(e.size() == 1);
  CHECK(fused::ir::to_line(e[0]) == "error: graph: version: version \"2.0\" is not one this reader knows (it reads 1.x)");
  for (const char* not_a_version : {"1.0.0.0.99999999999999999999", "1.x", "1.", "1", "1.-1", "1. 0", "1.1234567890"}) {
    CAPTURE(not_a_version);
    j["metadata"]["version"] = not_a_version;
    CHECK(has_issue(issues_of(j), "graph", "version"));
  }
  j.erase("metadata");
  CHECK(has_issue(issues_of(j), "graph", "version"));
}

TEST_CASE("each damaged document is refused with its rule and node") {
  struct damage {
    const char* what;
    void (*apply)(json&);
    const char* where;
    const char* rule;
  };
  const damage cases[] = {
      {"two nodes with one id", [](json& j) { j["nodes"][1]["id"] = 10; }, "node 10", "unique-ids"},
      {"an edge to nowhere", [](json& j) { j["edges"][0]["target"] = 99; }, "edge 0 (10 -> 99)", "edge-endpoints"},
      {"two producers of one slot", [](json& j) { j["edges"][1]["slot"] = 0; }, "node 12", "one-producer"},
      {"an edge into an Input", [](json& j) { j["edges"].push_back({{"source", 11}, {"target", 10}, {"name", "w"}, {"slot", 0}}); }, "node 10",
       "input-predecessors"},
      {"an edge out of an Output", [](json& j) { j["edges"].push_back({{"source", 13}, {"target", 12}, {"name", "y"}, {"slot", 2}}); }, "node 13",
       "output-edges"},
      {"an Output without input", [](json& j) { j["edges"].erase(2); }, "node 13", "output-edges"},
      {"an Input not listed", [](json& j) { j["inputs"] = json::array(); }, "node 10", "inputs-list"},
      {"an Output not listed", [](json& j) { j["outputs"] = json::array({13, 12}); }, "graph", "outputs-list"},
      {"an unknown op", [](json& j) { j["nodes"][2]["data"]["op"] = "lineer"; }, "node 12", "unknown-op"},
      {"too few inputs", [](json& j) { j["edges"].erase(1); }, "node 12", "call-arity"},
      {"an unknown attribute", [](json& j) { j["nodes"][2]["data"]["attributes"]["alpha"] = 1; }, "node 12", "attributes"},
      {"a cycle", [](json& j) {
         j["nodes"].push_back({{"id", 14}, {"type", "Call"}, {"data", {{"op", "add"}, {"name", "z"}}}});
         j["edges"].push_back({{"source", 14}, {"target", 14}, {"name", "z"}, {"slot", 0}});
         j["edges"].push_back({{"source", 12}, {"target", 14}, {"name", "y"}, {"slot", 1}});
       }, "node 14", "cycle"},
      {"an unused node", [](json& j) {
         j["nodes"].push_back({{"id", 14}, {"type", "GetAttr"}, {"data", {{"target", "unused"}, {"dtype", "bf16"}, {"shape", {3}}}}});
       }, "node 14", "unused"},
      {"a shape the op refuses", [](json& j) { j["nodes"][1]["data"]["shape"] = {3, 5}; }, "node 12", "shape"},
      {"a declared type that differs", [](json& j) { j["nodes"][2]["data"]["shape"] = {"n", 4}; }, "node 12", "type"},
      {"an undeclared symbol", [](json& j) { j["nodes"][0]["data"]["shape"] = {"m", 4}; }, "node 10", "unknown-symbol"},
      {"an empty dim", [](json& j) { j["nodes"][1]["data"]["shape"] = {0, 4}; }, "node 11", "shape"},
      {"rank 5", [](json& j) { j["nodes"][0]["data"]["shape"] = {1, 1, 1, "n", 4}; }, "node 10", "rank"},
      {"an impossible constraint", [](json& j) { j["constraints"].push_back({{"type", "Divisible"}, {"symbols", {"n"}}, {"by", 100}}); }, "graph",
       "constraint"},
      {"a divisor near the int64 limit", [](json& j) {
         j["constraints"].push_back({{"type", "Divisible"}, {"symbols", {"n"}}, {"by", std::int64_t{9223372036854775807}}});
       }, "graph", "constraint"},
      {"an unknown dtype", [](json& j) { j["nodes"][0]["data"]["dtype"] = "f8"; }, "node 10", "dtype"},
      {"an unknown node type", [](json& j) { j["nodes"][2]["type"] = "Cal"; }, "node 12", "node-type"},
      {"a string id", [](json& j) { j["nodes"][2]["id"] = "12"; }, "nodes[2]", "format"},
      {"a misspelt field", [](json& j) { j["nodes"][2]["data"]["atributes"] = json::object(); }, "node 12", "format"},
      {"a state Input nothing carries", [](json& j) { j["nodes"][0]["data"]["state"] = true; }, "node 10", "state-carry"},
      {"an Input named \"\"", [](json& j) { j["nodes"][0]["data"]["name"] = ""; }, "node 10", "format"},
      {"a GetAttr of target \"\"", [](json& j) { j["nodes"][1]["data"]["target"] = ""; }, "node 11", "format"},
      {"an Output named \"\"", [](json& j) { j["nodes"][3]["data"]["name"] = ""; }, "node 13", "format"},
      {"a logits option fused would refuse", [](json& j) { j["metadata"]["options"] = {{"logits", "middle"}}; }, "graph", "format"},
      {"options that are not an object", [](json& j) { j["metadata"]["options"] = 5; }, "graph", "format"},
      {"a Loop without its bound", [](json& j) {
         j["nodes"].push_back({{"id", 14}, {"type", "Loop"}, {"data", {{"body", {12}}}}});
       }, "node 14", "format"},
      {"an edge out of a Loop", [](json& j) {
         j["nodes"].push_back({{"id", 14}, {"type", "Loop"}, {"data", {{"body", json::array()}, {"max_trips", 2}}}});
         j["edges"][2]["source"] = 14;
       }, "node 14", "control-edges"},
  };
  for (const damage& d : cases) {
    CAPTURE(d.what);
    json j = small_graph();
    d.apply(j);
    const auto e = issues_of(j);
    CHECK_MESSAGE(has_issue(e, d.where, d.rule), lines(e));
    const fused::ir::read_result r = fused::ir::from_json(j);
    if (r.ok()) CHECK_THROWS_AS(fused::ir::lower(r.doc), fused::graph_error);
  }
}

TEST_CASE("every violation is reported, not the first") {
  json j = small_graph();
  j["nodes"][2]["data"]["op"] = "lineer";
  j["nodes"][0]["data"]["shape"] = {"m", 4};
  j["inputs"] = json::array();
  const auto e = issues_of(j);
  CHECK(has_issue(e, "node 12", "unknown-op"));
  CHECK(has_issue(e, "node 10", "unknown-symbol"));
  CHECK(has_issue(e, "node 10", "inputs-list"));
  CHECK(fused::ir::to_line(*std::find_if(e.begin(), e.end(), [](const auto& i) { return i.rule == "unknown-op"; })) ==
        "error: node 12: unknown-op: no op is registered as 'lineer' (closest: linear)");
}

TEST_CASE("a defect is reported once, in words that fit it") {
  json j = small_graph();
  j["nodes"][1]["data"]["shape"] = {3, 4.0};
  auto e = issues_of(j);
  REQUIRE_MESSAGE(e.size() == 1, lines(e));
  CHECK(fused::ir::to_line(e[0]) == "error: node 11: shape: a dim must be a positive integer or a symbol name, got 4.0");
  // MessagePack holds a NaN, which JSON text cannot: named as one (json's dump writes null).
  j["nodes"][1]["data"]["shape"] = {3, std::nan("")};
  const std::vector<std::uint8_t> packed = json::to_msgpack(j);
  const fused::ir::read_result r = fused::ir::parse(std::string(packed.begin(), packed.end()));
  REQUIRE_MESSAGE(r.errors.size() == 1, lines(r.errors));
  CHECK(fused::ir::to_line(r.errors[0]) == "error: node 11: shape: a dim must be a positive integer or a symbol name, got NaN");
  // An attribute refused is not refused again by the op's shape rule (which would see it missing).
  j = small_graph();
  j["nodes"].push_back({{"id", 14}, {"type", "Call"}, {"data", {{"op", "zeros"}, {"name", "z"}, {"attributes", {{"shape", {1.5}}}}}}});
  j["nodes"].push_back({{"id", 15}, {"type", "Output"}, {"data", {{"name", "z"}}}});
  j["edges"].push_back({{"source", 14}, {"target", 15}, {"name", "z"}, {"slot", 0}});
  j["outputs"].push_back(15);
  e = issues_of(j);
  REQUIRE_MESSAGE(e.size() == 1, lines(e));
  CHECK(fused::ir::to_line(e[0]) == "error: node 14: attributes: \"shape\" must be a list of at most 4 integers, got [1.5]");
  // A NaN attribute (MessagePack holds one) is named as one, in a list too.
  j["nodes"][j["nodes"].size() - 2]["data"]["attributes"]["shape"] = {2, std::nan("")};
  e = issues_of(j);
  REQUIRE_MESSAGE(e.size() == 1, lines(e));
  CHECK(fused::ir::to_line(e[0]) == "error: node 14: attributes: \"shape\" must be a list of at most 4 integers, got [2,NaN]");
  // A Merge listed in its Conditional's branch: refused as such, with no cycle besides.
  j = small_graph();
  j["nodes"].push_back({{"id", 14}, {"type", "Call"}, {"data", {{"op", "zeros"}, {"name", "c"}, {"attributes", {{"shape", {1}}}}}}});
  j["nodes"].push_back({{"id", 15}, {"type", "Call"}, {"data", {{"op", "gt"}, {"name", "pos"}}}});
  j["nodes"].push_back({{"id", 16}, {"type", "Conditional"}, {"data", {{"name", "pick"}, {"then", {17}}, {"else", json::array()}}}});
  j["nodes"].push_back({{"id", 17}, {"type", "Merge"}, {"data", {{"name", "m"}, {"of", 16}}}});
  j["nodes"].push_back({{"id", 18}, {"type", "Output"}, {"data", {{"name", "m"}}}});
  for (auto [source, target, slot] : {std::tuple{14, 15, 0}, {14, 15, 1}, {15, 16, 0}, {14, 17, 0}, {14, 17, 1}, {17, 18, 0}})
    j["edges"].push_back({{"source", source}, {"target", target}, {"name", "v"}, {"slot", slot}});
  j["outputs"].push_back(18);
  e = issues_of(j);
  CHECK_MESSAGE(has_issue(e, "node 17", "merge"), lines(e));
  CHECK_MESSAGE(std::none_of(e.begin(), e.end(), [](const fused::ir::issue& i) { return i.rule == "cycle"; }), lines(e));
}

TEST_CASE("bytes that are not a document are one defect, never a crash") {
  for (const std::string& bytes : {std::string(""), std::string("{"), std::string("{\"a\":1,\"a\":2}"), std::string(200, '['),
                                  std::string("\x81\xa1x\xc1", 4), std::string("null")}) {
    const fused::ir::read_result r = fused::ir::parse(bytes);
    CHECK(!r.ok());
  }
  CHECK(fused::ir::parse("{\"a\":1,\"a\":2}").errors[0].message.find("key \"a\" appears twice") != std::string::npos);
  // What the lexer would stop at or misread is named: a NUL (nlohmann ends JSON text there), UTF-16,
  // nothing at all.
  const std::string text = fused::ir::encode(fused::ir::from_json(small_graph()).doc, fused::ir::encoding::json_text);
  CHECK(fused::ir::parse(text + std::string("\0{{{", 4)).errors.at(0).message ==
        "not valid JSON: at byte " + std::to_string(text.size() + 1) + ": a NUL byte (JSON text has none)");
  CHECK(fused::ir::parse(std::string("{\0\"\0", 4)).errors.at(0).message == "UTF-16 or UTF-32 text; a graph file is UTF-8 JSON or MessagePack");
  CHECK(fused::ir::parse("\xFF\xFE{").errors.at(0).message == "UTF-16 or UTF-32 text; a graph file is UTF-8 JSON or MessagePack");
  CHECK(fused::ir::parse(" \n\t").errors.at(0).message == "the file holds only whitespace");
  CHECK(fused::ir::parse("").errors.at(0).message == "the file is empty");
  // MessagePack {"metadata": "\xff"}: a string that is not UTF-8 (JSON's lexer refuses it itself).
  const fused::ir::read_result bad_text = fused::ir::parse(std::string("\x81\xa8metadata\xa1\xff", 12));
  REQUIRE(!bad_text.ok());
  CHECK(bad_text.errors[0].message.find("not valid UTF-8") != std::string::npos);
}

TEST_CASE("Conditionals nested past max_control_depth are refused, in time linear in the file") {
  // Each Conditional in the previous one's then: depth 100.
  json j = fused::json_text::parse_ordered(R"({"metadata": {"version": "1.0"}, "nodes": [
      {"id": 1, "type": "Input", "data": {"name": "x", "dtype": "f32", "shape": [1]}}], "edges": [], "inputs": [1], "outputs": []})");
  const int depth = 100;
  for (int k = 0; k < depth; ++k) {
    const int cond = 10 + 2 * k;
    j["nodes"].push_back({{"id", cond}, {"type", "Conditional"}, {"data", {{"name", "c" + std::to_string(k)}, {"then", k + 1 < depth ? json{cond + 2} : json::array()}, {"else", json::array()}}}});
    j["edges"].push_back({{"source", 1}, {"target", cond}, {"name", "x"}, {"slot", 0}});
  }
  const std::vector<fused::ir::issue> e = issues_of(j);
  CHECK_MESSAGE(has_issue(e, "node " + std::to_string(10 + 2 * fused::ir::max_control_depth), "region"), lines(e));
  bool said = false;
  for (const auto& i : e) said = said || i.message.find("at most 64 may nest") != std::string::npos;
  CHECK_MESSAGE(said, lines(e));
}

TEST_CASE("a custom op registered by name is read, validated and lowered like a built-in one") {
  static constexpr fused::attr_field scale_attributes[] = {{"factor", fused::attr_slot::f}};
  static constexpr fused::op_def scale{
      .name = "test_scale",
      .category = "elementwise",
      .min_inputs = 1,
      .max_inputs = 1,
      .infer = [](const fused::tensor_info* const* in, int, const fused::attrs& a) -> fused::inferred {
        if (in[0]->type != fused::dtype::f32) return fused::ops::mismatch(0, "must be f32");
        if (!(a.f != 0)) return fused::ops::mismatch(-1, "factor must not be 0");
        return fused::ops::result(fused::dtype::f32, in[0]->shp);
      },
      .in_place_input = 0,
      .mode_sensitive = false,
      .kernel = [](const fused::binding&, const fused::tensor_info* const*, int, const fused::tensor_info&) { return "test_scale"; },
      .attributes = scale_attributes};
  auto& reg = fused::ops::registry::global();
  if (!reg.find("test_scale")) reg.add(scale);
  CHECK_THROWS_WITH_AS(reg.add(scale), "an op named 'test_scale' is registered already", std::invalid_argument);
  json j = small_graph();
  j["nodes"].insert(j["nodes"].begin() + 3, json{{"id", 20}, {"type", "Call"}, {"data", {{"op", "test_scale"}, {"name", "y2"}, {"attributes", {{"factor", 2.5}}}}}});
  j["edges"][2] = {{"source", 12}, {"target", 20}, {"name", "y"}, {"slot", 0}};
  j["edges"].push_back({{"source", 20}, {"target", 13}, {"name", "y2"}, {"slot", 0}});
  CHECK(issues_of(j).empty());
  const fused::ir::lowered g = fused::ir::lower(fused::ir::from_json(j).doc);
  REQUIRE(g.prog.steps.size() == 2);
  CHECK(std::string(g.prog.steps[1].op->name) == "test_scale");
  CHECK(g.prog.steps[1].at.f == 2.5);
  j["nodes"][3]["data"]["attributes"]["factor"] = 0;
  CHECK(has_issue(issues_of(j), "node 20", "shape"));
}

TEST_CASE("an exported graph runs to the logits the run-time model computes, bit for bit") {
  for (const char* name : {"tiny_a", "tiny_llama"}) {
    CAPTURE(name);
    const std::string dir = std::string(FUSED_TEST_DATA "/reference/") + name;
    const auto info = fused::decoder::load_hf_config(dir);
    fused::decoder::graph_options o{};
    o.logits = fused::decoder::logits_rows::all;
    const fused::ir::document doc = reread(fused::decoder::to_graph_file(*info.family, info.arch, o, dir), fused::ir::encoding::msgpack);
    const std::vector<std::int32_t> ids = {1, 17, 342, 5, 99, 0, 256, 3};
    const auto T = static_cast<std::int64_t>(ids.size());

    fused::decoder::model m(*info.family, info.arch, T, T, o);
    const auto weights = fused::runtime::weight_store::load(dir, m.tensors(), info.arch.tie_word_embeddings);
    m.bind(weights);
    const auto expected = m.prefill(ids);

    const fused::ir::lowered g = fused::ir::lower(doc);
    const fused::binding b = fused::ir::bind(doc, {{"tokens", T}, {"ctx", T}});
    const fused::memory_plan mem = fused::ir::plan(g.prog, b);
    std::vector<fused::wire_state> wires(g.prog.tensors.size(), fused::wire_state{true, std::nullopt});
    const auto calls = fused::runtime::lower_all(g.prog, mem, wires);
    const auto graph_weights = fused::runtime::weight_store::load(dir, g.prog.tensors, info.arch.tie_word_embeddings);
    fused::runtime::aligned_bytes state(static_cast<std::size_t>(mem.region_bytes[1])), arena(static_cast<std::size_t>(mem.arena_bytes()));
    const fused::runtime::regions r{graph_weights.table(), state.data(), arena.data()};
    const auto& input = mem.buffers[0];
    REQUIRE(fused::to_string(g.prog.tensors[0].name) == "input_ids");
    std::memcpy(arena.data() + input.offset, ids.data(), ids.size() * 4);
    fused::runtime::execute(g.prog, mem, calls, r, b);
    const auto& logits = mem.buffers[static_cast<std::size_t>(g.prog.output("logits"))];
    REQUIRE(expected.size() == static_cast<std::size_t>(T * info.arch.vocab_size));
    CHECK(std::memcmp(arena.data() + logits.offset, expected.data(), expected.size_bytes()) == 0);

    // A KV cache smaller than the tokens, and a token id past the table, are refused before a kernel runs.
    const fused::binding small = fused::ir::bind(doc, {{"tokens", T}, {"ctx", T - 1}});
    const fused::memory_plan small_mem = fused::ir::plan(g.prog, small);
    fused::runtime::aligned_bytes small_state(static_cast<std::size_t>(small_mem.region_bytes[1])),
        small_arena(static_cast<std::size_t>(small_mem.arena_bytes()));
    std::memcpy(small_arena.data() + small_mem.buffers[0].offset, ids.data(), ids.size() * 4);
    CHECK_THROWS_AS(fused::runtime::execute(g.prog, small_mem, fused::runtime::lower_all(g.prog, small_mem, wires), {graph_weights.table(), small_state.data(), small_arena.data()}, small),
                    std::out_of_range);
    const std::int32_t bad = info.arch.vocab_size;
    std::memcpy(arena.data() + input.offset, ids.data(), ids.size() * 4);  // (the run reused the input's bytes)
    std::memcpy(arena.data() + input.offset + 4, &bad, 4);
    CHECK_THROWS_WITH_AS(fused::runtime::execute(g.prog, mem, calls, r, b),
                         doctest::Contains(("token id " + std::to_string(bad) + " (row 1) is outside the embedding table").c_str()), std::out_of_range);
  }
}
