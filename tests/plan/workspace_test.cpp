// The planned workspaces and the kernel that uses them agree: ops/linear.hpp sizes the workspace by
// its own constexpr rule (K rounded up to 32), kernels/fk_linear.h by fk_gemm_bf16_work_bytes. Two
// definitions of one rule, so every GEMM call of every Qwen2 plan is checked against the kernel's.
#include <doctest/doctest.h>

#include <fk_kernels.h>

#include <fused/graph/builder.hpp>
#include <fused/ops.hpp>
#include <fused/plan/planner.hpp>
#include <fused/plan/verifier.hpp>
#include <fused/runtime/calls.hpp>

#include "config_plans.hpp"

using namespace fused;

TEST_CASE("every GEMM's planned workspace is exactly what fk_gemm_bf16 asks for, in the arena, live at its step only") {
  fused_test::for_each_config_plan([](const qwen2::config& c, const qwen2::mode& m, const qwen2::planned& p) {
    const binding b = m.bind();
    runtime::lowering_error err{};
    const std::vector<runtime::call> calls =
        runtime::lower_calls(p.prog.tensors, p.prog.steps, p.mem.buffers, p.mem.kernels, b, qwen2::sym_tokens, &err);
    REQUIRE(err.what.empty());
    int gemms = 0;
    for (std::size_t pos = 0; pos < calls.size(); ++pos) {
      const runtime::call& k = calls[pos];
      if (k.k != runtime::kernel::gemm) continue;
      ++gemms;
      CAPTURE(k.step);
      REQUIRE(k.work.tensor >= 0);
      const buffer& w = p.mem.of(k.work.tensor);
      const auto rows = static_cast<std::size_t>(k.rows.n * b.value[k.rows.symbol]);  // the planned most
      CHECK(w.where == region::activations);
      CHECK(static_cast<std::size_t>(w.bytes) == fk_gemm_bf16_work_bytes(rows, static_cast<std::size_t>(k.size[0])));
      CHECK(w.first == static_cast<int>(pos));
      CHECK(w.last == static_cast<int>(pos));
    }
    // prefill: the 7 projections of every layer (the lm head sees the last position only: a GEMV)
    CHECK(gemms == (m.tokens > 1 ? 7 * c.num_hidden_layers : 0));
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
