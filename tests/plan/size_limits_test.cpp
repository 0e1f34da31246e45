// Overflow-safe sizes at run time (core/checked_size.hpp, plan/size_check.hpp, qwen2_limits.hpp):
// plan_for refuses a config or a mode whose bytes would overflow, naming the field or tokens/ctx,
// before building or planning anything; checked arithmetic saturates to -1 instead of wrapping.
#include <doctest/doctest.h>

#include <fused/models/decoder_plan.hpp>
#include <fused/models/qwen2.hpp>
#include <fused/plan/size_check.hpp>

#include <cstdint>
#include <stdexcept>
#include <string>

using namespace fused;

namespace {
// A model whose weights are small but whose MLP activations grow as tokens x 2^31.
constexpr decoder::config wide_mlp{.vocab_size = 256, .hidden_size = 2, .intermediate_size = 2147483647, .num_hidden_layers = 1,
                                 .num_attention_heads = 1, .num_key_value_heads = 1, .head_dim = 2,
                                 .max_position_embeddings = 2147483647, .rms_norm_eps = 1e-6, .rope_theta = 1e4,
                                 .tie_word_embeddings = true};

std::string error_of(const decoder::config& c, const decoder::mode& m) {
  try {
    (void)decoder::plan_for(fused::qwen2::entry, c, m);
  } catch (const std::invalid_argument& e) {
    return e.what();
  }
  return "planned";
}
}  // namespace

TEST_CASE("checked_mul and checked_add saturate at max_region_bytes, never wrap") {
  CHECK(checked_mul(std::int64_t{1} << 25, std::int64_t{1} << 25) == max_region_bytes);
  CHECK(checked_mul(max_region_bytes, 2) == -1);
  CHECK(checked_mul(std::int64_t{1} << 40, std::int64_t{1} << 40) == -1);  // wraps to 0 in int64
  CHECK(checked_mul(INT64_MAX, INT64_MAX) == -1);
  CHECK(checked_mul(-1, 0) == -1);
  CHECK(checked_add(max_region_bytes, 1) == -1);
  CHECK(checked_add(INT64_MAX, INT64_MAX) == -1);
  CHECK(checked_add(-1, 5) == -1);
}

TEST_CASE("plan_for: sizes that overflow only with the mode's tokens are refused, naming tokens") {
  CHECK(error_of(wide_mlp, decoder::mode::decode(16)) == "planned");
  CHECK(error_of(wide_mlp, decoder::mode::prefill(4, 16)) == "planned");
  const std::string e = error_of(wide_mlp, decoder::mode::prefill(1 << 20, 1 << 20));
  CHECK(e.find("tokens: prefill of 1048576 tokens with KV capacity 1048576: tensor layers.0.") == 0);
  CHECK(e.find("needs more than 1125899906842624 bytes") != std::string::npos);
}

TEST_CASE("plan_for: a config too large to plan is refused before its graph is built") {
  decoder::config c = wide_mlp;
  c.num_hidden_layers = 1000000000;  // 31 tensors a layer: building this graph alone would take ~100 GB
  CHECK(error_of(c, decoder::mode::decode(16)) ==
        "config field \"num_hidden_layers\": 1000000000 is more than the 1024 layers this library plans");
  c = wide_mlp;
  c.hidden_size = 1 << 20;
  CHECK(error_of(c, decoder::mode::decode(16)).find("config field \"intermediate_size\": 2147483647 times hidden_size 1048576") == 0);
  c = wide_mlp;
  c.num_key_value_heads = 0;  // a config made in code skips the parser's checks
  CHECK(error_of(c, decoder::mode::decode(16)) == "config field \"num_key_value_heads\": 0 must be positive");
}

TEST_CASE("find_oversize: none for a real model, the tensor for a huge binding") {
  const decoder::config small{.vocab_size = 151936,
                            .hidden_size = 896,
                            .intermediate_size = 4864,
                            .num_hidden_layers = 2,
                            .num_attention_heads = 14,
                            .num_key_value_heads = 2,
                            .head_dim = 64,
                            .max_position_embeddings = 131072,
                            .rms_norm_eps = 1e-6,
                            .rope_theta = 1e6,
                            .tie_word_embeddings = true};
  const program p = decoder::build_graph<fused::qwen2::family>(small);
  CHECK_FALSE(find_oversize(p, decoder::mode::prefill(512, 4096).bind()).has_value());
  binding huge = decoder::mode::prefill(1, 1).bind();
  huge.value[decoder::sym_ctx] = INT64_MAX / 2;
  const auto big = find_oversize(p, huge);
  REQUIRE(big.has_value());
  CHECK(big->where == region::state);
  CHECK(to_string(p.tensor(big->tensor).name) == "cache.layers.0.key");
}
