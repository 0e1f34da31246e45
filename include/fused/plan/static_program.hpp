// The compile-time pipeline for any model: build -> schedule -> lower -> plan -> verify, for one
// binding, with every mistake surfaced as one static_assert sentence (fused/graph/diagnose.hpp).
//
// A model is a type with a static build function templated on the builder, so the same code both
// counts the program (counting_builder, for the array sizes) and builds it (graph_builder):
//
//   struct mlp {
//     template <class B> static constexpr auto build() {
//       B g;
//       auto x = g.input({"x"}, dtype::f32, shape(sym(1), 8));
//       auto y = g.apply(ops::linear, {x, g.weight({"w"}, dtype::bf16, shape(4, 8))}, {}, {"y"});
//       g.output("y", y);
//       return std::move(g).finish();
//     }
//   };
//   constexpr auto& plan = fused::static_program<mlp, fused::binding{{1, 16, 0, 0}}>::plan;
//   static_assert(plan.arena_bytes() == 768);   // x 512 + y 256
#pragma once
#include "../graph/builder.hpp"
#include "../graph/diagnose.hpp"
#include "planner.hpp"
#include "static_plan.hpp"

namespace fused {

template <class Model, binding Bind>
struct static_program {
  static constexpr counting_builder::counts size = Model::template build<counting_builder>();
  using plan_type = static_plan<size.tensors, size.steps, size.regions, size.carries>;
  struct built {
    error_kind error = error_kind::none;
    diagnostic message{};
    plan_type plan{};
  };
  static constexpr built result = [] {
    built b{};
    const program p = Model::template build<graph_builder>();
    b.error = p.error;
    if (!p.ok()) {
      b.message = diagnostic(p.message.view());
      return b;
    }
    b.plan = freeze<size.tensors, size.steps, size.regions, size.carries>(p, plan_memory(p, Bind));
    return b;
  }();
  static_assert(compile_error<result.error, result.message>::ok);
  static_assert(invalid_memory_plan<result.plan.failure>::ok);
  static constexpr const plan_type& plan = result.plan;
};

}  // namespace fused
