// The hyper-parameters of a decoder-only transformer, as Hugging Face's config.json names them:
// one value type for every family (Qwen2, Qwen3, Llama, Mistral). Which fields a family reads and
// what its graph does with them is the family's own header (models/qwen2.hpp, llama.hpp, ...).
// A plain aggregate with no includes, because every static model parses it: the fields' names,
// for config checks and the JSON/C emitters, come from decoder_config_fields.hpp.
#pragma once

namespace fused::decoder {

// RoPE frequencies: transformers' `rope_type` (in "rope_scaling" or "rope_parameters").
enum class rope_kind : int {
  plain = 0,   // "default": inv_freq[i] = 1 / theta^(2i / head_dim)
  llama3 = 1,  // "llama3": low frequencies divided by `factor`, a smooth band between (Llama 3.1+)
};

constexpr const char* name_of(rope_kind k) { return k == rope_kind::llama3 ? "llama3" : "default"; }

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
  // Features some families have. At its zero value a feature is off, and printed configs (the C
  // header, `fused plan`) leave it out: a model that does not use it reads as it always did.
  bool attention_bias = false;      // q/k/v/o projections with bias (Llama, Qwen3; Qwen2 always has q/k/v bias)
  bool mlp_bias = false;            // gate/up/down projections with bias (Llama)
  rope_kind rope_type = rope_kind::plain;
  double rope_factor = 0;                    // llama3: rope_scaling.factor
  double rope_low_freq_factor = 0;           // llama3: rope_scaling.low_freq_factor
  double rope_high_freq_factor = 0;          // llama3: rope_scaling.high_freq_factor
  int rope_original_max_position_embeddings = 0;  // llama3: rope_scaling.original_max_position_embeddings
  int sliding_window = 0;           // Mistral: attention window in positions; 0 = none (full attention)
  double attention_dropout = 0;     // training: dropout on the attention probabilities (config.json's attention_dropout)

  friend constexpr bool operator==(const config&, const config&) = default;
};

// The first fields above are printed always; the features only when set (see config_fields).
inline constexpr int always_printed_fields = 11;

}  // namespace fused::decoder
