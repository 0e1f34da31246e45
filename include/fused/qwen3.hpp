// The Qwen3 model, everything a user needs in one include: the family and its presets (configs of
// released checkpoints, from their config.json), the compile-time plans, the static and the run-time
// model, weights from Hugging Face checkpoints.
//
//   #include <fused/qwen3.hpp>
//   using model = fused::qwen3::static_model<fused::qwen3::presets::qwen3_0_6b, 512, 4096>;
//   static_assert(model::arena_bytes == 17825792);          // the activation arena, in bytes
//   static_assert(model::state_bytes == 28 * 2 * 8 * 4096 * 128 * 2);  // bf16 KV cache: 28 layers, 8 KV heads of 128
#pragma once
#include "models/decoder_model.hpp"
#include "models/hf_config.hpp"
#include "models/qwen3.hpp"
#include "runtime/weights.hpp"

namespace fused::qwen3 {

template <class Preset, std::int64_t MaxTokens, std::int64_t Ctx, decoder::graph_options Options = decoder::graph_options{}>
using static_model = decoder::static_model<Preset, MaxTokens, Ctx, Options>;

}  // namespace fused::qwen3
