// The configs of the transformers references in tests/data/reference as constexpr presets, shared by
// the tests that need a static model of them. tests/models/test_qwen2_static.cpp checks that each
// equals its config.json field by field.
#pragma once
#include <fused/models/qwen2.hpp>

namespace fused_test {

struct tiny_a {
  using family = fused::qwen2::family;
  static constexpr fused::decoder::config value{.vocab_size = 1000, .hidden_size = 128, .intermediate_size = 352, .num_hidden_layers = 2,
                                              .num_attention_heads = 4, .num_key_value_heads = 2, .head_dim = 32,
                                              .max_position_embeddings = 1024, .rms_norm_eps = 1e-6, .rope_theta = 1000000.0,
                                              .tie_word_embeddings = true};
};
struct tiny_mha {
  using family = fused::qwen2::family;
  static constexpr fused::decoder::config value{.vocab_size = 512, .hidden_size = 64, .intermediate_size = 160, .num_hidden_layers = 2,
                                              .num_attention_heads = 2, .num_key_value_heads = 2, .head_dim = 32,
                                              .max_position_embeddings = 1024, .rms_norm_eps = 1e-6, .rope_theta = 10000.0,
                                              .tie_word_embeddings = false};
};

}  // namespace fused_test
