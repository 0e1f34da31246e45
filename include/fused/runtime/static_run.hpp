// Runs a static program (plan/static_program.hpp), control flow and all: its plan and its calls are
// compile-time constants (the calls lowered by lower_calls in constant evaluation, as the static
// decoder models' are), and execute.hpp runs them, regions included, through the same walk and the
// same invoke as every other executor.
//
//   using prog = fused::static_program<my_model, fused::binding{}>;
//   std::vector<std::byte> arena(prog::plan.arena_bytes());   // 64-byte aligned in real code
//   fused::runtime::static_run<prog>::run({weights, state, arena});
#pragma once
#include <array>
#include <cstdint>

#include "../plan/static_program.hpp"
#include "execute.hpp"

namespace fused::runtime {

template <class StaticProgram>
struct static_run {
  static constexpr auto& plan = StaticProgram::plan;
  static constexpr std::array<call, plan.step_count> calls = freeze_calls<plan.step_count>(plan, 0);
  static_assert(lowered(calls), "fused: a step of this static program has no kernel an executor implements");

  static plan_view view() { return {plan.tensors, plan.steps, plan.buffers, plan.regions, plan.carries}; }
  // One run over caller-owned regions of plan.weights_bytes(), state_bytes() and arena_bytes().
  static void run(const regions& r, std::int64_t pos0 = 0) { execute(view(), calls, r, plan.bind, pos0); }
};

}  // namespace fused::runtime
