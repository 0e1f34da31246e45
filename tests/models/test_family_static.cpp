// Static models of the families other than Qwen2 (tests/models/test_qwen2_static.cpp), through
// their umbrella headers: a preset equal to the reference's config.json, the weights loaded for its
// plan, and logits bitwise equal to the run-time decoder::model's in prefill (whole and in chunks)
// and decode.
#include <doctest/doctest.h>

#include <cstring>
#include <fstream>
#include <nlohmann/json.hpp>

#include <fused/core/json_text.hpp>
#include <span>
#include <string>
#include <vector>

#include <fused/llama.hpp>
#include <fused/qwen3.hpp>

#include "../reference_presets.hpp"

namespace {

struct tiny_llama_case {
  using preset = fused_test::tiny_llama;
  static constexpr const char* dir = "tiny_llama";
  template <class Preset, std::int64_t MaxTokens, std::int64_t Ctx, fused::decoder::graph_options O>
  using static_model = fused::llama::static_model<Preset, MaxTokens, Ctx, O>;
  static constexpr const fused::decoder::family_entry& entry = fused::llama::entry;
};
struct tiny_qwen3_case {
  using preset = fused_test::tiny_qwen3;
  static constexpr const char* dir = "tiny_qwen3";
  template <class Preset, std::int64_t MaxTokens, std::int64_t Ctx, fused::decoder::graph_options O>
  using static_model = fused::qwen3::static_model<Preset, MaxTokens, Ctx, O>;
  static constexpr const fused::decoder::family_entry& entry = fused::qwen3::entry;
};

constexpr fused::decoder::graph_options all_rows{.logits = fused::decoder::logits_rows::all};
constexpr fused::decoder::graph_options last_row{};

// Compile-time facts of the two models, as the umbrella headers' examples state them for the
// released checkpoints. tiny_llama: 2 layers x (2 norms of 256 + q 256x256 + k,v 64x256 + o 256x256
// + gate/up/down 3 x 384x256) + the 1000x256 embedding + the final norm + the untied 1000x256 lm
// head, bf16, each a multiple of 64 bytes.
using llama_all = fused::llama::static_model<fused_test::tiny_llama, 64, 128, all_rows>;
static_assert(llama_all::weights_bytes == 2 * (2 * 512 + 131072 + 2 * 32768 + 131072 + 3 * 196608) + 512000 + 512 + 512000);
static_assert(llama_all::state_bytes == 2 * 2 * 2 * 128 * 32 * 2);  // layers x (k, v) x KV heads x positions x head_dim x bf16
static_assert(llama_all::step_count == 17 * 2 + 3);  // + embed, final norm, lm head (all rows: no last-row pick)
// tiny_qwen3: the same decoder plus q_norm and k_norm (64 each) per layer, q 256x128, k,v 128x128,
// o 128x256, tied.
using qwen3_all = fused::qwen3::static_model<fused_test::tiny_qwen3, 64, 128, all_rows>;
static_assert(qwen3_all::weights_bytes == 2 * (2 * 256 + 2 * 128 + 65536 + 2 * 32768 + 65536 + 3 * 98304) + 262144 + 256);
static_assert(qwen3_all::state_bytes == 2 * 2 * 2 * 128 * 64 * 2);
static_assert(qwen3_all::step_count == 19 * 2 + 3);
static_assert(qwen3_all::plans::prefill.arena_bytes() == qwen3_all::plans::prefill.lower_bound);

std::string dir_of(const char* name) { return std::string(FUSED_TEST_DATA) + "/reference/" + name; }

struct reference_ids {
  std::vector<std::int32_t> input_ids, generated_ids;
};
reference_ids load_reference_ids(const std::string& dir) {
  std::ifstream in(dir + "/reference.json");
  const auto j = fused::json_text::parse(in);
  reference_ids r;
  for (auto v : j["input_ids"]) r.input_ids.push_back(v.get<std::int32_t>());
  for (auto v : j["generated_ids"]) r.generated_ids.push_back(v.get<std::int32_t>());
  return r;
}

bool bitwise_equal(std::span<const float> a, std::span<const float> b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size_bytes()) == 0;
}

// A static model and the run-time model of the same config and limits: same layout, same calls,
// bitwise equal logits for the prompt and `steps` decode steps.
template <class Case, std::int64_t MaxTokens, std::int64_t Ctx, fused::decoder::graph_options O>
void check_static_equals_runtime(std::size_t steps) {
  using st_model = typename Case::template static_model<typename Case::preset, MaxTokens, Ctx, O>;
  const std::string dir = dir_of(Case::dir);
  const reference_ids ref = load_reference_ids(dir);
  REQUIRE(ref.generated_ids.size() >= steps);
  fused::decoder::model rt(Case::entry, Case::preset::value, MaxTokens, Ctx, O);
  const auto w = fused::runtime::weight_store::load(dir, st_model::plans::prefill.tensors, true);
  rt.bind(w);
  st_model st(w);
  CHECK(rt.arena_bytes() == st_model::arena_bytes);
  CHECK(rt.state_bytes() == st_model::state_bytes);
  CHECK(rt.weights_bytes() == st_model::weights_bytes);
  REQUIRE(rt.prefill_calls().size() == st_model::prefill_calls.size());
  for (std::size_t i = 0; i < rt.prefill_calls().size(); ++i) {
    CHECK(rt.prefill_calls()[i] == st_model::prefill_calls[i]);
    CHECK(rt.decode_calls()[i] == st_model::decode_calls[i]);
  }
  const auto a = rt.prefill(ref.input_ids);
  const std::vector<float> a_copy(a.begin(), a.end());
  const auto b = st.prefill(ref.input_ids);
  CHECK(b.size() == (O.logits == fused::decoder::logits_rows::all ? ref.input_ids.size() : 1) * Case::preset::value.vocab_size);
  CHECK(bitwise_equal(a_copy, b));
  for (std::size_t k = 0; k < steps; ++k) {
    const auto x = rt.decode(ref.generated_ids[k]);
    const std::vector<float> x_copy(x.begin(), x.end());
    CHECK(bitwise_equal(x_copy, st.decode(ref.generated_ids[k])));
  }
  CHECK(rt.position() == st.position());
}

}  // namespace

TEST_CASE_TEMPLATE("the reference preset is its config.json, field by field, and names its family", Case, tiny_llama_case,
                   tiny_qwen3_case) {
  const fused::decoder::hf_model_info info = fused::decoder::load_hf_config(dir_of(Case::dir) + "/config.json");
  const auto diffs = fused::decoder::config_differences(Case::preset::value, info.arch);
  for (const auto& d : diffs) MESSAGE(d);
  CHECK(diffs.empty());
  REQUIRE(info.family != nullptr);
  CHECK(info.family->model_type == Case::preset::family::model_type);
  CHECK(info.family->model_type == Case::entry.model_type);
  CHECK(info.family->architecture == Case::preset::family::architecture);
}

TEST_CASE_TEMPLATE("static and run-time models give bitwise equal logits: one prefill, all rows, then decode", Case, tiny_llama_case,
                   tiny_qwen3_case) {
  check_static_equals_runtime<Case, 64, 128, all_rows>(8);
}

TEST_CASE_TEMPLATE("static and run-time models give bitwise equal logits: prefill in chunks of 4, last row, then decode", Case,
                   tiny_llama_case, tiny_qwen3_case) {
  // 11 (tiny_llama) or 9 (tiny_qwen3) prompt tokens in three chunks, then 16 decode steps.
  check_static_equals_runtime<Case, 4, 128, last_row>(16);
}
