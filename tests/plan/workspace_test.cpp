// The planned workspaces and the kernel that uses them agree: ops/linear.hpp sizes the workspace by
// its own constexpr rule (K rounded up to 32), kernels/fk_linear.h by fk_gemm_bf16_work_bytes. Two
// definitions of one rule, so every GEMM call of every Qwen2 plan is checked against the kernel's.
#include <doctest/doctest.h>

#include <fk_kernels.h>

#include <fused/core/text_string.hpp>
#include <fused/graph/builder.hpp>
#include <fused/ops.hpp>
#include <fused/plan/planner.hpp>
#include <fused/plan/verifier.hpp>
#include <fused/runtime/calls.hpp>

#include <string>
#include <string_view>
#include <vector>

#include "config_plans.hpp"

using namespace fused;

TEST_CASE("every GEMM's planned workspace is exactly what fk_gemm_bf16 asks for, in the arena, live across the steps that share it") {
  fused_test::for_each_config_plan([](const decoder::config& c, const decoder::mode& m, const decoder::planned& p) {
    const binding b = m.bind();
    runtime::lowering_error err{};
    const std::vector<runtime::call> calls =
        runtime::lower_calls(p.prog.tensors, p.prog.steps, p.mem.buffers, p.mem.kernels, b, p.prog.training, decoder::sym_tokens, &err);
    REQUIRE(err.what.empty());
    int gemms = 0;
    struct use {
      int first = -1, last = -1, steps = 0;
      tensor_id x = -1;
    };
    std::vector<use> uses(p.prog.tensors.size());  // by workspace tensor
    for (std::size_t pos = 0; pos < calls.size(); ++pos) {
      const runtime::call& k = calls[pos];
      if (k.k != runtime::kernel::gemm) continue;
      ++gemms;
      CAPTURE(k.step);
      REQUIRE(k.work.tensor >= 0);
      const buffer& w = p.mem.of(k.work.tensor);
      const auto rows = static_cast<std::size_t>(k.rows.n * b.value[k.rows.symbol]);  // the planned most
      CHECK(w.where == region::activations);
      CHECK(static_cast<std::size_t>(w.bytes) == fk_gemm_bf16_work_bytes(rows, static_cast<std::size_t>(k.sizes.cols)));
      use& u = uses[static_cast<std::size_t>(k.work.tensor)];
      const tensor_id x = p.prog.steps[pos].inputs[0];
      if (u.steps++ == 0) {
        u.first = static_cast<int>(pos);
        u.x = x;
      } else {
        CHECK(u.last == static_cast<int>(pos) - 1);  // sharers run back to back ...
        CHECK(u.x == x);                             // ... on the same input
      }
      u.last = static_cast<int>(pos);
    }
    int workspaces = 0;
    for (std::size_t t = 0; t < uses.size(); ++t) {
      if (uses[t].steps == 0) continue;
      ++workspaces;
      CHECK(p.mem.of(static_cast<tensor_id>(t)).first == uses[t].first);  // live exactly across its steps
      CHECK(p.mem.of(static_cast<tensor_id>(t)).last == uses[t].last);
    }
    // prefill: the 7 projections of every layer (the lm head sees the last position only: a GEMV),
    // with 4 workspaces: q/k/v share one (same x), the output projection, gate/up, the down projection.
    CHECK(gemms == (m.tokens > 1 ? 7 * c.num_hidden_layers : 0));
    CHECK(workspaces == (m.tokens > 1 ? 4 * c.num_hidden_layers : 0));
  });
}

TEST_CASE("the workspace rule agrees with the kernel's where K is not a multiple of 32") {
  for (const std::int64_t K : {1, 17, 31, 33, 40, 63, 65, 200}) {
    CAPTURE(K);
    graph_builder g;
    const tensor_id x = g.input({"x"}, dtype::f32, shape(sym(1), K));
    g.output("y", g.apply(ops::linear, {x, g.weight({"w"}, dtype::bf16, shape(3, K))}, {}, {"y"}));
    const program p = std::move(g).finish();
    REQUIRE(p.ok());
    binding b{};
    b.value[1] = 5;
    const memory_plan mem = plan_memory(p, b);
    REQUIRE(verify(p, mem).ok);
    REQUIRE(p.steps[0].work >= 0);
    CHECK(static_cast<std::size_t>(mem.of(p.steps[0].work).bytes) == fk_gemm_bf16_work_bytes(5, static_cast<std::size_t>(K)));
  }
}

// Consecutive linear steps on one input share a workspace; another input or a step in between does
// not. The counting builder (static plans size their arrays with it) must count the same tensors.
template <class Builder>
constexpr auto sharing_program() {
  Builder g;
  const tensor_id x = g.input({"x"}, dtype::f32, shape(sym(1), 64));
  const tensor_id a = g.apply(ops::linear, {x, g.weight({"wa"}, dtype::bf16, shape(64, 64))}, {}, {"a"});
  const tensor_id b = g.apply(ops::linear, {x, g.weight({"wb"}, dtype::bf16, shape(64, 64))}, {}, {"b"});  // shares a's
  const tensor_id c = g.apply(ops::linear, {a, g.weight({"wc"}, dtype::bf16, shape(64, 64))}, {}, {"c"});  // other input
  const tensor_id s = g.apply(ops::add, {b, c}, {}, {"s"});
  const tensor_id d = g.apply(ops::linear, {x, g.weight({"wd"}, dtype::bf16, shape(64, 64))}, {}, {"d"});  // after the add
  g.output("s", s);
  g.output("d", d);
  return std::move(g).finish();
}

TEST_CASE("consecutive linear steps on the same input share one workspace, and the counting builder agrees") {
  const program p = sharing_program<graph_builder>();
  REQUIRE(p.ok());
  auto step_named = [&](std::string_view name) -> const step& {
    for (const step& st : p.steps)
      if (p.tensor(st.result).name.str() == name) return st;
    FAIL("no step writes " << std::string(name));
    return p.steps[0];
  };
  const step &a = step_named("a"), &b = step_named("b"), &c = step_named("c"), &d = step_named("d");
  CHECK(a.work >= 0);
  CHECK(b.work == a.work);
  CHECK(c.work != a.work);
  CHECK(d.work != a.work);
  CHECK(d.work != c.work);
  CHECK(to_string(p.tensor(a.work).name.str()) == "a.work");
  constexpr counting_builder::counts n = sharing_program<counting_builder>();
  CHECK(n.tensors == p.tensors.size());  // 3 workspaces, not 4
  CHECK(n.steps == p.steps.size());
  CHECK(p.tensors.size() == 1 + 4 + 5 + 3);  // x; 4 weights; a b c s d; 3 workspaces
  // Planned: the shared workspace lives from a's position to b's, and the plan verifies.
  binding bd{};
  bd.value[1] = 32;
  const memory_plan mem = plan_memory(p, bd);
  REQUIRE(verify(p, mem).ok);
  const auto position = p.position_of_step();
  CHECK(mem.of(a.work).first == position[static_cast<std::size_t>(a.id)]);
  CHECK(mem.of(a.work).last == position[static_cast<std::size_t>(b.id)]);
}
