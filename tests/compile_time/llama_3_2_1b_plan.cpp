// flags: -fconstexpr-ops-limit=4294967296 -fconstexpr-loop-limit=16777216 (g++); -fconstexpr-steps=2147483647 (clang)
// Plans and verifies all 16 layers of Llama-3.2-1B (llama3 RoPE, tied, 32 query over 8 KV heads) in
// both modes (prefill S=512, decode with KV capacity 4096) in constant evaluation: the same budget
// as qwen2_0_5b_plan.cpp. scripts/compile_time.sh measures it for 1/8/16/32 layers.
#include <fused/models/decoder_static_plan.hpp>
#include <fused/models/llama.hpp>

#include <cstdio>

#ifndef FUSED_LAYERS
#define FUSED_LAYERS 16
#endif

struct preset {
  using family = fused::llama::family;
  static constexpr fused::decoder::config value = [] {
    auto c = fused::llama::presets::llama_3_2_1b::value;
    c.num_hidden_layers = FUSED_LAYERS;
    return c;
  }();
};

using plans = fused::decoder::static_plans<preset, 512, 4096>;
static_assert(plans::prefill.failure.empty() && plans::decode.failure.empty());
static_assert(plans::prefill.arena_bytes() == plans::prefill.lower_bound);
static_assert(plans::decode.arena_bytes() == plans::decode.lower_bound);
static_assert(plans::prefill.steps.size() == 17 * FUSED_LAYERS + 4);

// Planner quality: arena / lower bound (both are compile-time constants; 1 is asserted above).
int main() {
  std::printf("Llama-3.2-1B, %d layers\n", FUSED_LAYERS);
  std::printf("prefill S=512: arena %lld B, lower bound %lld B, ratio %.4f\n", static_cast<long long>(plans::prefill.arena_bytes()),
              static_cast<long long>(plans::prefill.lower_bound),
              static_cast<double>(plans::prefill.arena_bytes()) / static_cast<double>(plans::prefill.lower_bound));
  std::printf("decode C=4096: arena %lld B, lower bound %lld B, ratio %.4f\n", static_cast<long long>(plans::decode.arena_bytes()),
              static_cast<long long>(plans::decode.lower_bound),
              static_cast<double>(plans::decode.arena_bytes()) / static_cast<double>(plans::decode.lower_bound));
  return 0;
}
