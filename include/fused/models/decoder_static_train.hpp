// A decoder's train step as a compile-time plan: the family's forward pass in training mode, its
// loss, backward and AdamW steps (train/step.hpp) built in constant evaluation, planned for a batch
// of `Sequences` x `Tokens` tokens and verified by static_assert like prefill and decode. An op on
// the way to the loss without a backward rule stops the compiler with its sentence.
//
//   using train = fused::decoder::static_train_plan<my_preset, 256, 8>;
//   static_assert(train::plan.arena_bytes() < (64 << 20));
//   fused::runtime::static_run<train>::run({nullptr, state, arena});   // one step (runtime/static_run.hpp)
#pragma once
#include <cstdint>
#include <type_traits>

#include "../plan/static_program.hpp"
#include "decoder_graph.hpp"

namespace fused::decoder {

template <class Preset, std::int64_t Tokens, std::int64_t Sequences = 1, train::options Train = train::options{}>
struct static_train_plan {
  using family = typename Preset::family;
  static constexpr config cfg = Preset::value;
  static_assert(Tokens >= train::min_sequence_tokens, "fused: a train step's sequences need at least 2 tokens (the loss predicts each next one)");
  static_assert(Sequences >= 1, "fused: a train step needs at least one sequence");
  static_assert(Tokens <= Preset::value.max_position_embeddings, "fused: a train step's sequences exceed the model's max_position_embeddings");
  static_assert(Preset::value.sliding_window == 0 || Tokens <= Preset::value.sliding_window,
                "fused: a train step's sequences exceed the model's sliding_window (only full attention is implemented)");

  static constexpr graph_options options{.logits = logits_rows::all, .training = true, .train = Train, .packed = Sequences > 1 ? Tokens : 0};
  static constexpr binding bind = [] {
    binding b{};
    b.value[sym_tokens] = Sequences * Tokens;
    b.value[sym_ctx] = Tokens;
    return b;
  }();
  // The program as static_program builds it. The backward and optimizer steps follow from the
  // forward program (graph/reverse.hpp), which a counting builder does not keep: the sizes come from
  // building the program itself.
  struct model {
    template <class B>
    static constexpr auto build() {
      const program p = family::template graph<graph_builder>(cfg, options);
      if constexpr (std::is_same_v<B, counting_builder>) {
        return counting_builder::counts{.tensors = p.tensors.size(), .steps = p.steps.size(), .regions = p.regions.size(), .carries = p.carries.size()};
      } else {
        return p;
      }
    }
  };
  using pipeline = static_program<model, bind>;
  using plan_type = typename pipeline::plan_type;
  static constexpr const plan_type& plan = pipeline::plan;
};

}  // namespace fused::decoder
