// The ops graph files add (ops/graph_ops.hpp), run through the whole way in: a document, validated,
// lowered, planned, executed by runtime::execute. Expected values are worked out by hand; among
// them the FX design's examples: a relu MLP, and `x > 0 ? relu(x) : sigmoid(x)` merged.
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>
#include <map>
#include <string>
#include <vector>

#include <fused/io/safetensors.hpp>
#include <fused/ir/format.hpp>
#include <fused/ir/lower.hpp>
#include <fused/ir/plan.hpp>
#include <fused/runtime/execute.hpp>
#include <fused/runtime/weights.hpp>

#include "graph_helpers.hpp"

using namespace graph_test;

TEST_CASE("FX example: a relu MLP, worked out by hand") {
  // h = relu(x W1^T + b1), y = h W2^T + b2; small integers and halves are exact in bf16.
  const std::vector<std::uint16_t> w1 = {bf16(1), bf16(0), bf16(0), bf16(1), bf16(1), bf16(1)};  // [3, 2]
  const std::vector<std::uint16_t> b1 = {bf16(0), bf16(0), bf16(-5)};
  const std::vector<std::uint16_t> w2 = {bf16(1), bf16(1), bf16(1)};  // [1, 3]
  const std::vector<std::uint16_t> b2 = {bf16(0.5f)};
  const std::string file = (std::filesystem::temp_directory_path() / "fused_relu_mlp.safetensors").string();
  auto bytes = [](const std::vector<std::uint16_t>& v) { return std::as_bytes(std::span(v)); };
  fused::io::write_safetensors(file, {{"w1", fused::io::dtype::BF16, {3, 2}, bytes(w1)},
                                      {"b1", fused::io::dtype::BF16, {3}, bytes(b1)},
                                      {"w2", fused::io::dtype::BF16, {1, 3}, bytes(w2)},
                                      {"b2", fused::io::dtype::BF16, {1}, bytes(b2)}});
  graph g;
  g.input("x", "f32", {2, 2}).param("w1", {3, 2}).param("b1", {3}).param("w2", {1, 3}).param("b2", {1});
  g.call("h", "linear", {"x", "w1", "b1"}).call("a", "relu", {"h"}).call("y", "linear", {"a", "w2", "b2"}).output("y");
  // x = [[1, -2], [3, 4]]: h = [[1, -2, -6], [3, 4, 2]], relu = [[1, 0, 0], [3, 4, 2]], y = [1.5, 9.5].
  check_close(run(g.doc(), {{"x", {1, -2, 3, 4}}}, file).at("y"), {1.5f, 9.5f});
  std::filesystem::remove(file);
}

TEST_CASE("FX example: x > 0 ? relu(x) : sigmoid(x), merged by where") {
  graph g;
  g.input("x", "f32", {4}).call("zero", "zeros", {}, {{"shape", {1}}}).call("positive", "gt", {"x", "zero"});
  g.call("r", "relu", {"x"}).call("s", "sigmoid", {"x"}).call("y", "where", {"positive", "r", "s"}).output("y").output("positive");
  const values out = run(g.doc(), {{"x", {2, -1, 0, 0.5f}}});
  check_close(out.at("positive"), {1, 0, 0, 1});
  check_close(out.at("y"), {2, 1 / (1 + std::exp(1.0f)), 0.5f, 0.5f});  // sigmoid(-1) = 0.268941, sigmoid(0) = 0.5
}

TEST_CASE("elementwise ops, broadcasting and comparisons") {
  graph g;
  g.input("a", "f32", {2, 3}).input("b", "f32", {3});
  for (const char* op : {"sub", "mul", "div", "eq", "ne", "lt", "le", "ge"}) g.call(op, op, {"a", "b"}).output(op);
  for (const char* op : {"neg", "exp", "silu", "gelu"}) g.call(op, op, {"b"}).output(op);
  const values out = run(g.doc(), {{"a", {1, 2, 3, 4, 5, 6}}, {"b", {1, 2, 4}}});
  check_close(out.at("sub"), {0, 0, -1, 3, 3, 2});
  check_close(out.at("mul"), {1, 4, 12, 4, 10, 24});
  check_close(out.at("div"), {1, 1, 0.75f, 4, 2.5f, 1.5f});
  check_close(out.at("eq"), {1, 1, 0, 0, 0, 0});
  check_close(out.at("ne"), {0, 0, 1, 1, 1, 1});
  check_close(out.at("lt"), {0, 0, 1, 0, 0, 0});
  check_close(out.at("le"), {1, 1, 1, 0, 0, 0});
  check_close(out.at("ge"), {1, 1, 0, 1, 1, 1});
  check_close(out.at("neg"), {-1, -2, -4});
  check_close(out.at("exp"), {2.7182818f, 7.3890561f, 54.59815f}, 1e-4f);
  check_close(out.at("silu"), {0.7310586f, 1.7615942f, 3.9280552f}, 1e-5f);
  check_close(out.at("gelu"), {0.8413447f, 1.9544997f, 3.9998733f}, 1e-5f);
}

TEST_CASE("binary ops read a broadcast input as a span where they can, else by the host function") {
  using fused::shape, fused::span_of, fused::binding;
  const binding b{};
  const shape result(2, 3, 4);
  auto span = [&](const shape& in) { const auto s = span_of(in, result, b); return std::vector<std::int64_t>{s.ok, s.inner, s.extent}; };
  CHECK(span(shape(2, 3, 4)) == std::vector<std::int64_t>{1, 1, 24});  // same shape
  CHECK(span(shape(1)) == std::vector<std::int64_t>{1, 1, 1});         // a scalar
  CHECK(span(shape(4)) == std::vector<std::int64_t>{1, 1, 4});         // a row
  CHECK(span(shape(3, 1)) == std::vector<std::int64_t>{1, 4, 3});      // a column of each [3, 4]
  CHECK(span(shape(2, 3, 1)) == std::vector<std::int64_t>{1, 4, 6});
  CHECK(span(shape(2, 1, 4)).front() == 0);  // a stretched dim between two kept ones
  CHECK(span(shape(5)).front() == 0);        // does not broadcast at all

  // The same sums both ways: [2, 1, 2] - [2, 2, 2] through the host function, [2, 1] - [2, 2] as a span.
  graph g;
  g.input("a", "f32", {2, 1, 2}).input("b", "f32", {2, 2, 2}).input("c", "f32", {2, 1}).input("d", "f32", {2, 2});
  g.call("host", "sub", {"a", "b"}).call("span", "sub", {"c", "d"}).call("flags", "gt", {"d", "c"}).output("host").output("span").output("flags");
  const values out = run(g.doc(), {{"a", {10, 20, 30, 40}}, {"b", {1, 2, 3, 4, 5, 6, 7, 8}}, {"c", {10, 20}}, {"d", {1, 12, 30, 4}}});
  check_close(out.at("host"), {9, 18, 7, 16, 25, 34, 23, 32});
  check_close(out.at("span"), {9, -2, -10, 16});
  check_close(out.at("flags"), {0, 1, 1, 0});
  const fused::ir::lowered l = fused::ir::lower(fused::ir::from_json(g.doc()).doc);
  const fused::memory_plan mem = fused::ir::plan(l.prog, fused::binding{});
  std::vector<std::string> kernels;
  for (const char* k : mem.kernels) kernels.push_back(k);
  CHECK(kernels == std::vector<std::string>{"host", "fk_binary_f32", "fk_binary_f32"});
}

TEST_CASE("softmax, layer_norm, reductions and matmul") {
  graph g;
  g.input("x", "f32", {2, 3}).input("m", "f32", {3, 2});
  g.call("softmax", "softmax", {"x"}).output("softmax");
  g.call("sum0", "sum", {"x"}, {{"axis", 0}, {"keepdim", 0}}).output("sum0");
  g.call("mean1", "mean", {"x"}, {{"axis", -1}, {"keepdim", 1}}).output("mean1");
  g.call("max1", "max", {"x"}, {{"axis", 1}, {"keepdim", 0}}).output("max1");
  g.call("matmul", "matmul", {"x", "m"}).output("matmul");
  const values out = run(g.doc(), {{"x", {1, 2, 3, 6, 4, 5}}, {"m", {1, 0, 0, 1, 1, 1}}});
  // softmax([1, 2, 3]) = e^(k-3) / (e^-2 + e^-1 + 1)
  const float z = std::exp(-2.0f) + std::exp(-1.0f) + 1;
  check_close(out.at("softmax"), {std::exp(-2.0f) / z, std::exp(-1.0f) / z, 1 / z, 1 / z, std::exp(-2.0f) / z, std::exp(-1.0f) / z}, 1e-6f);
  check_close(out.at("sum0"), {7, 6, 8});
  check_close(out.at("mean1"), {2, 5});
  check_close(out.at("max1"), {3, 6});
  check_close(out.at("matmul"), {4, 5, 11, 9});
}

TEST_CASE("max propagates a NaN wherever it stands in the row, as torch.amax does") {
  graph g;
  g.input("x", "f32", {3, 3});
  g.call("max1", "max", {"x"}, {{"axis", 1}, {"keepdim", 0}}).output("max1");
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const values out = run(g.doc(), {{"x", {nan, 1, 2, 3, nan, 1, 4, 5, nan}}});
  REQUIRE(out.at("max1").size() == 3);
  for (float m : out.at("max1")) CHECK(std::isnan(m));
}

TEST_CASE("reshape, transpose, concat, slice, full, arange") {
  graph g;
  g.input("x", "f32", {2, 3});
  g.call("reshape", "reshape", {"x"}, {{"shape", {3, -1}}}).output("reshape");
  g.call("keep", "reshape", {"x"}, {{"shape", {0, 3, 1}}}).output("keep");
  g.call("transpose", "transpose", {"x"}, {{"perm", {1, 0}}}).output("transpose");
  g.call("concat", "concat", {"x", "x"}, {{"axis", 1}}).output("concat");
  g.call("slice", "slice", {"x"}, {{"axis", 1}, {"start", 1}, {"end", 3}}).output("slice");
  g.call("full", "full", {}, {{"value", 2.5}, {"shape", {2}}}).output("full");
  g.call("arange", "arange", {}, {{"end", 4}}).output("arange");
  const values out = run(g.doc(), {{"x", {1, 2, 3, 4, 5, 6}}});
  check_close(out.at("reshape"), {1, 2, 3, 4, 5, 6});
  check_close(out.at("keep"), {1, 2, 3, 4, 5, 6});
  check_close(out.at("transpose"), {1, 4, 2, 5, 3, 6});
  check_close(out.at("concat"), {1, 2, 3, 1, 2, 3, 4, 5, 6, 4, 5, 6});
  check_close(out.at("slice"), {2, 3, 5, 6});
  check_close(out.at("full"), {2.5f, 2.5f});
  check_close(out.at("arange"), {0, 1, 2, 3});
}

TEST_CASE("layer_norm with bf16 parameters") {
  const std::vector<std::uint16_t> w = {bf16(1), bf16(2)}, b = {bf16(0), bf16(1)};
  const std::string file = (std::filesystem::temp_directory_path() / "fused_layer_norm.safetensors").string();
  fused::io::write_safetensors(file, {{"w", fused::io::dtype::BF16, {2}, std::as_bytes(std::span(w))}, {"b", fused::io::dtype::BF16, {2}, std::as_bytes(std::span(b))}});
  graph g;
  g.input("x", "f32", {1, 2}).param("w", {2}).param("b", {2}).call("y", "layer_norm", {"x", "w", "b"}, {{"eps", 0.0001}}).output("y");
  // x = [1, 3]: mean 2, var 1, normalized [-1, 1] / sqrt(1 + 1e-4); y = [-0.99995, 2 * 0.99995 + 1].
  const float s = 1 / std::sqrt(1.0001f);
  check_close(run(g.doc(), {{"x", {1, 3}}}, file).at("y"), {-s, 2 * s + 1}, 1e-5f);
  std::filesystem::remove(file);
}

TEST_CASE("the new ops' shape rules refuse what they cannot compute, naming the node") {
  auto issues = [](const graph& g) { return fused::ir::validate(fused::ir::from_json(g.doc()).doc); };
  graph broadcast;
  broadcast.input("a", "f32", {2, 3}).input("b", "f32", {2}).call("c", "mul", {"a", "b"}).output("c");
  auto e = issues(broadcast);
  REQUIRE(e.size() == 1);
  CHECK(fused::ir::to_line(e[0]) == "error: node 2: shape: 'mul' (input 1 from node 1): shape [2] does not broadcast with [2, 3] (dim 2 vs 3)");
  graph perm;
  perm.input("a", "f32", {2, 3}).call("t", "transpose", {"a"}, {{"perm", {0, 0}}}).output("t");
  CHECK(issues(perm).at(0).rule == "shape");
  graph where_bool;
  where_bool.input("a", "f32", {2}).call("w", "where", {"a", "a", "a"}).output("w");
  CHECK(issues(where_bool).at(0).message.find("the condition must be bool") != std::string::npos);
  graph huge;
  huge.input("a", "f32", {2147483648LL, 2147483648LL, 2}).call("r", "reshape", {"a"}, {{"shape", {-1}}}).output("r");
  CHECK(issues(huge).at(0).message.find("holds more than 2^50 elements") != std::string::npos);
  graph far;
  far.call("c", "full", {}, {{"value", 1e300}, {"shape", {2}}}).output("c");
  CHECK(issues(far).at(0).message.find("outside f32's range") != std::string::npos);
  graph f32_param;
  f32_param.input("a", "f32", {2});
  json j = f32_param.doc();
  j["nodes"].push_back({{"id", 9}, {"type", "GetAttr"}, {"data", {{"target", "w"}, {"dtype", "f32"}, {"shape", {2}}}}});
  j["nodes"].push_back({{"id", 10}, {"type", "Call"}, {"data", {{"op", "mul"}, {"name", "y"}}}});
  j["nodes"].push_back({{"id", 11}, {"type", "Output"}, {"data", {{"name", "y"}}}});
  j["edges"] = {{{"source", 0}, {"target", 10}, {"name", "a"}, {"slot", 0}}, {{"source", 9}, {"target", 10}, {"name", "w"}, {"slot", 1}},
                {{"source", 10}, {"target", 11}, {"name", "y"}, {"slot", 0}}};
  j["outputs"] = {11};
  const auto f = fused::ir::validate(fused::ir::from_json(j).doc);
  CHECK(std::any_of(f.begin(), f.end(), [](const auto& i) { return i.where == "node 9" && i.rule == "type"; }));
}
