// The Qwen2 family (Qwen2, Qwen2.5: model_type "qwen2", Qwen2ForCausalLM), as Hugging Face's
// Qwen2ForCausalLM computes it:
//   embed; per layer: rms_norm, q/k/v projections with bias, rope on q and k, KV-cache writes,
//   causal grouped-query attention, o projection, residual add, rms_norm, gate, up, SwiGLU, down,
//   residual add; final norm; lm head (tied to the embedding or untied).
// Weights carry their Hugging Face names, so loading binds them by name once.
#pragma once
#include <string_view>

#include "decoder_graph.hpp"
#include "family.hpp"

namespace fused::qwen2 {

using decoder::config;

struct family {
  static constexpr std::string_view model_type = "qwen2";
  static constexpr std::string_view architecture = "Qwen2ForCausalLM";

  template <class Builder>
  static constexpr auto graph(const config& c, decoder::graph_options o = {}) {
    decoder::layers<Builder> g(c, o, 31, 17);
    const std::int64_t H = c.hidden_size, q_out = g.q_features(), kv_out = g.kv_features();
    tensor_id x = g.embed();
    for (int l = 0; l < g.layer_count; ++l) {
      const auto cache = g.kv_cache(l);
      const tensor_id h = g.rms_norm(x, {"model.layers.{}.input_layernorm.weight", l}, {"layers.{}.attn_norm", l});
      const tensor_id q = g.linear(h, {"model.layers.{}.self_attn.q_proj.weight", l}, {"model.layers.{}.self_attn.q_proj.bias", l}, q_out, H,
                                   {"layers.{}.q", l});
      const tensor_id k = g.linear(h, {"model.layers.{}.self_attn.k_proj.weight", l}, {"model.layers.{}.self_attn.k_proj.bias", l}, kv_out, H,
                                   {"layers.{}.k", l});
      const tensor_id v = g.linear(h, {"model.layers.{}.self_attn.v_proj.weight", l}, {"model.layers.{}.self_attn.v_proj.bias", l}, kv_out, H,
                                   {"layers.{}.v", l});
      const tensor_id q_rot = g.rope(q, c.num_attention_heads, {"layers.{}.q_rope", l});
      const tensor_id k_rot = g.rope(k, c.num_key_value_heads, {"layers.{}.k_rope", l});
      const tensor_id a = g.attention(l, cache, q_rot, k_rot, v);
      const tensor_id o_ = g.linear(a, {"model.layers.{}.self_attn.o_proj.weight", l}, H, q_out, {"layers.{}.attn_out", l});
      x = g.add(x, o_, {"layers.{}.resid_attn", l});
      const tensor_id h2 = g.rms_norm(x, {"model.layers.{}.post_attention_layernorm.weight", l}, {"layers.{}.mlp_norm", l});
      const tensor_id down = g.swiglu_mlp(h2, l);
      x = g.add(x, down, {"layers.{}.resid_mlp", l});
    }
    return std::move(g).logits(x);
  }

  // Nothing beyond the common fields: Qwen2's q/k/v always have a bias, nothing else does.
  static void read(const decoder::config_source&, config&) {}
};

inline constexpr decoder::family_entry entry = decoder::entry_of<family>();

}  // namespace fused::qwen2
