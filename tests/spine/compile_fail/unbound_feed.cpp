// Must not compile: a step reads tensor 7, which no feed and no step provides.
// Expect: "fused: unbound feed" naming the step, the op and the tensor id.
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
    const auto y = g.apply(ops::add, {h, tensor_id{7}}, {}, {"y"});
    g.output("y", y);
    return std::move(g).finish();
  }
};

constexpr auto& plan = static_program<model, binding{{1, 4, 0, 0}}>::plan;
int main() { return static_cast<int>(plan.arena_bytes()); }
