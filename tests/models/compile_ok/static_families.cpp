// The layout examples of the umbrella headers (include/fused/qwen3.hpp, llama.hpp, mistral.hpp), as
// their comments print them: each include gives static models of its presets, planned and verified
// by the compiler, with these figures. Keep the comments and this file in step.
#include <fused/llama.hpp>
#include <fused/mistral.hpp>
#include <fused/qwen3.hpp>

namespace qwen3_example {
using model = fused::qwen3::static_model<fused::qwen3::presets::qwen3_0_6b, 512, 4096>;
static_assert(model::arena_bytes == 17825792);
static_assert(model::state_bytes == 28 * 2 * 8 * 4096 * 128 * 2);
}  // namespace qwen3_example

namespace llama_example {
using model = fused::llama::static_model<fused::llama::presets::llama_3_2_1b, 512, 4096>;
static_assert(model::arena_bytes == 44040192);
static_assert(model::state_bytes == 16 * 2 * 8 * 4096 * 64 * 2);
}  // namespace llama_example

namespace mistral_example {
using model = fused::mistral::static_model<fused::mistral::presets::mistral_7b_v0_3, 512, 4096>;
static_assert(model::arena_bytes == 79691776);
static_assert(model::state_bytes == 32 * 2 * 8 * 4096 * 128 * 2);
}  // namespace mistral_example

// The arenas equal their lower bounds, as Qwen2-0.5B's does.
static_assert(qwen3_example::model::plans::prefill.arena_bytes() == qwen3_example::model::plans::prefill.lower_bound);
static_assert(llama_example::model::plans::prefill.arena_bytes() == llama_example::model::plans::prefill.lower_bound);
static_assert(mistral_example::model::plans::prefill.arena_bytes() == mistral_example::model::plans::prefill.lower_bound);
