// Must not compile: a = x + b and b = a + x wait for each other.
// Expect: "fused: cycle" naming both steps, their ops and their results.
#include <fused/ops.hpp>
#include <fused/plan/static_program.hpp>

#include <utility>

using namespace fused;

struct model {
  template <class B>
  static constexpr auto build() {
    B g;
    const auto x = g.input({"x"}, dtype::f32, shape(sym(1), 8));
    const auto b = g.declare({"b"}, dtype::f32, shape(sym(1), 8));
    const auto a = g.apply(ops::add, {x, b}, {}, {"a"});
    g.apply(ops::add, {a, x}, {}, {}, b);
    g.output("b", b);
    return std::move(g).finish();
  }
};

constexpr auto& plan = static_program<model, binding{{1, 4, 0, 0}}>::plan;
int main() { return static_cast<int>(plan.arena_bytes()); }
