// Must not compile: a linear whose weight has 16 input features reads an input with 8.
// Expect: "fused: shape mismatch" and the step, the op, the result, the culprit input and both shapes.
#include <fused/ops.hpp>
#include <fused/plan/static_program.hpp>

#include <utility>

using namespace fused;

struct model {
  template <class B>
  static constexpr auto build() {
    B g;
    const auto x = g.input({"x"}, dtype::f32, shape(sym(1), 8));
    const auto h = g.apply(ops::rms_norm, {x, g.weight({"n"}, dtype::bf16, shape(8))}, {.f = 1e-6}, {"h"});
    const auto y = g.apply(ops::linear, {h, g.weight({"w"}, dtype::bf16, shape(8, 16))}, {}, {"y"});
    g.output("y", y);
    return std::move(g).finish();
  }
};

constexpr auto& plan = static_program<model, binding{{1, 4, 0, 0}}>::plan;
int main() { return static_cast<int>(plan.arena_bytes()); }
