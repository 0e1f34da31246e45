// The Llama family (model_type "llama", LlamaForCausalLM: Llama 2, 3, 3.1, 3.2, SmolLM), as
// Hugging Face's LlamaForCausalLM computes it: embed; per layer: rms_norm, q/k/v projections, RoPE
// (plain, or rope_type "llama3" scaled: read with the common fields), KV-cache writes, causal
// grouped-query attention, o projection, residual add, rms_norm, gate, up, SwiGLU, down, residual
// add; final norm; lm head, tied or untied. attention_bias puts a bias on q/k/v/o, mlp_bias on
// gate/up/down.
#pragma once
#include <string_view>

#include "decoder_graph.hpp"
#include "family.hpp"

namespace fused::llama {

using decoder::config;

struct family {
  static constexpr std::string_view model_type = "llama";
  static constexpr std::string_view architecture = "LlamaForCausalLM";

  template <class Builder>
  static constexpr auto graph(const config& c, decoder::graph_options o = {}) {
    decoder::layers<Builder> g(c, o, 31, 17);
    const std::int64_t H = c.hidden_size, q_out = g.q_features(), kv_out = g.kv_features();
    const bool attn_bias = c.attention_bias, mlp_bias = c.mlp_bias;
    tensor_id x = g.embed();
    for (int l = 0; l < g.layer_count; ++l) {
      const auto cache = g.kv_cache(l);
      const tensor_id h = g.rms_norm(x, {"model.layers.{}.input_layernorm.weight", l}, {"layers.{}.attn_norm", l});
      const tensor_id q = g.linear(h, {"model.layers.{}.self_attn.q_proj.weight", l}, {"model.layers.{}.self_attn.q_proj.bias", l}, attn_bias,
                                   q_out, H, {"layers.{}.q", l});
      const tensor_id k = g.linear(h, {"model.layers.{}.self_attn.k_proj.weight", l}, {"model.layers.{}.self_attn.k_proj.bias", l}, attn_bias,
                                   kv_out, H, {"layers.{}.k", l});
      const tensor_id v = g.linear(h, {"model.layers.{}.self_attn.v_proj.weight", l}, {"model.layers.{}.self_attn.v_proj.bias", l}, attn_bias,
                                   kv_out, H, {"layers.{}.v", l});
      const tensor_id q_rot = g.rope(q, c.num_attention_heads, {"layers.{}.q_rope", l});
      const tensor_id k_rot = g.rope(k, c.num_key_value_heads, {"layers.{}.k_rope", l});
      const tensor_id a = g.attention(l, cache, q_rot, k_rot, v);
      const tensor_id o_ = g.linear(a, {"model.layers.{}.self_attn.o_proj.weight", l}, {"model.layers.{}.self_attn.o_proj.bias", l}, attn_bias, H,
                                    q_out, {"layers.{}.attn_out", l});
      x = g.add(x, o_, {"layers.{}.resid_attn", l});
      const tensor_id h2 = g.rms_norm(x, {"model.layers.{}.post_attention_layernorm.weight", l}, {"layers.{}.mlp_norm", l});
      const tensor_id down = g.swiglu_mlp(h2, l, mlp_bias);
      x = g.add(x, down, {"layers.{}.resid_mlp", l});
    }
    return std::move(g).logits(x);
  }

  static void read(const decoder::config_source& in, config& c) {
    c.attention_bias = in.boolean("attention_bias", false);
    c.mlp_bias = in.boolean("mlp_bias", false);
  }
};

inline constexpr decoder::family_entry entry = decoder::entry_of<family>();

// Configs of released checkpoints (their config.json), for static models.
namespace presets {
struct llama_3_2_1b {
  using family = llama::family;
  static constexpr config value{.vocab_size = 128256, .hidden_size = 2048, .intermediate_size = 8192, .num_hidden_layers = 16,
                                .num_attention_heads = 32, .num_key_value_heads = 8, .head_dim = 64, .max_position_embeddings = 131072,
                                .rms_norm_eps = 1e-5, .rope_theta = 500000.0, .tie_word_embeddings = true,
                                .rope_type = decoder::rope_kind::llama3, .rope_factor = 32.0, .rope_low_freq_factor = 1.0,
                                .rope_high_freq_factor = 4.0, .rope_original_max_position_embeddings = 8192};
};
struct llama_3_1_8b {
  using family = llama::family;
  static constexpr config value{.vocab_size = 128256, .hidden_size = 4096, .intermediate_size = 14336, .num_hidden_layers = 32,
                                .num_attention_heads = 32, .num_key_value_heads = 8, .head_dim = 128, .max_position_embeddings = 131072,
                                .rms_norm_eps = 1e-5, .rope_theta = 500000.0, .tie_word_embeddings = false,
                                .rope_type = decoder::rope_kind::llama3, .rope_factor = 8.0, .rope_low_freq_factor = 1.0,
                                .rope_high_freq_factor = 4.0, .rope_original_max_position_embeddings = 8192};
};
// SmolLM2-360M: a Llama with 15 query heads over 5 KV heads, tied, no rope scaling.
struct smollm2_360m {
  using family = llama::family;
  static constexpr config value{.vocab_size = 49152, .hidden_size = 960, .intermediate_size = 2560, .num_hidden_layers = 32,
                                .num_attention_heads = 15, .num_key_value_heads = 5, .head_dim = 64, .max_position_embeddings = 8192,
                                .rms_norm_eps = 1e-5, .rope_theta = 100000.0, .tie_word_embeddings = true};
};
}  // namespace presets

}  // namespace fused::llama
