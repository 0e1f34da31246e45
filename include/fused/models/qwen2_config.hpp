// The architectural hyper-parameters of a Qwen2 model, as Hugging Face's config.json names them.
// A value type: presets are constexpr (fused/models/qwen2_presets.hpp), a run-time config comes from
// fused/io/hf_config.hpp. A plain aggregate with no includes, because every static model parses it:
// the fields' names, for config checks and the JSON/C emitters, come from qwen2_config_fields.hpp.
#pragma once

namespace fused::qwen2 {

struct config {
  int vocab_size = 0;
  int hidden_size = 0;
  int intermediate_size = 0;
  int num_hidden_layers = 0;
  int num_attention_heads = 0;
  int num_key_value_heads = 0;
  int head_dim = 0;                 // hidden_size / num_attention_heads unless config.json says otherwise
  int max_position_embeddings = 0;
  double rms_norm_eps = 0;
  double rope_theta = 0;
  bool tie_word_embeddings = false;

  friend constexpr bool operator==(const config&, const config&) = default;
};

}  // namespace fused::qwen2
