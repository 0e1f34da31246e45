// Canary layouts (fused/plan/canaries.hpp): every Qwen2 plan moved apart for canaries still passes
// the verifier, which then also proves that no buffer live at the same time touches a canary; and a
// plan that puts a buffer inside a live neighbour's canary is rejected.
#include <doctest/doctest.h>

#include <fused/core/text_string.hpp>
#include <fused/plan/canaries.hpp>

#include <cstdint>
#include <string>

#include "config_plans.hpp"

using namespace fused;

TEST_CASE("canaries: every Qwen2 plan, moved apart, passes the verifier with its canaries checked") {
  fused_test::for_each_config_plan([](const decoder::config&, const decoder::mode&, const decoder::planned& p) {
    const memory_plan d = with_canaries(p.mem);
    const verdict v = verify(p.prog, d);
    CHECK_MESSAGE(v.ok, to_string(v.what));
    CHECK(d.canary == canary_bytes);
    // weights untouched; state and arena grow by at most one canary per buffer
    CHECK(d.region_bytes[0] == p.mem.region_bytes[0]);
    for (int r = 1; r < region_count; ++r) {
      CHECK(d.region_bytes[static_cast<std::size_t>(r)] > p.mem.region_bytes[static_cast<std::size_t>(r)]);
      CHECK(d.region_bytes[static_cast<std::size_t>(r)] <=
            p.mem.region_bytes[static_cast<std::size_t>(r)] + canary_bytes * static_cast<std::int64_t>(p.mem.buffers.size()));
    }
    // in-place chains still share their bytes
    for (const buffer& b : d.buffers)
      if (b.group >= 0 && b.group != b.tensor) CHECK(b.offset == d.of(b.group).offset);
  });
}

TEST_CASE("canaries: a buffer that starts inside a live neighbour's canary is rejected") {
  const decoder::planned p = decoder::plan_for(fused::qwen2::entry, fused_test::config_named("qwen2-0.5b"), decoder::mode::decode(4096));
  memory_plan d = with_canaries(p.mem);
  REQUIRE(verify(p.prog, d).ok);
  // Two activation buffers live at the same time, not an in-place pair: put the upper one right
  // after the lower one's bytes, on its canary (64-byte aligned, inside the region, no data overlap).
  bool moved = false;
  for (std::size_t i = 0; i < d.buffers.size() && !moved; ++i)
    for (std::size_t j = 0; j < d.buffers.size() && !moved; ++j) {
      buffer &a = d.buffers[i], &b = d.buffers[j];
      if (i == j || a.where != region::activations || b.where != region::activations || a.group == b.group) continue;
      if (a.last < b.first || b.last < a.first || b.offset <= a.offset) continue;
      b.offset = a.offset + align_up(a.bytes);
      moved = true;
    }
  REQUIRE(moved);
  const verdict v = verify(p.prog, d);
  CHECK_FALSE(v.ok);
  CHECK(to_string(v.what).find("share bytes in the activation arena while both are live") != std::string::npos);
}
