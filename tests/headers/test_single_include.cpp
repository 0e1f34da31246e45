// Includes nothing of fused but <fused.hpp> -- built against single_include/fused.hpp when
// FUSED_SINGLE_INCLUDE is ON, against the umbrella include/fused.hpp otherwise -- and runs the
// pipeline through it: config.json -> run-time plan -> verify, the compile-time plan, a kernel.
#include <fused.hpp>
#include <fused.hpp>  // twice: the include guard holds

#include <doctest/doctest.h>

#include <cstring>
#include <filesystem>
#include <string>

namespace {

namespace q = fused::decoder;
namespace presets = fused::qwen2::presets;

// The compile-time plan of the 4 M-parameter KJV model: 4 layers, prefill of up to 64 tokens, 512 positions.
using kjv_plans = q::static_plans<presets::kjv_qwen2_4m, 64, 512>;
static_assert(kjv_plans::prefill.failure.empty() && kjv_plans::decode.failure.empty());
static_assert(kjv_plans::prefill.steps.size() == 17 * 4 + 4);
static_assert(kjv_plans::prefill.arena_bytes() >= kjv_plans::prefill.lower_bound);

template <class Static>
void check_same_plan(const Static& s, const q::planned& r) {
  REQUIRE(r.prog.steps.size() == s.steps.size());
  REQUIRE(r.mem.buffers.size() == s.buffers.size());
  CHECK(r.mem.arena_bytes() == s.arena_bytes());
  CHECK(r.mem.lower_bound == s.lower_bound);
  CHECK(r.mem.region_bytes == s.region_bytes);
  for (std::size_t i = 0; i < s.buffers.size(); ++i) {
    CAPTURE(i);
    CHECK(r.mem.buffers[i].offset == s.buffers[i].offset);
    CHECK(r.mem.buffers[i].bytes == s.buffers[i].bytes);
    CHECK(r.mem.buffers[i].where == s.buffers[i].where);
  }
  for (std::size_t i = 0; i < s.steps.size(); ++i) {
    CAPTURE(i);
    CHECK(r.prog.steps[i].id == s.steps[i].id);
    CHECK(std::strcmp(r.mem.kernels[i], s.kernels[i]) == 0);
  }
}

}  // namespace

TEST_CASE("single header: the run-time plan equals the compile-time plan") {
  const q::config c = presets::kjv_qwen2_4m::value;
  check_same_plan(kjv_plans::prefill, q::plan_for(fused::qwen2::entry, c, q::mode::prefill(64, 512)));
  check_same_plan(kjv_plans::decode, q::plan_for(fused::qwen2::entry, c, q::mode::decode(512)));
}

TEST_CASE("single header: Qwen2-0.5B from its config.json, planned and verified") {
  const std::filesystem::path file = std::filesystem::path(FUSED_TEST_DATA) / "configs" / "qwen2-0.5b.json";
  const fused::decoder::hf_model_info info = fused::decoder::load_hf_config(file);
  CHECK(fused::decoder::config_differences(presets::qwen2_0_5b::value, info.arch).empty());

  for (const q::mode m : {q::mode::prefill(512, 4096), q::mode::decode(4096)}) {
    CAPTURE(q::name_of(m.ph));
    const q::planned p = q::plan_for(fused::qwen2::entry, info.arch, m);
    CHECK(p.prog.steps.size() == 17 * 24 + 4);
    CHECK(fused::verify(p.prog, p.mem).ok);
    CHECK(p.mem.arena_bytes() >= p.mem.lower_bound);
    CHECK(p.mem.arena_bytes() * 100 <= p.mem.lower_bound * 102);  // the planner's quality goal
  }
  // A KV capacity beyond max_position_embeddings is refused, with the numbers.
  CHECK_THROWS_WITH_AS(q::plan_for(fused::qwen2::entry, info.arch, q::mode::decode(1 << 20)),
                       doctest::Contains("exceeds max_position_embeddings 131072"), std::invalid_argument);
}

TEST_CASE("single header: the C kernels are part of it") {
  CHECK(fk_f32_to_bf16_1(1.5f) == 0x3FC0);
  CHECK(fk_bf16_to_f32_1(0x3FC0) == 1.5f);
  const float logits[] = {0.25f, -1.0f, 3.5f, 3.25f, 0.0f};
  CHECK(fk_argmax(logits, 5) == 2);
}
