// Compile-time plans of a decoder model of any family: the program built once in constant evaluation, lowered and
// memory-planned for prefill (up to MaxTokens tokens) and decode, both verified by static_assert.
// Both modes share the weights and state layouts (same program, same KV capacity).
//
//   using plans = fused::decoder::static_plans<fused::qwen2::presets::qwen2_0_5b, 512, 4096>;
//   static_assert(plans::prefill.arena_bytes() == 24510464);
//
// Compile-time only, and light on purpose (no <string>, no exceptions, no reflection): its cost is
// the compile-time budget of every static model (docs/COMPILE_TIME.md). The run-time pipeline for a
// config.json is plan_for() in decoder_plan.hpp. A preset names its family and its config:
//   struct qwen2_0_5b { using family = fused::qwen2::family; static constexpr config value{...}; };
#pragma once
#include <cstdint>

#include "../plan/planner.hpp"
#include "../plan/static_plan.hpp"
#include "decoder_graph.hpp"
#include "decoder_mode.hpp"

namespace fused::decoder {

template <class Preset, std::int64_t MaxTokens, std::int64_t Ctx, graph_options Options = graph_options{}>
struct static_plans {
  using family = typename Preset::family;
  static constexpr config cfg = Preset::value;
  static_assert(MaxTokens >= 1, "fused: a prefill must take at least one token");
  static_assert(Ctx >= MaxTokens, "fused: the KV capacity must hold at least one full prefill");
  static_assert(Ctx <= Preset::value.max_position_embeddings, "fused: the KV capacity exceeds the model's max_position_embeddings");
  static_assert(Preset::value.sliding_window == 0 || Ctx <= Preset::value.sliding_window,
                "fused: the KV capacity exceeds the model's sliding_window (only full attention is implemented)");

  static constexpr counting_builder::counts size = family::template graph<counting_builder>(cfg, Options);
  using plan_type = static_plan<size.tensors, size.steps>;
  struct both {
    error_kind error = error_kind::none;
    diagnostic message{};
    plan_type prefill{};
    plan_type decode{};
    tensor_id logits = -1;  // the program's output "logits"
  };
  static constexpr both plans = [] {
    both b{};
    const program p = family::template graph<graph_builder>(cfg, Options);
    b.error = p.error;
    if (!p.ok()) {
      b.message = diagnostic(p.message.view());
      return b;
    }
    b.logits = p.output("logits");
    const lifetimes lt = lifetimes_of(p);  // the mode-independent half of planning, done once
    b.prefill = freeze<size.tensors, size.steps>(p, plan_memory(p, lt, mode::prefill(MaxTokens, Ctx).bind()));
    b.decode = freeze<size.tensors, size.steps>(p, plan_memory(p, lt, mode::decode(Ctx).bind()));
    return b;
  }();
  static_assert(compile_error<plans.error, plans.message>::ok);
  static constexpr const plan_type& prefill = plans.prefill;
  static constexpr const plan_type& decode = plans.decode;
  static constexpr tensor_id logits = plans.logits;
  static_assert(invalid_memory_plan<plans.prefill.failure>::ok);
  static_assert(invalid_memory_plan<plans.decode.failure>::ok);
  // (Only once the program is valid: an invalid one has said so above, in one sentence.)
  static_assert(!plans.prefill.failure.empty() || plans.error != error_kind::none || plans.prefill.buffers[0].bytes == MaxTokens * 4,
                "input_ids is tensor 0");
  // One state layout for both modes: decode continues what prefill wrote.
  static_assert(plans.error != error_kind::none ||
                (plans.prefill.state_bytes() == plans.decode.state_bytes() && plans.prefill.weights_bytes() == plans.decode.weights_bytes()));
};

}  // namespace fused::decoder
