// The static model: compile-time layout, bitwise equality with the run-time model, no heap
// allocation in prefill or decode, clear errors at the KV capacity, greedy generation.
#include <doctest/doctest.h>

#include <cstring>
#include <fstream>
#include <new>
#include <nlohmann/json.hpp>

#include <fused/core/json_text.hpp>
#include <string>
#include <vector>

#include <fused/qwen2.hpp>

#include "../reference_presets.hpp"
#include "alloc_counter.hpp"

namespace {

using fused_test::tiny_a;  // tiny_a's config.json as a constexpr preset (checked against the file below)

constexpr fused::decoder::graph_options all_rows{.logits = fused::decoder::logits_rows::all};
using static_all = fused::qwen2::static_model<tiny_a, 64, 128, all_rows>;
using static_gen = fused::qwen2::static_model<tiny_a, 16, 128>;

// The layout is a compile-time fact users can assert on. Hand-checked: weights are 2 layers of
// (2 norms of 128 + q 128x128 + k,v 64x128 + o 128x128 + biases 128+64+64 + gate/up/down 3 x 352x128)
// bf16 + the 1000x128 embedding + the final norm, each rounded up to 64 bytes.
static_assert(static_all::weights_bytes ==
              2 * (2 * 256 + 2 * 32768 + 2 * 16384 + 256 + 128 + 128 + 3 * 90112) + 256000 + 256);
// The KV cache: 2 layers x (key + value) x 2 KV heads x 128 positions x 32 dims x 2 bytes.
static_assert(static_all::state_bytes == 2 * 2 * 2 * 128 * 32 * 2);
static_assert(static_all::arena_bytes % 64 == 0 && static_all::arena_bytes > 0);
static_assert(static_all::plans::prefill.arena_bytes() <= static_all::plans::prefill.lower_bound * 102 / 100);
static_assert(static_all::prefill_calls[0].k == fused::runtime::kernel::embed);
static_assert(static_gen::decode_calls[2].k == fused::runtime::kernel::gemv);
static_assert(static_gen::prefill_calls[2].k == fused::runtime::kernel::gemm);

std::string dir() { return std::string(FUSED_TEST_DATA) + "/reference/tiny_a"; }

struct reference {
  std::vector<std::int32_t> input_ids, generated_ids;
  std::vector<double> margins;
  double yardstick = 0;
};
reference load_reference() {
  std::ifstream in(dir() + "/reference.json");
  const auto j = fused::json_text::parse(in);
  reference r;
  for (auto v : j["input_ids"]) r.input_ids.push_back(v.get<std::int32_t>());
  for (auto v : j["generated_ids"]) r.generated_ids.push_back(v.get<std::int32_t>());
  for (auto v : j["greedy_top2_margins"]) r.margins.push_back(v.get<double>());
  r.yardstick = j["hf_bf16_prefill_logits_max_abs_dev"].get<double>();
  return r;
}

bool bitwise_equal(std::span<const float> a, std::span<const float> b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size_bytes()) == 0;
}

}  // namespace

TEST_CASE("the presets are the checkpoints' configs") {
  const std::string refs = std::string(FUSED_TEST_DATA) + "/reference/";
  CHECK(fused::decoder::config_differences(tiny_a::value, fused::decoder::load_hf_config(refs + "tiny_a/config.json").arch).empty());
  CHECK(fused::decoder::config_differences(fused_test::tiny_mha::value, fused::decoder::load_hf_config(refs + "tiny_mha/config.json").arch).empty());
}

TEST_CASE("static and run-time models give bitwise equal logits") {
  const reference ref = load_reference();
  fused::qwen2::model rt(tiny_a::value, 64, 128, all_rows);
  const auto w = fused::runtime::weight_store::load(dir(), rt.tensors(), true);
  rt.bind(w);
  static_all st(w);
  // Same plan, so the same layout, and the same calls.
  CHECK(rt.arena_bytes() == static_all::arena_bytes);
  CHECK(rt.state_bytes() == static_all::state_bytes);
  REQUIRE(rt.prefill_calls().size() == static_all::prefill_calls.size());
  for (std::size_t i = 0; i < rt.prefill_calls().size(); ++i) {
    CHECK(rt.prefill_calls()[i] == static_all::prefill_calls[i]);
    CHECK(rt.decode_calls()[i] == static_all::decode_calls[i]);
  }
  const auto a = rt.prefill(ref.input_ids);
  const std::vector<float> a_copy(a.begin(), a.end());
  CHECK(bitwise_equal(a_copy, st.prefill(ref.input_ids)));
  for (std::size_t k = 0; k < 8; ++k) {
    const auto x = rt.decode(ref.generated_ids[k]);
    const std::vector<float> x_copy(x.begin(), x.end());
    CHECK(bitwise_equal(x_copy, st.decode(ref.generated_ids[k])));
  }
}

TEST_CASE("prefill and decode allocate nothing") {
  const reference ref = load_reference();
  const auto w = fused::runtime::weight_store::load(dir(), static_gen::plans::prefill.tensors, true);
  static_gen st(w);
  fused::qwen2::model rt(tiny_a::value, 16, 128);
  rt.bind(w);
  // Warm up: the first parallel region may set up the thread pool.
  st.prefill(std::span(ref.input_ids).first(4));
  st.decode(1);
  rt.prefill(std::span(ref.input_ids).first(4));
  rt.decode(1);
  const long before = fused_test_allocations();
  st.prefill(ref.input_ids);  // 37 tokens: three chunks of at most 16
  for (int k = 0; k < 20; ++k) st.decode(ref.generated_ids[static_cast<std::size_t>(k)]);
  rt.prefill(ref.input_ids);
  for (int k = 0; k < 20; ++k) rt.decode(ref.generated_ids[static_cast<std::size_t>(k)]);
  CHECK(fused_test_allocations() - before == 0);
}

TEST_CASE("greedy generation follows transformers while its margins are clear") {
  const reference ref = load_reference();
  const auto w = fused::runtime::weight_store::load(dir(), static_gen::plans::prefill.tensors, true);
  static_gen m(w);
  auto logits = m.prefill(ref.input_ids);
  std::size_t checked = 0;
  for (std::size_t k = 0; k < ref.generated_ids.size(); ++k) {
    if (ref.margins[k] < 2 * ref.yardstick) break;
    const auto next = static_cast<std::int32_t>(fk_argmax(logits.data(), logits.size()));
    CHECK(next == ref.generated_ids[k]);
    ++checked;
    logits = m.decode(next);
  }
  CHECK(checked >= 10);
}

// The f32 paths (scalar, AVX2) differ only by summation order. The bf16 paths (AVX-512 BF16, AMX)
// round activations to bf16 at every matmul, which amplifies those differences: there the bound is
// a quarter of the transformers bf16 yardstick.
TEST_CASE("chunked prefill equals one long prefill within float rounding") {
  const reference ref = load_reference();
  const auto w = fused::runtime::weight_store::load(dir(), static_gen::plans::prefill.tensors, true);
  fused::qwen2::model whole(tiny_a::value, 64, 128), chunked(tiny_a::value, 5, 128);
  whole.bind(w);
  chunked.bind(w);
  const auto a = whole.prefill(ref.input_ids);
  const std::vector<float> a_copy(a.begin(), a.end());
  const auto b = chunked.prefill(ref.input_ids);
  CHECK(chunked.position() == static_cast<std::int64_t>(ref.input_ids.size()));
  double m = 0;
  for (std::size_t i = 0; i < a_copy.size(); ++i) m = std::max(m, std::fabs(static_cast<double>(a_copy[i]) - b[i]));
  const bool bf16_activations = fk_isa_active() >= FK_ISA_AVX512BF16;
  CHECK(m < (bf16_activations ? ref.yardstick / 4 : 1e-3));
}

TEST_CASE("the KV capacity and the vocabulary are enforced before anything is written") {
  const auto w = fused::runtime::weight_store::load(dir(), static_gen::plans::prefill.tensors, true);
  fused::qwen2::model m(tiny_a::value, 16, 20);
  m.bind(w);
  std::vector<std::int32_t> ids(18, 7);
  m.prefill(ids);
  m.decode(1);
  m.decode(2);
  CHECK(m.position() == 20);
  CHECK_THROWS_WITH_AS(m.decode(3), "the KV cache holds 20 positions; 20 are used and this call needs 1 more",
                       fused::runtime::capacity_error);
  CHECK(m.position() == 20);
  m.reset();
  CHECK_THROWS_AS(m.prefill(std::vector<std::int32_t>(21, 1)), fused::runtime::capacity_error);
  CHECK(m.position() == 0);
  CHECK_THROWS_WITH_AS(m.prefill(std::vector<std::int32_t>{1, 1000}), "token id 1000 (at index 1) is outside the vocabulary [0, 1000)",
                       std::invalid_argument);
  CHECK_THROWS_AS(m.decode(-1), std::invalid_argument);
  CHECK(m.position() == 0);
  // Past the model's positions: a plan can never hold more than max_position_embeddings.
  CHECK_THROWS_AS(fused::qwen2::model(tiny_a::value, 16, 1025), std::invalid_argument);
}

TEST_CASE("weights: a missing, misshapen or unexpected tensor is named") {
  fused::qwen2::model m(tiny_a::value, 16, 64);
  auto cfg = tiny_a::value;
  cfg.intermediate_size = 320;
  fused::qwen2::model other(cfg, 16, 64);
  CHECK_THROWS_WITH(fused::runtime::weight_store::load(dir(), other.tensors(), true),
                    doctest::Contains("\"model.layers.0.mlp.gate_proj.weight\" has shape [352, 128], the model needs [320, 128]"));
  cfg = tiny_a::value;
  cfg.num_hidden_layers = 1;
  fused::qwen2::model fewer(cfg, 16, 64);
  CHECK_THROWS_WITH(fused::runtime::weight_store::load(dir(), fewer.tensors(), true),
                    doctest::Contains("tensors the model does not use"));
  cfg = tiny_a::value;
  cfg.tie_word_embeddings = false;
  fused::qwen2::model untied(cfg, 16, 64);
  CHECK_THROWS_WITH(fused::runtime::weight_store::load(dir(), untied.tensors(), true),
                    doctest::Contains("\"lm_head.weight\" is missing"));
}

TEST_CASE("caller-owned regions: the model runs in the caller's bytes") {
  const reference ref = load_reference();
  const auto w = fused::runtime::weight_store::load(dir(), static_gen::plans::prefill.tensors, true);
  static_gen owning(w);
  alignas(64) static std::byte state[static_gen::state_bytes];
  alignas(64) static std::byte arena[static_gen::arena_bytes];
  static_gen borrowed(w, state, arena);
  const auto a = owning.prefill(ref.input_ids);
  const std::vector<float> a_copy(a.begin(), a.end());
  const auto b = borrowed.prefill(ref.input_ids);
  CHECK(bitwise_equal(a_copy, b));
  // The logits live in the caller's arena, at the planned offset.
  CHECK(reinterpret_cast<const std::byte*>(b.data()) >= arena);
  CHECK(reinterpret_cast<const std::byte*>(b.data() + b.size()) <= arena + static_gen::arena_bytes);
  CHECK_THROWS_AS(static_gen(w, std::span(state, 64), arena), std::invalid_argument);
}
