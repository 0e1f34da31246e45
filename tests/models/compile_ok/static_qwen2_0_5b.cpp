// Must compile with every compiler the project is tested with: the static model of a real-size
// checkpoint, its prefill and decode instantiated (Qwen2-0.5B: 412 kernel calls per mode, unrolled).
// clang once refused it: a comma fold over the calls nested deeper than its 256-level limit.
#include <fused/qwen2.hpp>

using model = fused::qwen2::static_model<fused::qwen2::presets::qwen2_0_5b, 512, 4096>;
static_assert(model::plans::prefill.arena_bytes() == model::plans::prefill.lower_bound);

std::span<const float> first_token(model& m, std::span<const std::int32_t> prompt) {
  m.prefill(prompt);
  return m.decode(prompt.back());
}
