// Must not compile: a tensor is declared (to be written later) and read, but no step ever writes it.
// Expect: "fused: unbound feed" naming the tensor.
#include <fused/ops.hpp>
#include <fused/plan/static_program.hpp>

#include <utility>

using namespace fused;

struct model {
  template <class B>
  static constexpr auto build() {
    B g;
    const auto x = g.input({"x"}, dtype::f32, shape(sym(1), 8));
    const auto bias = g.declare({"bias"}, dtype::f32, shape(sym(1), 8));
    g.output("y", g.apply(ops::add, {x, bias}, {}, {"y"}));
    return std::move(g).finish();
  }
};

constexpr auto& plan = static_program<model, binding{{1, 4, 0, 0}}>::plan;
int main() { return static_cast<int>(plan.arena_bytes()); }
