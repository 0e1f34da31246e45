// The Qwen2 graph, as Hugging Face's Qwen2ForCausalLM computes it, built on the generic spine:
//   embed; per layer: rms_norm, q/k/v projections with bias, rope on q and k, KV-cache writes,
//   causal grouped-query attention, o projection, residual add, rms_norm, gate, up, SwiGLU, down,
//   residual add; final norm; lm head (tied to the embedding or untied).
// Weights carry their Hugging Face names, so loading binds them by name once.
// Symbols: $1 = tokens in this call, $2 = KV-cache capacity (see qwen2_mode).
#pragma once
#include <cstdint>

#include "../graph/builder.hpp"
#include "../ops.hpp"
#include "qwen2_config.hpp"

namespace fused::qwen2 {

inline constexpr std::uint8_t sym_tokens = 1;
inline constexpr std::uint8_t sym_ctx = 2;

enum class logits_rows : std::uint8_t {
  last,  // generation: logits of the last position only
  all,   // scoring: logits of every position
};

struct graph_options {
  logits_rows logits = logits_rows::last;
  int layers = -1;  // build only the first N layers (-1: all); for compile-cost measurements and tests
};

// Builds into any builder with graph_builder's interface (counting_builder: sizes only).
template <class Builder>
constexpr auto build_graph_with(const config& c, graph_options o = {}) {
  Builder g;
  const std::int64_t H = c.hidden_size, F = c.intermediate_size, V = c.vocab_size;
  const std::int64_t nh = c.num_attention_heads, nkv = c.num_key_value_heads, hd = c.head_dim;
  const dim T = sym(sym_tokens), C = sym(sym_ctx);
  const int L = o.layers < 0 ? c.num_hidden_layers : o.layers;
  g.reserve(static_cast<std::size_t>(31 * L + 8), static_cast<std::size_t>(17 * L + 4));

  const tensor_id ids = g.input({"input_ids"}, dtype::i32, shape(T));
  const tensor_id embed_w = g.weight({"model.embed_tokens.weight"}, dtype::bf16, shape(V, H));
  tensor_id x = g.apply(ops::embed, {ids, embed_w}, {}, {"embed"});

  for (int l = 0; l < L; ++l) {
    auto w = [&](const char* pattern, shape s) { return g.weight({pattern, l}, dtype::bf16, s); };
    const tensor_id k_cache = g.state({"cache.layers.{}.key", l}, dtype::bf16, shape(nkv, C, hd));
    const tensor_id v_cache = g.state({"cache.layers.{}.value", l}, dtype::bf16, shape(nkv, C, hd));

    const tensor_id h = g.apply(ops::rms_norm, {x, w("model.layers.{}.input_layernorm.weight", shape(H))}, {.f = c.rms_norm_eps},
                                {"layers.{}.attn_norm", l});
    const tensor_id q = g.apply(ops::linear, {h, w("model.layers.{}.self_attn.q_proj.weight", shape(nh * hd, H)),
                                              w("model.layers.{}.self_attn.q_proj.bias", shape(nh * hd))}, {}, {"layers.{}.q", l});
    const tensor_id k = g.apply(ops::linear, {h, w("model.layers.{}.self_attn.k_proj.weight", shape(nkv * hd, H)),
                                              w("model.layers.{}.self_attn.k_proj.bias", shape(nkv * hd))}, {}, {"layers.{}.k", l});
    const tensor_id v = g.apply(ops::linear, {h, w("model.layers.{}.self_attn.v_proj.weight", shape(nkv * hd, H)),
                                              w("model.layers.{}.self_attn.v_proj.bias", shape(nkv * hd))}, {}, {"layers.{}.v", l});
    const tensor_id qr = g.apply(ops::rope, {q}, {.i = {nh, hd, 0, 0}, .f = c.rope_theta}, {"layers.{}.q_rope", l});
    const tensor_id kr = g.apply(ops::rope, {k}, {.i = {nkv, hd, 0, 0}, .f = c.rope_theta}, {"layers.{}.k_rope", l});
    const tensor_id k_next = g.apply(ops::kv_write, {kr, k_cache}, {}, {"cache.layers.{}.key.next", l});
    const tensor_id v_next = g.apply(ops::kv_write, {v, v_cache}, {}, {"cache.layers.{}.value.next", l});
    g.carry_state(k_cache, k_next);
    g.carry_state(v_cache, v_next);
    const tensor_id a = g.apply(ops::attention, {qr, k_next, v_next}, {.i = {nh, 0, 0, 0}}, {"layers.{}.attn", l});
    const tensor_id o_ = g.apply(ops::linear, {a, w("model.layers.{}.self_attn.o_proj.weight", shape(H, nh * hd))}, {}, {"layers.{}.attn_out", l});
    x = g.apply(ops::add, {x, o_}, {}, {"layers.{}.resid_attn", l});
    const tensor_id h2 = g.apply(ops::rms_norm, {x, w("model.layers.{}.post_attention_layernorm.weight", shape(H))}, {.f = c.rms_norm_eps},
                                 {"layers.{}.mlp_norm", l});
    const tensor_id gate = g.apply(ops::linear, {h2, w("model.layers.{}.mlp.gate_proj.weight", shape(F, H))}, {}, {"layers.{}.gate", l});
    const tensor_id up = g.apply(ops::linear, {h2, w("model.layers.{}.mlp.up_proj.weight", shape(F, H))}, {}, {"layers.{}.up", l});
    const tensor_id act = g.apply(ops::swiglu, {gate, up}, {}, {"layers.{}.swiglu", l});
    const tensor_id down = g.apply(ops::linear, {act, w("model.layers.{}.mlp.down_proj.weight", shape(H, F))}, {}, {"layers.{}.down", l});
    x = g.apply(ops::add, {x, down}, {}, {"layers.{}.resid_mlp", l});
  }

  if (o.logits == logits_rows::last) x = g.apply(ops::take_last, {x}, {}, {"last_position"});
  const tensor_id norm_w = g.weight({"model.norm.weight"}, dtype::bf16, shape(H));
  const tensor_id hf = g.apply(ops::rms_norm, {x, norm_w}, {.f = c.rms_norm_eps}, {"final_norm"});
  const tensor_id head = c.tie_word_embeddings ? embed_w : g.weight({"lm_head.weight"}, dtype::bf16, shape(V, H));
  const tensor_id logits = g.apply(ops::linear, {hf, head}, {}, {"logits"});
  g.output("logits", logits);
  return std::move(g).finish();
}

constexpr program build_graph(const config& c, graph_options o = {}) { return build_graph_with<graph_builder>(c, o); }

}  // namespace fused::qwen2
