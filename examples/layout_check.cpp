// The memory layout of Qwen2-0.5B, checked by the compiler: the planner runs in constant evaluation,
// its plan passes the verifier (static_assert inside static_plans), and the figures below are facts
// of the type. Change a preset or a bound and this file stops compiling with the reason.
#include <cstdio>
#include <fused/qwen2.hpp>

using plans = fused::decoder::static_plans<fused::qwen2::presets::qwen2_0_5b, /*prefill tokens*/ 512, /*KV capacity*/ 4096>;

// 24 layers x 17 steps + embed, final norm, last-position pick and lm head.
static_assert(plans::prefill.steps.size() == 24 * 17 + 4);
// The activation arena of a 512-token prefill equals the lower bound (the bytes live at the
// busiest step): no byte lost to fragmentation.
static_assert(plans::prefill.arena_bytes() == plans::prefill.lower_bound);
static_assert(plans::prefill.arena_bytes() == 24510464);
static_assert(plans::decode.arena_bytes() == 613120);
// bf16 weights (the embedding doubles as the lm head) and a bf16 KV cache of 4096 positions.
static_assert(plans::prefill.weights_bytes() == 988065536);
static_assert(plans::prefill.state_bytes() == 24 * 2 * 2 * 4096 * 64 * 2);
// Every buffer is 64-byte aligned.
static_assert([] {
  for (const auto& b : plans::prefill.buffers)
    if (b.offset % 64) return false;
  return true;
}());

int main() {
  std::printf("Qwen2-0.5B, prefill of 512 tokens, KV capacity 4096\n");
  std::printf("weights: %lld bytes\nstate (KV cache): %lld bytes\nactivation arena: %lld bytes (decode: %lld)\n",
              static_cast<long long>(plans::prefill.weights_bytes()), static_cast<long long>(plans::prefill.state_bytes()),
              static_cast<long long>(plans::prefill.arena_bytes()), static_cast<long long>(plans::decode.arena_bytes()));
  std::printf("logits offset in the arena: %lld\n", static_cast<long long>(plans::prefill.offset_of("logits")));
}
