// The architectural hyper-parameters of a Qwen2 model, as Hugging Face's config.json names them.
// A value type: presets are constexpr (fused/models/qwen2_presets.hpp), a run-time config comes from
// fused/io/hf_config.hpp. The fields are reflectable (Boost.Hana) so that config checks and the
// JSON/C emitters can name each one without a second list.
#pragma once
#include <boost/hana/define_struct.hpp>

namespace fused::qwen2 {

struct config {
  BOOST_HANA_DEFINE_STRUCT(config,
    (int, vocab_size),
    (int, hidden_size),
    (int, intermediate_size),
    (int, num_hidden_layers),
    (int, num_attention_heads),
    (int, num_key_value_heads),
    (int, head_dim),                 // hidden_size / num_attention_heads unless config.json says otherwise
    (int, max_position_embeddings),
    (double, rms_norm_eps),
    (double, rope_theta),
    (bool, tie_word_embeddings));

  friend constexpr bool operator==(const config&, const config&) = default;
};

}  // namespace fused::qwen2
