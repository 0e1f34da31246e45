// Must not compile: a static train step whose loss depends on its parameter through exp, an op with
// no backward rule. Expect: "fused: invalid program" naming the step, the op and that it has no rule.
#include <fused/ops.hpp>
#include <fused/ops/graph_ops.hpp>
#include <fused/plan/static_program.hpp>
#include <fused/train/step.hpp>

#include <type_traits>
#include <utility>

using namespace fused;

struct model {
  template <class B>
  static constexpr auto build() {
    B g;
    const auto x = g.input({"x"}, dtype::f32, shape(sym(1), 8));
    const auto w = g.state({"w"}, dtype::f32, shape(8));
    const auto h = g.apply(ops::rms_norm, {x, w}, {.f = 1e-6}, {"h"});
    const auto e = g.apply(ops::exp, {h}, {}, {"e"});
    if constexpr (std::is_same_v<B, graph_builder>) train::append_train_step(g, e, {w}, {});
    return std::move(g).finish();
  }
};

constexpr auto& plan = static_program<model, binding{{1, 4, 0, 0}}>::plan;
int main() { return static_cast<int>(plan.arena_bytes()); }
