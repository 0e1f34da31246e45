// The Qwen2 model, everything a user needs in one include: the family and its presets, the
// compile-time plans, the static and the run-time model, weights from Hugging Face checkpoints.
//
//   #include <fused/qwen2.hpp>
//   using model = fused::qwen2::static_model<fused::qwen2::presets::qwen2_0_5b, 512, 4096>;
//   static_assert(model::arena_bytes == 24510464);          // the activation arena, in bytes
#pragma once
#include "models/decoder_model.hpp"
#include "models/hf_config.hpp"
#include "models/qwen2.hpp"
#include "models/qwen2_presets.hpp"
#include "runtime/weights.hpp"

namespace fused::qwen2 {
template <class Preset, std::int64_t MaxTokens, std::int64_t Ctx, decoder::graph_options Options = decoder::graph_options{}>
using static_model = decoder::static_model<Preset, MaxTokens, Ctx, Options>;
// The run-time model of a Qwen2 config (decoder::model with the family given).
class model : public decoder::model {
 public:
  model(const config& c, std::int64_t max_tokens, std::int64_t ctx, decoder::graph_options o = {}) : decoder::model(entry, c, max_tokens, ctx, o) {}
};
}  // namespace fused::qwen2
