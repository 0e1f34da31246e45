// The Qwen2 model, everything a user needs in one include: configs and presets, the compile-time
// plans, the static and the run-time model, weights from Hugging Face checkpoints.
//
//   #include <fused/qwen2.hpp>
//   using model = fused::qwen2::static_model<fused::qwen2::presets::qwen2_0_5b, 512, 4096>;
//   static_assert(model::arena_bytes == 24510464);          // the activation arena, in bytes
#pragma once
#include "io/hf_config.hpp"
#include "models/qwen2_config.hpp"
#include "models/qwen2_graph.hpp"
#include "models/qwen2_mode.hpp"
#include "models/qwen2_model.hpp"
#include "models/qwen2_plan.hpp"
#include "models/qwen2_presets.hpp"
#include "runtime/weights.hpp"
