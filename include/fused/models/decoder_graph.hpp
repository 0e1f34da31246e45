// The pieces a decoder family's graph is written with. A family header (models/qwen2.hpp,
// llama.hpp, ...) writes its forward pass with these, in the order Hugging Face computes it and
// with Hugging Face's weight names; everything below (modes, plans, executors, codegen) is shared.
//
//   layers<Builder> g(c, o);
//   tensor_id x = g.embed();
//   for (int l = 0; l < g.layer_count; ++l) {
//     const auto cache = g.kv_cache(l);
//     const tensor_id h = g.rms_norm(x, {"model.layers.{}.input_layernorm.weight", l}, {"layers.{}.attn_norm", l});
//     ...
//   }
//   return g.logits(x);
//
// Symbols: $1 = tokens in this call, $2 = KV-cache capacity (see decoder_mode.hpp). Result names
// ("layers.{}.q", ...) are the same for every family, so plans and pictures read alike.
#pragma once
#include <cstdint>
#include <utility>

#include <type_traits>
#include <vector>

#include "../graph/builder.hpp"
#include "../ops.hpp"
#include "../ops/sequence_ops.hpp"
#include "../train/step.hpp"
#include "decoder_config.hpp"

namespace fused::decoder {

inline constexpr std::uint8_t sym_tokens = 1;
inline constexpr std::uint8_t sym_ctx = 2;

enum class logits_rows : std::uint8_t {
  last,  // generation: logits of the last position only
  all,   // scoring: logits of every position
};

struct graph_options {
  logits_rows logits = logits_rows::last;
  int layers = -1;  // build only the first N layers (-1: all); for compile-cost measurements and tests
  // A train step (train/step.hpp) instead of inference: parameters are f32 state (master weights),
  // attention reads the call's own keys and values (no KV cache), the logits of every position go
  // into the loss against the input "labels", then the backward steps and the optimizer's.
  // Built by graph_builder (the run-time pipeline); a counting builder does not count those steps.
  bool training = false;
  train::options train{};
  std::int64_t packed = 0;  // training: the rows are sequences of this many tokens back to back (0: one)
};

template <class Builder>
class layers {
 public:
  // `steps_per_layer` / `tensors_per_layer`: the builder's reservation (a hint, not a limit).
  constexpr layers(const config& c, graph_options o, std::size_t tensors_per_layer = 32, std::size_t steps_per_layer = 18)
      : cfg(c), opt(o), layer_count(o.layers < 0 ? c.num_hidden_layers : o.layers) {
    g_.reserve(tensors_per_layer * static_cast<std::size_t>(layer_count) + 8, steps_per_layer * static_cast<std::size_t>(layer_count) + 4);
  }

  const config cfg;
  const graph_options opt;
  const int layer_count;
  const dim tokens = sym(sym_tokens), capacity = sym(sym_ctx);

  constexpr std::int64_t hidden() const { return cfg.hidden_size; }
  constexpr std::int64_t q_features() const { return std::int64_t{cfg.num_attention_heads} * cfg.head_dim; }
  constexpr std::int64_t kv_features() const { return std::int64_t{cfg.num_key_value_heads} * cfg.head_dim; }

  // input_ids [T] through model.embed_tokens.weight [V, H].
  constexpr tensor_id embed() {
    const tensor_id ids = g_.input({"input_ids"}, dtype::i32, shape(tokens));
    embed_w_ = param({"model.embed_tokens.weight"}, shape(cfg.vocab_size, cfg.hidden_size));
    return g_.apply(ops::embed, {ids, embed_w_}, {}, {"embed"});
  }

  struct cache {
    tensor_id key = -1, value = -1;
  };
  // The layer's KV cache: state carried from call to call, [n_kv, capacity, head_dim] each.
  constexpr cache kv_cache(int l) {
    if (opt.training) return {};
    const shape s(cfg.num_key_value_heads, capacity, cfg.head_dim);
    return {g_.state({"cache.layers.{}.key", l}, dtype::bf16, s), g_.state({"cache.layers.{}.value", l}, dtype::bf16, s)};
  }

  // RMSNorm over the hidden size.
  constexpr tensor_id rms_norm(tensor_id x, name_ref weight, name_ref result) {
    const tensor_id w = param(weight, shape(cfg.hidden_size));
    return g_.apply(ops::rms_norm, {x, w}, {.f = cfg.rms_norm_eps}, result);
  }
  // RMSNorm of each head of x [T, heads*head_dim] on its own, with one weight [head_dim] (Qwen3's q/k norm).
  constexpr tensor_id head_rms_norm(tensor_id x, std::int64_t heads, name_ref weight, name_ref result) {
    const tensor_id w = param(weight, shape(cfg.head_dim));
    return g_.apply(ops::head_rms_norm, {x, w}, {.i = {heads, 0, 0, 0}, .f = cfg.rms_norm_eps}, result);
  }

  // x W^T (+ b): `weight` [out, in] as Hugging Face stores it, and optionally a bias [out] (its
  // name is a second pattern: a name_ref is a compile-time pattern, not a string to edit).
  constexpr tensor_id linear(tensor_id x, name_ref weight, std::int64_t out, std::int64_t in, name_ref result) {
    const tensor_id w = param(weight, shape(out, in));
    return g_.apply(opt.training ? ops::linear_f32 : ops::linear, {x, w}, {}, result);
  }
  constexpr tensor_id linear(tensor_id x, name_ref weight, name_ref bias, std::int64_t out, std::int64_t in, name_ref result) {
    const tensor_id w = param(weight, shape(out, in));
    const tensor_id b = param(bias, shape(out));
    return g_.apply(opt.training ? ops::linear_f32 : ops::linear, {x, w, b}, {}, result);
  }
  // Either of the two, as the config says (`with_bias`: attention_bias, mlp_bias).
  constexpr tensor_id linear(tensor_id x, name_ref weight, name_ref bias, bool with_bias, std::int64_t out, std::int64_t in, name_ref result) {
    return with_bias ? linear(x, weight, bias, out, in, result) : linear(x, weight, out, in, result);
  }

  // Rotary position embedding of `heads` heads, with the config's frequencies (plain or llama3).
  constexpr tensor_id rope(tensor_id x, std::int64_t heads, name_ref result) {
    attrs a{.i = {heads, cfg.head_dim, 0, opt.packed}, .f = cfg.rope_theta};
    if (cfg.rope_type == rope_kind::llama3) {
      a.i[2] = cfg.rope_original_max_position_embeddings;
      a.extra[0] = cfg.rope_factor;
      a.extra[1] = cfg.rope_low_freq_factor;
      a.extra[2] = cfg.rope_high_freq_factor;
    }
    return g_.apply(cfg.rope_type == rope_kind::llama3 ? ops::rope_llama3 : ops::rope, {x}, a, result);
  }

  // Writes this call's keys and values into the layer's cache and attends causally over it.
  // Training: causal attention over this call's own keys and values.
  // Training with attention_dropout: the probabilities through a dropout mask keyed by the layer and
  // drawn anew at each optimizer step (the step's number is an input).
  constexpr tensor_id attention(int l, cache kv, tensor_id q, tensor_id k, tensor_id v) {
    if (opt.training) {
      if (cfg.attention_dropout > 0)
        return g_.apply(ops::causal_attention, {q, k, v, step_number()},
                        {.i = {cfg.num_attention_heads, cfg.num_key_value_heads, opt.packed, train::dropout_key(opt.train.seed, static_cast<std::uint32_t>(l))},
                         .f = cfg.attention_dropout},
                        {"layers.{}.attn", l});
      return g_.apply(ops::causal_attention, {q, k, v}, {.i = {cfg.num_attention_heads, cfg.num_key_value_heads, opt.packed, 0}},
                      {"layers.{}.attn", l});
    }
    const tensor_id k_next = g_.apply(ops::kv_write, {k, kv.key}, {}, {"cache.layers.{}.key.next", l});
    const tensor_id v_next = g_.apply(ops::kv_write, {v, kv.value}, {}, {"cache.layers.{}.value.next", l});
    g_.carry_state(kv.key, k_next);
    g_.carry_state(kv.value, v_next);
    return g_.apply(ops::attention, {q, k_next, v_next}, {.i = {cfg.num_attention_heads, 0, 0, 0}}, {"layers.{}.attn", l});
  }

  constexpr tensor_id add(tensor_id a, tensor_id b, name_ref result) { return g_.apply(ops::add, {a, b}, {}, result); }
  constexpr tensor_id swiglu(tensor_id gate, tensor_id up, name_ref result) { return g_.apply(ops::swiglu, {gate, up}, {}, result); }

  // The gated MLP every family here has, Hugging Face's LlamaMLP / Qwen2MLP:
  // down(silu(gate(h)) * up(h)), with biases when `with_bias` (mlp_bias); returns down's result.
  constexpr tensor_id swiglu_mlp(tensor_id h, int l, bool with_bias = false) {
    const std::int64_t H = cfg.hidden_size, F = cfg.intermediate_size;
    const tensor_id gate = linear(h, {"model.layers.{}.mlp.gate_proj.weight", l}, {"model.layers.{}.mlp.gate_proj.bias", l}, with_bias, F, H,
                                  {"layers.{}.gate", l});
    const tensor_id up = linear(h, {"model.layers.{}.mlp.up_proj.weight", l}, {"model.layers.{}.mlp.up_proj.bias", l}, with_bias, F, H,
                                {"layers.{}.up", l});
    const tensor_id act = swiglu(gate, up, {"layers.{}.swiglu", l});
    return linear(act, {"model.layers.{}.mlp.down_proj.weight", l}, {"model.layers.{}.mlp.down_proj.bias", l}, with_bias, H, F,
                  {"layers.{}.down", l});
  }

  // The end of every decoder: (the last position only, for generation,) model.norm, the lm head
  // (tied to the embedding or lm_head.weight), the output "logits".
  // Training: the logits of every position, then the train step (train/step.hpp), output "loss".
  constexpr auto logits(tensor_id x) && {
    if (opt.logits == logits_rows::last && !opt.training) x = g_.apply(ops::take_last, {x}, {}, {"last_position"});
    const tensor_id hf = rms_norm(x, {"model.norm.weight"}, {"final_norm"});
    const tensor_id head = cfg.tie_word_embeddings ? embed_w_ : param({"lm_head.weight"}, shape(cfg.vocab_size, cfg.hidden_size));
    const tensor_id out = g_.apply(opt.training ? ops::linear_f32 : ops::linear, {hf, head}, {}, {"logits"});
    if (!opt.training) g_.output("logits", out);
    if constexpr (std::is_same_v<Builder, graph_builder>)
      if (opt.training) train::append_train_step(g_, out, params_, opt.train, step_count_state_);
    return std::move(g_).finish();
  }

 private:
  // A parameter: a bf16 weight for inference, an f32 state feed (master weight) for training.
  constexpr tensor_id param(name_ref name, shape s) {
    if (!opt.training) return g_.weight(name, dtype::bf16, s);
    const tensor_id p = g_.state(name, dtype::f32, s);
    params_.push_back(p);
    return p;
  }

  // The number of the step being taken (the optimizer's step count + 1), which draws dropout's masks:
  // an activation of its own, made by the first dropout that needs it, since the update advances the
  // count state in place (train/step.hpp) while the backward still draws the forward's masks. A
  // data-parallel shard has no count: the trainer numbers each micro-batch's draw (input "dropout_draw").
  constexpr tensor_id step_number() {
    if (step_number_ >= 0) return step_number_;
    if (opt.train.gradients_only) {
      step_number_ = g_.input({train::dropout_draw_name}, dtype::i32, shape(1));
    } else {
      step_count_state_ = g_.state({train::step_count_name}, dtype::i32, shape(1));
      step_number_ = g_.apply(ops::increment, {step_count_state_}, {.i = {1, 0, 0, 0}}, {"optimizer.step.this"});
    }
    return step_number_;
  }

  Builder g_;
  tensor_id embed_w_ = -1, step_count_state_ = -1, step_number_ = -1;
  std::vector<tensor_id> params_;
};

}  // namespace fused::decoder
