// The Mistral model, everything a user needs in one include: the family and its presets (configs of
// released checkpoints, from their config.json), the compile-time plans, the static and the run-time
// model, weights from Hugging Face checkpoints.
//
//   #include <fused/mistral.hpp>
//   using model = fused::mistral::static_model<fused::mistral::presets::mistral_7b_v0_3, 512, 4096>;
//   static_assert(model::arena_bytes == 79691776);          // the activation arena, in bytes
//   static_assert(model::state_bytes == 32 * 2 * 8 * 4096 * 128 * 2);  // bf16 KV cache: 32 layers, 8 KV heads of 128
#pragma once
#include "models/decoder_model.hpp"
#include "models/hf_config.hpp"
#include "models/mistral.hpp"
#include "runtime/weights.hpp"

namespace fused::mistral {

template <class Preset, std::int64_t MaxTokens, std::int64_t Ctx, decoder::graph_options Options = decoder::graph_options{}>
using static_model = decoder::static_model<Preset, MaxTokens, Ctx, Options>;

}  // namespace fused::mistral
