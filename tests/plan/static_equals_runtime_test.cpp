// The proof that there is one plan: Qwen2-0.5B, Llama-3.2-1B and Qwen3-0.6B planned in constant
// evaluation (static_plans, all layers, prefill S=512 and decode with KV capacity 4096) equal,
// tensor by tensor, buffer by buffer and step by step, the plans `fused plan` computes at run time
// from the models' config.json (load_hf_config + plan_for) in tests/data/configs.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstring>
#include <iterator>
#include <string>
#include <vector>

#include <fused/core/text_string.hpp>
#include <fused/models/hf_config.hpp>
#include <fused/models/decoder_plan.hpp>
#include <fused/models/llama.hpp>
#include <fused/models/qwen2_presets.hpp>
#include <fused/models/qwen3.hpp>

namespace {

using plans = fused::decoder::static_plans<fused::qwen2::presets::qwen2_0_5b, 512, 4096>;

// Compile-time facts the run-time plan must then match too.
static_assert(plans::prefill.failure.empty() && plans::decode.failure.empty());
static_assert(plans::prefill.step_count == 17 * 24 + 4);
static_assert(plans::prefill.arena_bytes() > plans::decode.arena_bytes());

using llama_plans = fused::decoder::static_plans<fused::llama::presets::llama_3_2_1b, 512, 4096>;
static_assert(llama_plans::prefill.step_count == 17 * 16 + 4);
static_assert(llama_plans::prefill.arena_bytes() == llama_plans::prefill.lower_bound);
using qwen3_plans = fused::decoder::static_plans<fused::qwen3::presets::qwen3_0_6b, 512, 4096>;
static_assert(qwen3_plans::prefill.step_count == 19 * 28 + 4);
static_assert(qwen3_plans::prefill.arena_bytes() == qwen3_plans::prefill.lower_bound);

const std::string config_file = std::string(FUSED_TEST_DATA) + "/configs/qwen2-0.5b.json";

// One checkpoint: its preset's static plans, its config.json, its family.
struct qwen2_0_5b {
  using preset = fused::qwen2::presets::qwen2_0_5b;
  using static_plans = plans;
  static constexpr const char* config = "qwen2-0.5b.json";
  static constexpr const fused::decoder::family_entry& entry = fused::qwen2::entry;
};
struct llama_3_2_1b {
  using preset = fused::llama::presets::llama_3_2_1b;
  using static_plans = llama_plans;
  static constexpr const char* config = "llama-3.2-1b.json";
  static constexpr const fused::decoder::family_entry& entry = fused::llama::entry;
};
struct qwen3_0_6b {
  using preset = fused::qwen3::presets::qwen3_0_6b;
  using static_plans = qwen3_plans;
  static constexpr const char* config = "qwen3-0.6b.json";
  static constexpr const fused::decoder::family_entry& entry = fused::qwen3::entry;
};
#define FUSED_CHECKPOINTS qwen2_0_5b, llama_3_2_1b, qwen3_0_6b

fused::decoder::hf_model_info info_of(const char* config) {
  return fused::decoder::load_hf_config(std::string(FUSED_TEST_DATA) + "/configs/" + config);
}

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

TEST_CASE_TEMPLATE("config.json reads as the preset the static plan was compiled for, of its family", C, FUSED_CHECKPOINTS) {
  const fused::decoder::hf_model_info info = info_of(C::config);
  const auto diffs = fused::decoder::config_differences(C::preset::value, info.arch);
  INFO(std::string(C::config) << ": " << diffs.size() << " fields differ" << (diffs.empty() ? "" : ": " + diffs[0]));
  CHECK(diffs.empty());
  REQUIRE(info.family != nullptr);
  CHECK(info.family->model_type == C::preset::family::model_type);
  CHECK(info.family->model_type == C::entry.model_type);
}

TEST_CASE_TEMPLATE("the compile-time plan equals the run-time plan of its config.json: prefill S=512", C, FUSED_CHECKPOINTS) {
  const auto info = info_of(C::config);
  const auto r = fused::decoder::plan_for(*info.family, info.arch, fused::decoder::mode::prefill(512, 4096));
  INFO(std::string(C::config));
  check_no_differences(differences(C::static_plans::prefill, r));
  MESSAGE(std::string(C::config) << ": prefill 512: arena " << r.mem.arena_bytes() << " B, lower bound " << r.mem.lower_bound << " B");
}

TEST_CASE_TEMPLATE("the compile-time plan equals the run-time plan of its config.json: decode, KV capacity 4096", C, FUSED_CHECKPOINTS) {
  const auto info = info_of(C::config);
  const auto r = fused::decoder::plan_for(*info.family, info.arch, fused::decoder::mode::decode(4096));
  INFO(std::string(C::config));
  check_no_differences(differences(C::static_plans::decode, r));
  MESSAGE(std::string(C::config) << ": decode 4096: arena " << r.mem.arena_bytes() << " B, lower bound " << r.mem.lower_bound << " B");
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
