// The Llama model, everything a user needs in one include: the family and its presets (configs of
// released checkpoints, from their config.json), the compile-time plans, the static and the run-time
// model, weights from Hugging Face checkpoints.
//
//   #include <fused/llama.hpp>
//   using model = fused::llama::static_model<fused::llama::presets::llama_3_2_1b, 512, 4096>;
//   static_assert(model::arena_bytes == 44040192);          // the activation arena, in bytes
//   static_assert(model::state_bytes == 16 * 2 * 8 * 4096 * 64 * 2);   // bf16 KV cache: 16 layers, 8 KV heads of 64
#pragma once
#include "models/decoder_model.hpp"
#include "models/hf_config.hpp"
#include "models/llama.hpp"
#include "runtime/weights.hpp"

namespace fused::llama {

template <class Preset, std::int64_t MaxTokens, std::int64_t Ctx, decoder::graph_options Options = decoder::graph_options{}>
using static_model = decoder::static_model<Preset, MaxTokens, Ctx, Options>;

}  // namespace fused::llama
