// The configs of the transformers references in tests/data/reference as constexpr presets, shared by
// the tests that need a static model of them. tests/models/test_qwen2_static.cpp (Qwen2) and
// tests/models/test_family_static.cpp (the other families) check that each equals its config.json
// field by field.
#pragma once
#include <fused/models/llama.hpp>
#include <fused/models/qwen2.hpp>
#include <fused/models/qwen3.hpp>

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

// Llama 3 with "llama3" RoPE scaling (its factors change the frequencies at every position), untied.
struct tiny_llama {
  using family = fused::llama::family;
  static constexpr fused::decoder::config value{.vocab_size = 1000, .hidden_size = 256, .intermediate_size = 384, .num_hidden_layers = 2,
                                              .num_attention_heads = 8, .num_key_value_heads = 2, .head_dim = 32,
                                              .max_position_embeddings = 1024, .rms_norm_eps = 1e-5, .rope_theta = 500000.0,
                                              .tie_word_embeddings = false, .rope_type = fused::decoder::rope_kind::llama3,
                                              .rope_factor = 8.0, .rope_low_freq_factor = 1.0, .rope_high_freq_factor = 4.0,
                                              .rope_original_max_position_embeddings = 64};
};
// Qwen3: q/k norms per head, and head_dim 64: 4 heads x 64 = 256 query features over hidden 128. Tied.
struct tiny_qwen3 {
  using family = fused::qwen3::family;
  static constexpr fused::decoder::config value{.vocab_size = 1024, .hidden_size = 128, .intermediate_size = 384, .num_hidden_layers = 2,
                                              .num_attention_heads = 4, .num_key_value_heads = 2, .head_dim = 64,
                                              .max_position_embeddings = 2048, .rms_norm_eps = 1e-6, .rope_theta = 1000000.0,
                                              .tie_word_embeddings = true};
};

}  // namespace fused_test
