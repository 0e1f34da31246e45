// Configs of real Qwen2 checkpoints as constexpr values (from their Hugging Face config.json files).
// Each preset is a type with a static `value`, so it can parameterize a static model on any compiler
// (floating-point template arguments are not portable yet).
#pragma once
#include "qwen2.hpp"

namespace fused::qwen2::presets {

struct qwen2_0_5b {
  using family = qwen2::family;
  static constexpr config value{.vocab_size = 151936, .hidden_size = 896, .intermediate_size = 4864, .num_hidden_layers = 24,
                                .num_attention_heads = 14, .num_key_value_heads = 2, .head_dim = 64, .max_position_embeddings = 131072,
                                .rms_norm_eps = 1e-6, .rope_theta = 1000000.0, .tie_word_embeddings = true};
};
struct qwen2_5_0_5b {
  using family = qwen2::family;
  static constexpr config value{.vocab_size = 151936, .hidden_size = 896, .intermediate_size = 4864, .num_hidden_layers = 24,
                                .num_attention_heads = 14, .num_key_value_heads = 2, .head_dim = 64, .max_position_embeddings = 32768,
                                .rms_norm_eps = 1e-6, .rope_theta = 1000000.0, .tie_word_embeddings = true};
};
struct qwen2_1_5b {
  using family = qwen2::family;
  static constexpr config value{.vocab_size = 151936, .hidden_size = 1536, .intermediate_size = 8960, .num_hidden_layers = 28,
                                .num_attention_heads = 12, .num_key_value_heads = 2, .head_dim = 128, .max_position_embeddings = 131072,
                                .rms_norm_eps = 1e-6, .rope_theta = 1000000.0, .tie_word_embeddings = true};
};
struct qwen2_7b {
  using family = qwen2::family;
  static constexpr config value{.vocab_size = 152064, .hidden_size = 3584, .intermediate_size = 18944, .num_hidden_layers = 28,
                                .num_attention_heads = 28, .num_key_value_heads = 4, .head_dim = 128, .max_position_embeddings = 131072,
                                .rms_norm_eps = 1e-6, .rope_theta = 1000000.0, .tie_word_embeddings = false};
};
// The embedded default model: examples/models/kjv-qwen2-4m (a 4 M-parameter Qwen2 trained on the KJV).
struct kjv_qwen2_4m {
  using family = qwen2::family;
  static constexpr config value{.vocab_size = 4096, .hidden_size = 256, .intermediate_size = 768, .num_hidden_layers = 4,
                                .num_attention_heads = 8, .num_key_value_heads = 2, .head_dim = 32, .max_position_embeddings = 512,
                                .rms_norm_eps = 1e-6, .rope_theta = 10000.0, .tie_word_embeddings = true};
};

}  // namespace fused::qwen2::presets
