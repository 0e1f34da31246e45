// Must not compile: a Qwen2 config whose 8 query heads cannot be shared by 3 KV heads.
// Expect: "fused: shape mismatch" naming step 9 'attention', its result and the key-cache input.
#include <fused/models/decoder_plan.hpp>
#include <fused/models/qwen2_presets.hpp>

struct three_kv_heads {
  using family = fused::qwen2::family;
  static constexpr fused::decoder::config value = [] {
    auto c = fused::qwen2::presets::kjv_qwen2_4m::value;
    c.num_key_value_heads = 3;
    return c;
  }();
};

using plans = fused::decoder::static_plans<three_kv_heads, 16, 64>;
int main() { return static_cast<int>(plans::prefill.arena_bytes()); }
