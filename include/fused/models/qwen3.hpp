// The Qwen3 family (model_type "qwen3", Qwen3ForCausalLM), as Hugging Face's Qwen3ForCausalLM
// computes it: Qwen2's decoder with a per-head RMSNorm of q and k (q_norm, k_norm, over head_dim)
// before RoPE, biases only when attention_bias is set, and a head_dim of its own (heads x head_dim
// need not be hidden_size).
#pragma once
#include <string_view>

#include "decoder_graph.hpp"
#include "family.hpp"

namespace fused::qwen3 {

using decoder::config;

struct family {
  static constexpr std::string_view model_type = "qwen3";
  static constexpr std::string_view architecture = "Qwen3ForCausalLM";

  template <class Builder>
  static constexpr auto graph(const config& c, decoder::graph_options o = {}) {
    decoder::layers<Builder> g(c, o, 35, 19);
    const std::int64_t H = c.hidden_size, q_out = g.q_features(), kv_out = g.kv_features();
    const bool bias = c.attention_bias;
    tensor_id x = g.embed();
    for (int l = 0; l < g.layer_count; ++l) {
      const auto cache = g.kv_cache(l);
      const tensor_id h = g.rms_norm(x, {"model.layers.{}.input_layernorm.weight", l}, {"layers.{}.attn_norm", l});
      const tensor_id q = g.linear(h, {"model.layers.{}.self_attn.q_proj.weight", l}, {"model.layers.{}.self_attn.q_proj.bias", l}, bias, q_out,
                                   H, {"layers.{}.q", l});
      const tensor_id k = g.linear(h, {"model.layers.{}.self_attn.k_proj.weight", l}, {"model.layers.{}.self_attn.k_proj.bias", l}, bias, kv_out,
                                   H, {"layers.{}.k", l});
      const tensor_id v = g.linear(h, {"model.layers.{}.self_attn.v_proj.weight", l}, {"model.layers.{}.self_attn.v_proj.bias", l}, bias, kv_out,
                                   H, {"layers.{}.v", l});
      const tensor_id q_normed = g.head_rms_norm(q, c.num_attention_heads, {"model.layers.{}.self_attn.q_norm.weight", l}, {"layers.{}.q_norm", l});
      const tensor_id k_normed = g.head_rms_norm(k, c.num_key_value_heads, {"model.layers.{}.self_attn.k_norm.weight", l}, {"layers.{}.k_norm", l});
      const tensor_id q_rot = g.rope(q_normed, c.num_attention_heads, {"layers.{}.q_rope", l});
      const tensor_id k_rot = g.rope(k_normed, c.num_key_value_heads, {"layers.{}.k_rope", l});
      const tensor_id a = g.attention(l, cache, q_rot, k_rot, v);
      const tensor_id o_ = g.linear(a, {"model.layers.{}.self_attn.o_proj.weight", l}, {"model.layers.{}.self_attn.o_proj.bias", l}, bias, H,
                                    q_out, {"layers.{}.attn_out", l});
      x = g.add(x, o_, {"layers.{}.resid_attn", l});
      const tensor_id h2 = g.rms_norm(x, {"model.layers.{}.post_attention_layernorm.weight", l}, {"layers.{}.mlp_norm", l});
      const tensor_id down = g.swiglu_mlp(h2, l);
      x = g.add(x, down, {"layers.{}.resid_mlp", l});
    }
    return std::move(g).logits(x);
  }

  // transformers' Qwen3Config: head_dim=128 when config.json has none (null: hidden_size / heads).
  static constexpr int default_head_dim = 128;
  static void read(const decoder::config_source& in, config& c) { c.attention_bias = in.boolean("attention_bias", false); }
};

inline constexpr decoder::family_entry entry = decoder::entry_of<family>();

// Configs of released checkpoints (their config.json), for static models.
namespace presets {
struct qwen3_0_6b {
  using family = qwen3::family;
  static constexpr config value{.vocab_size = 151936, .hidden_size = 1024, .intermediate_size = 3072, .num_hidden_layers = 28,
                                .num_attention_heads = 16, .num_key_value_heads = 8, .head_dim = 128, .max_position_embeddings = 40960,
                                .rms_norm_eps = 1e-6, .rope_theta = 1000000.0, .tie_word_embeddings = true};
};
}  // namespace presets

}  // namespace fused::qwen3
