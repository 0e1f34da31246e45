// flags: -fconstexpr-ops-limit=4294967296 -fconstexpr-loop-limit=16777216 (g++); -fconstexpr-steps=2147483647 (clang)
// Plans and verifies all 24 layers of Qwen2-0.5B in both modes (prefill S=512, decode with KV
// capacity 4096) in constant evaluation. scripts/compile_time.sh measures it for 1/8/24/48 layers.
#include <fused/models/decoder_static_plan.hpp>
#include <fused/models/qwen2_presets.hpp>

#include <cstdio>

#ifndef FUSED_LAYERS
#define FUSED_LAYERS 24
#endif

struct preset {
  using family = fused::qwen2::family;
  static constexpr fused::decoder::config value = [] {
    auto c = fused::qwen2::presets::qwen2_0_5b::value;
    c.num_hidden_layers = FUSED_LAYERS;
    return c;
  }();
};

using plans = fused::decoder::static_plans<preset, 512, 4096>;
static_assert(plans::prefill.failure.empty() && plans::decode.failure.empty());
static_assert(plans::prefill.arena_bytes() <= plans::prefill.lower_bound * 102 / 100);
static_assert(plans::decode.arena_bytes() <= plans::decode.lower_bound * 102 / 100);
static_assert(plans::prefill.steps.size() == 17 * FUSED_LAYERS + 4);

// Planner quality: arena / lower bound (goal <= 1.02; both are compile-time constants).
int main() {
  std::printf("Qwen2-0.5B, %d layers\n", FUSED_LAYERS);
  std::printf("prefill S=512: arena %lld B, lower bound %lld B, ratio %.4f\n", static_cast<long long>(plans::prefill.arena_bytes()),
              static_cast<long long>(plans::prefill.lower_bound),
              static_cast<double>(plans::prefill.arena_bytes()) / static_cast<double>(plans::prefill.lower_bound));
  std::printf("decode C=4096: arena %lld B, lower bound %lld B, ratio %.4f\n", static_cast<long long>(plans::decode.arena_bytes()),
              static_cast<long long>(plans::decode.lower_bound),
              static_cast<double>(plans::decode.arena_bytes()) / static_cast<double>(plans::decode.lower_bound));
  return 0;
}
