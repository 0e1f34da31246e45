// Must compile: the harness's control. The same shapes as the failing cases, made consistent, through
// both static entry points (a hand-built model and a Qwen2 preset).
#include <fused/models/decoder_plan.hpp>
#include <fused/models/qwen2_presets.hpp>
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
    const auto y = g.apply(ops::linear, {h, g.weight({"w"}, dtype::bf16, shape(16, 8))}, {}, {"y"});
    g.output("y", y);
    return std::move(g).finish();
  }
};

// x 4*8*4 = 128 [0,0]; h 128 [0,1]; y 4*16*4 = 256 [1,1]; y.work (the linear's bf16 workspace,
// 8 columns rounded up to 32) 4*32*2 = 256 [1,1]: position 1 holds h, y and y.work = 640 bytes.
constexpr auto& plan = static_program<model, binding{{1, 4, 0, 0}}>::plan;
static_assert(plan.arena_bytes() == 640 && plan.lower_bound == 640);

using plans = decoder::static_plans<qwen2::presets::kjv_qwen2_4m, 16, 64>;
static_assert(plans::prefill.failure.empty() && plans::decode.failure.empty());

int main() { return static_cast<int>(plan.arena_bytes() + plans::decode.arena_bytes()) & 1; }
