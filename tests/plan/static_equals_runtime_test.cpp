// The proof that there is one plan: Qwen2-0.5B planned in constant evaluation (static_plans, all
// 24 layers, prefill S=512 and decode with KV capacity 4096) equals, tensor by tensor, buffer by
// buffer and step by step, the plan `fused plan` computes at run time from the model's config.json
// (load_hf_config + plan_for).
#include <doctest/doctest.h>

#include <algorithm>
#include <cstring>
#include <iterator>
#include <string>
#include <vector>

#include <fused/core/text_string.hpp>
#include <fused/models/hf_config.hpp>
#include <fused/models/decoder_plan.hpp>
#include <fused/models/qwen2_presets.hpp>

namespace {

using plans = fused::decoder::static_plans<fused::qwen2::presets::qwen2_0_5b, 512, 4096>;

// Compile-time facts the run-time plan must then match too.
static_assert(plans::prefill.failure.empty() && plans::decode.failure.empty());
static_assert(plans::prefill.step_count == 17 * 24 + 4);
static_assert(plans::prefill.arena_bytes() > plans::decode.arena_bytes());

const std::string config_file = std::string(FUSED_TEST_DATA) + "/configs/qwen2-0.5b.json";

// Every difference between a static plan and a run-time one, as sentences (empty: the same plan).
template <class Static>
std::vector<std::string> differences(const Static& s, const fused::decoder::planned& r) {
  const fused::program& p = r.prog;
  const fused::memory_plan& m = r.mem;
  std::vector<std::string> out;
  if (p.tensors.size() != Static::tensor_count || m.buffers.size() != Static::tensor_count || p.steps.size() != Static::step_count ||
      m.kernels.size() != Static::step_count)
    return {"sizes differ: " + std::to_string(p.tensors.size()) + " tensors, " + std::to_string(p.steps.size()) + " steps at run time"};
  if (s.bind != m.bind) out.push_back("the bindings differ");
  for (std::size_t i = 0; i < Static::tensor_count; ++i) {
    const auto &a = s.tensors[i], &b = p.tensors[i];
    const auto &x = s.buffers[i], &y = m.buffers[i];
    const bool same = a.id == b.id && a.name == b.name && a.type == b.type && a.shp == b.shp && a.kind == b.kind &&
                      a.producer == b.producer && a.is_feed == b.is_feed && x.tensor == y.tensor && x.where == y.where &&
                      x.offset == y.offset && x.bytes == y.bytes && x.first == y.first && x.last == y.last && x.group == y.group;
    if (!same)
      out.push_back("tensor " + std::to_string(i) + " '" + fused::to_string(b.name) + "': static offset " + std::to_string(x.offset) + " bytes " +
                    std::to_string(x.bytes) + " live " + std::to_string(x.first) + ".." + std::to_string(x.last) + ", run time offset " +
                    std::to_string(y.offset) + " bytes " + std::to_string(y.bytes) + " live " + std::to_string(y.first) + ".." +
                    std::to_string(y.last));
  }
  for (std::size_t i = 0; i < Static::step_count; ++i) {
    const auto &a = s.steps[i], &b = p.steps[i];
    const char* ka = s.kernels[i] ? s.kernels[i] : "(none)";
    const char* kb = m.kernels[i] ? m.kernels[i] : "(none)";
    const bool same = a.id == b.id && std::strcmp(a.op->name, b.op->name) == 0 && a.n_inputs == b.n_inputs && std::equal(std::begin(a.inputs), std::end(a.inputs), std::begin(b.inputs)) &&
                      a.at == b.at && a.result == b.result && a.mode_sensitive == b.mode_sensitive && a.level == b.level &&
                      s.kernels[i] != nullptr && std::strcmp(ka, kb) == 0;
    if (!same)
      out.push_back("schedule position " + std::to_string(i) + ": static step " + std::to_string(a.id) + " '" + a.op->name + "' level " +
                    std::to_string(a.level) + " kernel " + ka + "; run time step " + std::to_string(b.id) + " '" + b.op->name + "' level " +
                    std::to_string(b.level) + " kernel " + kb);
  }
  for (int k = 0; k < fused::region_count; ++k)
    if (s.region_bytes[static_cast<std::size_t>(k)] != m.region_bytes[static_cast<std::size_t>(k)])
      out.push_back(std::string("region ") + fused::name_of(static_cast<fused::region>(k)) + ": static " +
                    std::to_string(s.region_bytes[static_cast<std::size_t>(k)]) + " B, run time " +
                    std::to_string(m.region_bytes[static_cast<std::size_t>(k)]) + " B");
  if (s.lower_bound != m.lower_bound) out.push_back("the lower bounds differ");
  if (s.chosen != m.chosen) out.push_back("the chosen strategies differ");
  return out;
}

void check_no_differences(const std::vector<std::string>& diffs) {
  for (std::size_t i = 0; i < diffs.size() && i < 8; ++i) MESSAGE(diffs[i]);
  CHECK(diffs.empty());
}

}  // namespace

TEST_CASE("config.json of Qwen2-0.5B reads as the preset the static plan was compiled for") {
  const fused::decoder::hf_model_info info = fused::decoder::load_hf_config(config_file);
  const auto diffs = fused::decoder::config_differences(fused::qwen2::presets::qwen2_0_5b::value, info.arch);
  INFO(diffs.size() << " fields differ" << (diffs.empty() ? "" : ": " + diffs[0]));
  CHECK(diffs.empty());
}

TEST_CASE("the compile-time plan of Qwen2-0.5B equals the run-time plan of its config.json: prefill S=512") {
  const auto cfg = fused::decoder::load_hf_config(config_file).arch;
  const auto r = fused::decoder::plan_for(fused::qwen2::entry, cfg, fused::decoder::mode::prefill(512, 4096));
  check_no_differences(differences(plans::prefill, r));
  MESSAGE("prefill 512: arena " << r.mem.arena_bytes() << " B, lower bound " << r.mem.lower_bound << " B");
}

TEST_CASE("the compile-time plan of Qwen2-0.5B equals the run-time plan of its config.json: decode, KV capacity 4096") {
  const auto cfg = fused::decoder::load_hf_config(config_file).arch;
  const auto r = fused::decoder::plan_for(fused::qwen2::entry, cfg, fused::decoder::mode::decode(4096));
  check_no_differences(differences(plans::decode, r));
  MESSAGE("decode 4096: arena " << r.mem.arena_bytes() << " B, lower bound " << r.mem.lower_bound << " B");
}

TEST_CASE("the comparison can fail: plans of other modes differ from the static ones") {
  // Guards the guard: a comparison that compared nothing would make the cases above prove nothing.
  const auto cfg = fused::decoder::load_hf_config(config_file).arch;
  const auto shorter = fused::decoder::plan_for(fused::qwen2::entry, cfg, fused::decoder::mode::prefill(256, 4096));
  CHECK(differences(plans::prefill, shorter).size() > 100);  // every token-sized buffer shrinks
  const auto smaller_cache = fused::decoder::plan_for(fused::qwen2::entry, cfg, fused::decoder::mode::decode(2048));
  const auto d = differences(plans::decode, smaller_cache);
  REQUIRE_FALSE(d.empty());
  CHECK(d.back() == "region state: static 50331648 B, run time 25165824 B");
  CHECK_FALSE(differences(plans::prefill, fused::decoder::plan_for(fused::qwen2::entry, cfg, fused::decoder::mode::decode(4096))).empty());
}
