// Control flow planned, not interpreted (program::regions): Conditional, Loop and Merge in graph
// files, the builder, the scheduler, the planner and the verifier. Expected values and arenas are
// worked out by hand; among them the FX design's examples, `x > 0 ? relu(x) : sigmoid(x)` and
// `x = x + 1, i = i + 1 while i < 10`, and a loop holding a conditional.
#include <doctest/doctest.h>

#include <cmath>
#include <string>
#include <vector>

#include <fused/graph/builder.hpp>
#include <fused/ir/export.hpp>
#include <fused/ir/format.hpp>
#include <fused/ir/lower.hpp>
#include <fused/ops/registry.hpp>
#include <fused/plan/planner.hpp>
#include <fused/plan/static_program.hpp>
#include <fused/plan/svg.hpp>
#include <fused/plan/verifier.hpp>
#include <fused/runtime/static_run.hpp>

#include "graph_helpers.hpp"

using namespace graph_test;

namespace {

// x > 0 ? relu(x) : sigmoid(x) on one value, as a Conditional with a Merge.
graph relu_or_sigmoid() {
  graph g;
  g.input("x", "f32", {1}).call("zero", "zeros", {}, {{"shape", {1}}}).call("positive", "gt", {"x", "zero"});
  g.conditional("pick", "positive").call("r", "relu", {"x"}).call("s", "sigmoid", {"x"});
  g.body("pick", "then", {"r"}).body("pick", "else", {"s"});
  g.merge("y", "pick", {"r", "s"}).output("y");
  return g;
}

// x = x + 1, i = i + 1 while i < 10 (i from 0), bounded by max_trips.
graph count_to_ten(std::int64_t max_trips = 100) {
  graph g;
  g.input("x", "f32", {1}).call("i0", "zeros", {}, {{"shape", {1}}});
  g.call("one", "full", {}, {{"value", 1.0}, {"shape", {1}}}).call("ten", "full", {}, {{"value", 10.0}, {"shape", {1}}});
  g.loop("count", max_trips).merge("x_now", "count", {"x"}).merge("i_now", "count", {"i0"});
  g.call("running", "lt", {"i_now", "ten"}).call("x_next", "add", {"x_now", "one"}).call("i_next", "add", {"i_now", "one"});
  g.edge("x_next", "x_now", 1).edge("i_next", "i_now", 1).edge("running", "count", 0);
  g.body("count", "body", {"x_now", "i_now", "running", "x_next", "i_next"});
  g.output("x_now").output("i_now");
  return g;
}

// The generation loop's ops in a graph file: argmax and next_position of an input, then a loop that
// stores its count at its count until not_in stops it at 3: ids [0, 1, 2, -1, -1], count 3.
graph store_until_three(std::int64_t slots = 5, json stop_ids = json::array({3})) {
  graph g;
  g.input("scores", "f32", {2, 3}).call("best", "argmax", {"scores"}).call("after", "next_position", {"scores"});
  g.call("ids0", "full_int", {}, {{"value", -1}, {"shape", {slots}}}).call("count0", "full_int", {}, {{"value", 0}, {"shape", {1}}});
  g.loop("fill", 5).merge("ids", "fill", {"ids0"}).merge("count", "fill", {"count0"});
  g.call("go_on", "not_in", {"count"}, {{"values", std::move(stop_ids)}}).call("ids_next", "store_at", {"ids", "count", "count"});
  g.call("count_next", "increment", {"count"}, {{"by", 1}});
  g.edge("ids_next", "ids", 1).edge("count_next", "count", 1).edge("go_on", "fill", 0);
  g.body("fill", "body", {"ids", "count", "go_on", "ids_next", "count_next"});
  g.output("ids").output("count").output("best").output("after");
  return g;
}

fused::ir::analysis analyzed(const json& j) {
  const fused::ir::read_result r = fused::ir::from_json(j);
  REQUIRE_MESSAGE(r.ok(), fused::ir::report(r.errors));
  return fused::ir::analyze(r.doc);
}

// Whether the validator names `rule` at node `id` (-1: anywhere) among its errors.
bool refused(const json& j, const std::string& rule, std::int64_t id = -1) {
  const fused::ir::analysis an = analyzed(j);
  for (const auto& e : an.errors)
    if (e.rule == rule && (id < 0 || e.where == fused::ir::node_where(id))) return true;
  MESSAGE("errors: " << fused::ir::report(an.errors));
  return false;
}

}  // namespace

TEST_CASE("FX example: x > 0 ? relu(x) : sigmoid(x) as a Conditional, both ways") {
  const graph g = relu_or_sigmoid();
  check_close(run(g.doc(), {{"x", {2.5f}}}).at("y"), {2.5f});
  check_close(run(g.doc(), {{"x", {-1.0f}}}).at("y"), {1 / (1 + std::exp(1.0f))});  // sigmoid(-1) = 0.268941
  check_close(run(g.doc(), {{"x", {0.0f}}}).at("y"), {0.5f});                        // not > 0: sigmoid(0)
}

TEST_CASE("FX example: x = x + 1, i = i + 1 while i < 10") {
  const values out = run(count_to_ten().doc(), {{"x", {-3.0f}}});
  check_close(out.at("i_now"), {10.0f});
  check_close(out.at("x_now"), {7.0f});
  // The bound ends the loop first when it is smaller: 4 trips.
  const values bounded = run(count_to_ten(4).doc(), {{"x", {0.0f}}});
  check_close(bounded.at("i_now"), {4.0f});
  check_close(bounded.at("x_now"), {4.0f});
  // No trip at all: the loop's values are its initial ones.
  const values none = run(count_to_ten(0).doc(), {{"x", {5.0f}}});
  check_close(none.at("x_now"), {5.0f});
  check_close(none.at("i_now"), {0.0f});
}

TEST_CASE("the generation loop's ops in a graph file: argmax, next_position, a loop storing ids until a stop") {
  const values out = run(store_until_three().doc(), {{"scores", {1, 5, 2, 7, 7, 0}}});
  check_close(out.at("ids"), {0, 1, 2, -1, -1});
  check_close(out.at("count"), {3});
  check_close(out.at("best"), {1, 0});  // the first of two equal largest
  check_close(out.at("after"), {2});    // pos0 0 + 2 rows
  // No stop id and two slots: the third store is outside the buffer, refused naming the step.
  CHECK_THROWS_WITH_AS(run(store_until_three(2, json::array()).doc(), {{"scores", {1, 5, 2, 7, 7, 0}}}),
                       doctest::Contains("'store_at' (fk_store_at): the index is outside the buffer"), std::out_of_range);
  // A stop id that is no id is refused by the shape rule, naming the node.
  CHECK(refused(store_until_three(5, json::array({-4})).doc(), "shape"));
}

TEST_CASE("a loop holding a conditional: x = x > 5 ? x - 1 : x + 3, ten trips") {
  graph g;
  g.input("x", "f32", {1}).call("i0", "zeros", {}, {{"shape", {1}}});
  g.call("one", "full", {}, {{"value", 1.0}, {"shape", {1}}}).call("three", "full", {}, {{"value", 3.0}, {"shape", {1}}});
  g.call("five", "full", {}, {{"value", 5.0}, {"shape", {1}}}).call("ten", "full", {}, {{"value", 10.0}, {"shape", {1}}});
  g.loop("steps", 50).merge("x_now", "steps", {"x"}).merge("i_now", "steps", {"i0"}).call("running", "lt", {"i_now", "ten"});
  g.call("big", "gt", {"x_now", "five"}).conditional("which", "big").call("down", "sub", {"x_now", "one"}).call("up", "add", {"x_now", "three"});
  g.body("which", "then", {"down"}).body("which", "else", {"up"}).merge("x_next", "which", {"down", "up"});
  g.call("i_next", "add", {"i_now", "one"}).edge("x_next", "x_now", 1).edge("i_next", "i_now", 1).edge("running", "steps", 0);
  g.body("steps", "body", {"x_now", "i_now", "running", "big", "which", "x_next", "i_next"});  // the branches hold down, up
  g.output("x_now").output("i_now");
  // By hand from 0: 3 6 5 8 7 6 5 8 7 6.
  const values out = run(g.doc(), {{"x", {0.0f}}});
  check_close(out.at("x_now"), {6.0f});
  check_close(out.at("i_now"), {10.0f});
}

TEST_CASE("nested loops: an outer loop of 3 trips, each running an inner loop of 4") {
  graph g;
  g.input("x", "f32", {1}).call("one", "full", {}, {{"value", 1.0}, {"shape", {1}}});
  g.loop("outer", 3).merge("x_outer", "outer", {"x"});
  g.loop("inner", 4).merge("x_inner", "inner", {"x_outer"}).call("x_inner_next", "add", {"x_inner", "one"}).edge("x_inner_next", "x_inner", 1);
  g.body("inner", "body", {"x_inner", "x_inner_next"});
  g.call("x_outer_next", "add", {"x_inner", "one"}).edge("x_outer_next", "x_outer", 1);  // 5 per outer trip
  g.body("outer", "body", {"x_outer", "inner", "x_outer_next"}).output("x_outer");
  check_close(run(g.doc(), {{"x", {1.0f}}}).at("x_outer"), {16.0f});
}

TEST_CASE("edge cases: an empty branch, nested conditionals, carries that swap") {
  {  // x > 0 ? x : relu(-x): the then branch is empty and yields a value from outside it
    graph g;
    g.input("x", "f32", {2}).call("zero", "zeros", {}, {{"shape", {1}}}).call("total", "sum", {"x"}, {{"axis", 0}, {"keepdim", 1}});
    g.call("positive", "gt", {"total", "zero"}).conditional("pick", "positive").call("flipped", "neg", {"x"}).call("r", "relu", {"flipped"});
    g.body("pick", "else", {"flipped", "r"}).merge("y", "pick", {"x", "r"}).output("y");
    check_close(run(g.doc(), {{"x", {3.0f, -1.0f}}}).at("y"), {3.0f, -1.0f});
    check_close(run(g.doc(), {{"x", {-3.0f, 1.0f}}}).at("y"), {3.0f, 0.0f});
  }
  {  // sign(x) as nested conditionals: x > 0 ? 1 : (x < 0 ? -1 : 0)
    graph g;
    g.input("x", "f32", {1}).call("zero", "zeros", {}, {{"shape", {1}}}).call("positive", "gt", {"x", "zero"});
    g.conditional("outer", "positive").call("plus", "full", {}, {{"value", 1.0}, {"shape", {1}}});
    g.call("negative", "lt", {"x", "zero"}).conditional("inner", "negative").call("minus", "full", {}, {{"value", -1.0}, {"shape", {1}}});
    g.call("nought", "zeros", {}, {{"shape", {1}}}).body("inner", "then", {"minus"}).body("inner", "else", {"nought"});
    g.merge("rest", "inner", {"minus", "nought"}).body("outer", "then", {"plus"}).body("outer", "else", {"negative", "inner", "rest"});
    g.merge("sign", "outer", {"plus", "rest"}).output("sign");
    check_close(run(g.doc(), {{"x", {2.0f}}}).at("sign"), {1.0f});
    check_close(run(g.doc(), {{"x", {-2.0f}}}).at("sign"), {-1.0f});
    check_close(run(g.doc(), {{"x", {0.0f}}}).at("sign"), {0.0f});
  }
  {  // a and b swap on every trip (both copied at once), and a counter: 3 trips leave them swapped
    graph g;
    g.input("a", "f32", {1}).input("b", "f32", {1}).call("one", "full", {}, {{"value", 1.0}, {"shape", {1}}});
    g.loop("swap", 3).merge("a_now", "swap", {"a"}).merge("b_now", "swap", {"b"}).merge("n_now", "swap", {"one"});
    g.call("n_next", "add", {"n_now", "one"}).edge("b_now", "a_now", 1).edge("a_now", "b_now", 1).edge("n_next", "n_now", 1);
    g.body("swap", "body", {"a_now", "b_now", "n_now", "n_next"}).output("a_now").output("b_now").output("n_now");
    const values out = run(g.doc(), {{"a", {5.0f}}, {"b", {7.0f}}});
    check_close(out.at("a_now"), {7.0f});
    check_close(out.at("b_now"), {5.0f});
    check_close(out.at("n_now"), {4.0f});
  }
}

TEST_CASE("a next value the trip's last step reads is not overwritten before it is carried") {
  // x_next = x + 1 and y_next = x_next + 1 (the body's last step, add in place over its first
  // input): were y_next to take x_next's bytes, the carry of x would read y_next. 4 trips from x = 0.
  graph g;
  g.input("x", "f32", {1}).call("one", "full", {}, {{"value", 1.0}, {"shape", {1}}});
  g.loop("walk", 4).merge("x_now", "walk", {"x"}).merge("y_now", "walk", {"x"});
  g.call("x_next", "add", {"x_now", "one"}).call("y_next", "add", {"x_next", "one"});
  g.edge("x_next", "x_now", 1).edge("y_next", "y_now", 1).body("walk", "body", {"x_now", "y_now", "x_next", "y_next"});
  g.output("x_now").output("y_now");
  const values out = run(g.doc(), {{"x", {0.0f}}});
  check_close(out.at("x_now"), {4.0f});
  check_close(out.at("y_now"), {5.0f});
  // And the verifier refuses a plan that puts y_next on x_next's bytes.
  const fused::ir::read_result r = fused::ir::from_json(g.doc());
  REQUIRE(r.ok());
  const fused::ir::lowered low = fused::ir::lower(r.doc);
  fused::memory_plan m = fused::ir::plan(low.prog, fused::ir::bind(r.doc, {}));
  fused::tensor_id x_next = -1, y_next = -1;
  for (const auto& t : low.prog.tensors) {
    if (fused::to_string(t.name) == "x_next") x_next = t.id;
    if (fused::to_string(t.name) == "y_next") y_next = t.id;
  }
  REQUIRE(m.of(x_next).offset != m.of(y_next).offset);
  m.buffers[static_cast<std::size_t>(y_next)].offset = m.of(x_next).offset;
  m.buffers[static_cast<std::size_t>(y_next)].group = m.of(x_next).group;
  const fused::verdict v = fused::verify(low.prog, m);
  CHECK_FALSE(v.ok);
  CHECK(fused::to_string(v.what).find("share bytes in the activation arena while both are live") != std::string::npos);
}

TEST_CASE("the plan's picture shows control flow: a band per branch or loop body, labelled") {
  const fused::ir::read_result r = fused::ir::from_json(count_to_ten(100).doc());
  REQUIRE(r.ok());
  const fused::ir::lowered g = fused::ir::lower(r.doc);
  const fused::memory_plan mem = fused::ir::plan(g.prog, fused::ir::bind(r.doc, {}));
  const std::string svg = fused::plan_to_svg(g.prog, mem);
  std::size_t bands = 0;
  for (std::size_t at = svg.find("class=\"region\""); at != std::string::npos; at = svg.find("class=\"region\"", at + 1)) ++bands;
  CHECK(bands == 1);
  CHECK(svg.find("loop 0, at most 100 trips: positions") != std::string::npos);
  CHECK(svg.find("condition &apos;running&apos;") != std::string::npos);  // the title, XML-escaped
}

TEST_CASE("control flow survives JSON -> MessagePack -> JSON") {
  const json j = count_to_ten().doc();
  const fused::ir::read_result r = fused::ir::from_json(j);
  REQUIRE(r.ok());
  const std::string bytes = fused::ir::encode(r.doc, fused::ir::encoding::msgpack);
  const fused::ir::read_result back = fused::ir::parse(bytes);
  REQUIRE_MESSAGE(back.ok(), fused::ir::report(back.errors));
  CHECK(fused::ir::encode(back.doc, fused::ir::encoding::json_text) == fused::ir::encode(r.doc, fused::ir::encoding::json_text));
  check_close(run(fused::json_text::parse_ordered(fused::ir::encode(back.doc, fused::ir::encoding::json_text)), {{"x", {0.0f}}}).at("i_now"), {10.0f});
}

TEST_CASE("a program with control flow exports to a graph file that runs the same") {
  auto exported = [](const json& j) {
    const fused::ir::read_result r = fused::ir::from_json(j);
    REQUIRE(r.ok());
    const fused::ir::lowered low = fused::ir::lower(r.doc);
    return fused::json_text::parse_ordered(fused::ir::encode(fused::ir::from_program(low.prog, {}), fused::ir::encoding::json_text));
  };
  const json counted = exported(count_to_ten().doc());
  CHECK(analyzed(counted).ok());
  check_close(run(counted, {{"x", {-3.0f}}}).at("x_now"), {7.0f});
  check_close(run(counted, {{"x", {-3.0f}}}).at("i_now"), {10.0f});
  const json picked = exported(relu_or_sigmoid().doc());
  check_close(run(picked, {{"x", {2.5f}}}).at("y"), {2.5f});
  check_close(run(picked, {{"x", {-1.0f}}}).at("y"), {1 / (1 + std::exp(1.0f))});
}

TEST_CASE("damaged control flow is refused naming the node and the rule") {
  {  // the condition is not one bool
    graph g = relu_or_sigmoid();
    g.call("wide", "zeros", {}, {{"shape", {2}}});
    for (json& e : g.doc()["edges"])
      if (e["target"] == g.id("pick")) e["source"] = g.id("wide");
    CHECK(refused(g.doc(), "condition", g.id("pick")));
  }
  {  // a branch value read outside its branch without a Merge
    graph g = relu_or_sigmoid();
    g.output("r");
    CHECK(refused(g.doc(), "scope", g.id("output:r")));
  }
  {  // a node listed in two bodies
    graph g = relu_or_sigmoid();
    g.body("pick", "else", {"r"});
    CHECK(refused(g.doc(), "region", g.id("r")));
  }
  {  // a Merge whose branches yield different types
    graph g;
    g.input("x", "f32", {2}).call("zero", "zeros", {}, {{"shape", {1}}}).call("positive", "gt", {"zero", "zero"});
    g.conditional("pick", "positive").call("r", "relu", {"x"}).call("s", "sum", {"x"}, {{"axis", 0}, {"keepdim", 0}});
    g.body("pick", "then", {"r"}).body("pick", "else", {"s"}).merge("y", "pick", {"r", "s"}).output("y");
    CHECK(refused(g.doc(), "merge", g.id("y")));
  }
  {  // a Merge of something that is not a Conditional or Loop
    graph g = relu_or_sigmoid();
    g.node("y")["data"]["of"] = g.id("x");
    CHECK(refused(g.doc(), "merge", g.id("y")));
  }
  {  // a Loop with no bound
    graph g = count_to_ten();
    g.node("count")["data"].erase("max_trips");
    const fused::ir::read_result r = fused::ir::from_json(g.doc());
    REQUIRE_FALSE(r.ok());
    CHECK(r.errors[0].where == fused::ir::node_where(g.id("count")));
    CHECK(r.errors[0].message.find("max_trips") != std::string::npos);
  }
  {  // a Loop's carry read in the body before the Loop's Merge lists it: Merge outside the body
    graph g = count_to_ten();
    json& list = g.node("count")["data"]["body"];
    list.erase(list.begin());  // x_now no longer in the body
    CHECK(refused(g.doc(), "merge", g.id("x_now")));
  }
  {  // a Conditional inside its own branch
    graph g = relu_or_sigmoid();
    g.body("pick", "then", {"pick"});
    CHECK(refused(g.doc(), "region", g.id("pick")));
  }
  {  // a Loop with no Call in its body
    graph g;
    g.input("x", "f32", {1}).loop("idle", 3).merge("x_now", "idle", {"x"}).edge("x_now", "x_now", 1).body("idle", "body", {"x_now"}).output("x_now");
    CHECK(refused(g.doc(), "loop-body", g.id("idle")));
  }
  {  // a cycle that is not through a Loop's Merge is still a cycle
    graph g = relu_or_sigmoid();
    g.edge("y", "r", 1);
    CHECK(!analyzed(g.doc()).ok());
  }
  {  // a loop's body reading a value made from the loop's own result: a cycle through the loop
    graph g = count_to_ten();
    g.call("after", "relu", {"x_now"}).edge("after", "x_next", 1);  // x_next = add(x_now, after)
    for (json& e : g.doc()["edges"])
      if (e["target"] == g.id("x_next") && e["slot"] == 1 && e["source"] == g.id("one")) e["source"] = g.id("after");
    g.doc()["edges"].erase(g.doc()["edges"].end() - 1);
    CHECK(refused(g.doc(), "cycle"));
  }
  {  // a branch reading a value made from its conditional's merge
    graph g = relu_or_sigmoid();
    g.call("after", "relu", {"y"});
    for (json& e : g.doc()["edges"])
      if (e["target"] == g.id("r")) e["source"] = g.id("after");
    CHECK(refused(g.doc(), "cycle"));
  }
  {  // an edge out of a Conditional
    graph g = relu_or_sigmoid();
    g.edge("pick", "r", 1);
    CHECK(refused(g.doc(), "control-edges", g.id("pick")));
  }
}

TEST_CASE("planner: a conditional's arena holds the larger branch, not both") {
  // x [1024] f32 (4 KiB), the condition sum(x) > 0 (64 B). Then: a = relu(x), b = relu(a); else:
  // c = sigmoid(x), d = exp(c), e = relu(d); the merge y sits on b and e (host ops work out of
  // place). By hand, in schedule order a b | c d e | y: at c, x (read by c), the condition (read by
  // the merge), b (it waits for the merge) and c are live: 3 x 4 KiB + 64 B, the most at any step;
  // then's a and b share nothing with else's c and d only because the branches never both run.
  graph g;
  g.input("x", "f32", {1024}).call("zero", "zeros", {}, {{"shape", {1}}}).call("gate", "sum", {"x"}, {{"axis", 0}, {"keepdim", 1}});
  g.call("positive", "gt", {"gate", "zero"}).conditional("pick", "positive");
  g.call("a", "relu", {"x"}).call("b", "relu", {"a"}).call("c", "sigmoid", {"x"}).call("d", "exp", {"c"}).call("e", "relu", {"d"});
  g.body("pick", "then", {"a", "b"}).body("pick", "else", {"c", "d", "e"}).merge("y", "pick", {"b", "e"}).output("y");
  const fused::ir::read_result r = fused::ir::from_json(g.doc());
  REQUIRE(r.ok());
  const fused::ir::lowered low = fused::ir::lower(r.doc);
  const fused::memory_plan m = fused::ir::plan(low.prog, fused::ir::bind(r.doc, {}));
  CHECK(fused::verify(low.prog, m).ok);
  CHECK(m.arena_bytes() == 3 * 4096 + 64);
  CHECK(m.lower_bound == 3 * 4096 + 64);
  // The merge moves nothing: y sits where both b and e are.
  const fused::tensor_id y = low.prog.output("y");
  const auto& by_name = [&](const char* name) -> const fused::buffer& {
    for (const auto& t : low.prog.tensors)
      if (fused::to_string(t.name) == name) return m.of(t.id);
    FAIL("no tensor " << name);
    return m.of(0);
  };
  CHECK(m.of(y).offset == by_name("b").offset);
  CHECK(m.of(y).offset == by_name("e").offset);
  // And the run agrees with the sum's sign: sum(x) > 0 -> relu(relu(x)).
  std::vector<float> x(1024, 0.5f);
  x[0] = -2;
  const values out = run(g.doc(), {{"x", x}});
  CHECK(out.at("y")[0] == 0.0f);
  CHECK(out.at("y")[1] == 0.5f);
}

TEST_CASE("planner: a loop's arena does not grow with its trip count") {
  // The count_to_ten loop, 1 trip or a million: the same plan. By hand, in schedule order i0 one ten
  // | copies x_now i_now | body: running (the header) x_next i_next: i_now takes i0's bytes (its
  // copy is i0's last reader); x_next and i_next are written over their carries in place (add
  // works in place, and nothing later in the trip reads x_now or i_now); one and ten, read in the
  // body, live to its end. At the copies: x, i0/i_now, one, ten, x_now; at running: i_now, one,
  // ten, x_now, running: 5 x 64 B at most.
  for (const std::int64_t trips : {1, 10, 1000000}) {
    const fused::ir::read_result r = fused::ir::from_json(count_to_ten(trips).doc());
    REQUIRE(r.ok());
    const fused::ir::lowered low = fused::ir::lower(r.doc);
    const fused::memory_plan m = fused::ir::plan(low.prog, fused::ir::bind(r.doc, {}));
    CHECK(fused::verify(low.prog, m).ok);
    CHECK(m.arena_bytes() == 5 * 64);
    auto offset = [&](const char* name) {
      for (const auto& t : low.prog.tensors)
        if (fused::to_string(t.name) == name) return m.of(t.id).offset;
      return std::int64_t{-1};
    };
    CHECK(offset("x_next") == offset("x_now"));
    CHECK(offset("i_next") == offset("i_now"));
  }
}

namespace {
// A program with a conditional and a loop, built and planned in constant evaluation: a static
// program (plan/static_program.hpp), counted by counting_builder, built by graph_builder.
struct controlled_model {
  template <class B>
  static constexpr auto build() {
    using namespace fused;
    B b;
    const shape one{dim{1, 0}}, wide{dim{256, 0}};
    const tensor_id flag = b.input({"flag"}, dtype::boolean, one);
    const tensor_id x = b.input({"x"}, dtype::f32, wide);
    const int pick = b.conditional(flag);
    b.set_region(pick);
    const tensor_id a = b.apply(ops::add, {x, x}, {}, {"a"});
    b.set_region(pick + 1);
    const tensor_id c = b.apply(ops::add, {x, x}, {}, {"c"});
    const tensor_id d = b.apply(ops::add, {c, x}, {}, {"d"});
    b.set_region(-1);
    const tensor_id y = b.merge(pick, a, d, {"y"});
    const int again = b.loop(8);
    const tensor_id z = b.carry(again, y, {"z"});
    b.set_region(again);
    const tensor_id z_next = b.apply(ops::add, {z, x}, {}, {"z_next"});
    b.set_region(-1);
    b.carry_next(z, z_next);
    b.output("z", z);
    return std::move(b).finish();
  }
};
using controlled = fused::static_program<controlled_model, fused::binding{}>;
}  // namespace

TEST_CASE("static: a program with control flow plans and verifies in constant evaluation") {
  // In schedule order a | c d | y | z (the carry's copy) | z_next. d sits on c (add works in place
  // over its first input), the merge y on a and d, z on y (the copy is y's last reader), z_next on
  // z (the carry updated in place: nothing later in the trip reads z). So x and one group of 1 KiB
  // each, and flag (64 B, live to the merge) -> 2 KiB + 64 B.
  static_assert(controlled::plan.arena_bytes() == 2 * 1024 + 64);
  static_assert(controlled::plan.offset_of("z_next") == controlled::plan.offset_of("z"));
  static_assert(controlled::plan.offset_of("y") == controlled::plan.offset_of("a"));
  static_assert(controlled::plan.offset_of("y") == controlled::plan.offset_of("d"));
  static_assert(controlled::plan.regions.size() == 3 && controlled::plan.carries.size() == 1);
  static_assert(controlled::plan.regions[2].kind == fused::region_kind::loop_body && controlled::plan.regions[2].count == 1);
  CHECK(controlled::plan.arena_bytes() == 2 * 1024 + 64);
  const fused::program p = controlled_model::build<fused::graph_builder>();
  REQUIRE(p.ok());
  CHECK(p.regions[0].first == 0);
  CHECK(p.regions[1].first == 1);
  CHECK(p.regions[1].count == 2);
}

namespace {
// The FX examples as static programs (C++ builders): x > 0 ? relu(x) : sigmoid(x), and a loop of
// x = x > 5 ? x - 1 : x + 3, i = i + 1 while i < 10 (the two FX examples nested).
struct relu_or_sigmoid_model {
  template <class B>
  static constexpr auto build() {
    using namespace fused;
    B b;
    const shape one{dim{1, 0}};
    const tensor_id x = b.input({"x"}, dtype::f32, one);
    const tensor_id zero = b.apply(ops::zeros, {}, attrs_of_shape(1), {"zero"});
    const tensor_id positive = b.apply(ops::gt, {x, zero}, {}, {"positive"});
    const int pick = b.conditional(positive);
    b.set_region(pick);
    const tensor_id r = b.apply(ops::relu, {x}, {}, {"r"});
    b.set_region(pick + 1);
    const tensor_id s = b.apply(ops::sigmoid, {x}, {}, {"s"});
    b.set_region(-1);
    b.output("y", b.merge(pick, r, s, {"y"}));
    return std::move(b).finish();
  }
  static constexpr fused::attrs attrs_of_shape(std::int64_t n) {
    fused::attrs a{};
    a.i[0] = n;
    for (int k = 1; k < 4; ++k) a.i[k] = fused::no_value;
    return a;
  }
};

struct stepping_model {
  template <class B>
  static constexpr auto build() {
    using namespace fused;
    B b;
    const shape one{dim{1, 0}};
    auto constant = [&](double v, const char* name) {
      attrs a = relu_or_sigmoid_model::attrs_of_shape(1);
      a.f = v;
      return b.apply(ops::full, {}, a, {name});
    };
    const tensor_id x = b.input({"x"}, dtype::f32, one);
    const tensor_id i0 = constant(0, "i0"), one_ = constant(1, "one"), three = constant(3, "three"), five = constant(5, "five"),
                    ten = constant(10, "ten");
    const int steps = b.loop(50);
    const tensor_id x_now = b.carry(steps, x, {"x_now"}), i_now = b.carry(steps, i0, {"i_now"});
    b.set_region(steps);
    b.loop_while(steps, b.apply(ops::lt, {i_now, ten}, {}, {"running"}));
    const int which = b.conditional(b.apply(ops::gt, {x_now, five}, {}, {"big"}));
    b.set_region(which);
    const tensor_id down = b.apply(ops::sub, {x_now, one_}, {}, {"down"});
    b.set_region(which + 1);
    const tensor_id up = b.apply(ops::add, {x_now, three}, {}, {"up"});
    b.set_region(steps);
    const tensor_id x_next = b.merge(which, down, up, {"x_next"});
    const tensor_id i_next = b.apply(ops::add, {i_now, one_}, {}, {"i_next"});
    b.set_region(-1);
    b.carry_next(x_now, x_next);
    b.carry_next(i_now, i_next);
    b.output("x_now", x_now);
    b.output("i_now", i_now);
    return std::move(b).finish();
  }
};

// Runs static program P on f32 inputs, returning its outputs (f32) by name.
template <class P>
values run_static(const values& inputs) {
  using run = fused::runtime::static_run<P>;
  constexpr auto& plan = run::plan;
  fused::runtime::aligned_bytes arena(static_cast<std::size_t>(plan.arena_bytes()) + 64), state(64);
  for (const auto& t : plan.tensors)
    if (t.kind == fused::role::input) {
      const std::vector<float>& v = inputs.at(fused::to_string(t.name));
      std::memcpy(arena.data() + plan.of(t.id).offset, v.data(), v.size() * 4);
    }
  run::run({nullptr, state.data(), arena.data()});
  values out;
  for (const auto& t : plan.tensors)
    if (t.kind == fused::role::output) {
      const auto* p = reinterpret_cast<const float*>(arena.data() + plan.of(t.id).offset);
      out[fused::to_string(t.name)].assign(p, p + t.shp.elements(plan.bind));
    }
  return out;
}
}  // namespace

TEST_CASE("static: the FX examples run from compile-time plans and calls, as the graph files do") {
  using relu_or_sigmoid_static = fused::static_program<relu_or_sigmoid_model, fused::binding{}>;
  using stepping_static = fused::static_program<stepping_model, fused::binding{}>;
  // Every step has a C kernel now (no host function): the calls are the C generator's too.
  static_assert(fused::runtime::lowers_to_kernels(fused::runtime::static_run<relu_or_sigmoid_static>::calls));
  static_assert(fused::runtime::lowers_to_kernels(fused::runtime::static_run<stepping_static>::calls));
  static_assert(stepping_static::plan.regions.size() == 3);
  for (const float x : {2.5f, -1.0f, 0.0f}) {
    const values from_file = run(relu_or_sigmoid().doc(), {{"x", {x}}});
    const values from_static = run_static<relu_or_sigmoid_static>({{"x", {x}}});
    CHECK(from_static.at("y") == from_file.at("y"));  // bit for bit
  }
  const values stepped = run_static<stepping_static>({{"x", {0.0f}}});
  check_close(stepped.at("x_now"), {6.0f});  // by hand from 0: 3 6 5 8 7 6 5 8 7 6
  check_close(stepped.at("i_now"), {10.0f});
}

TEST_CASE("builder: control flow's scopes are checked") {
  using namespace fused;
  graph_builder b;
  const shape one{dim{1, 0}};
  const tensor_id flag = b.input({"flag"}, dtype::boolean, one);
  const tensor_id x = b.input({"x"}, dtype::f32, one);
  const int pick = b.conditional(flag);
  b.set_region(pick);
  const tensor_id a = b.apply(ops::add, {x, x}, {}, {"a"});
  b.set_region(-1);
  b.apply(ops::add, {a, x}, {}, {"escaped"});  // a leaves its branch without a merge
  const program p = std::move(b).finish();
  REQUIRE_FALSE(p.ok());
  CHECK(to_string(p.message).find("made inside a branch or loop the step is not in") != std::string::npos);

  graph_builder c;
  const tensor_id not_bool = c.input({"x"}, dtype::f32, one);
  CHECK(c.conditional(not_bool) < 0);
  CHECK(to_string(c.peek().message).find("one bool") != std::string::npos);
}
