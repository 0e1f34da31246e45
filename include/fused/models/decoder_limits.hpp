// Size limits of a decoder config known only at run time (a config.json), checked with overflow-safe
// arithmetic before anything is built, planned or allocated. check_sizes() names the config field
// at fault; hf_config.hpp turns that into a load_error, plan_for() into std::invalid_argument.
//
// The limits: a head_dim of at most FK_MAX_HEAD_DIM (kernels/fk_common.h); at most max_layers
// layers (the planner's tables grow with the layer count; the largest released models have 80 to
// 126), and the weights, and the KV cache at max_position_embeddings, each at most
// max_region_bytes (1 PiB, core/checked_size.hpp). Sizes for the tokens and KV
// capacity of one mode are checked by plan_for() on the built graph (find_oversize).
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <utility>

#include <fk_common.h>

#include "../core/checked_size.hpp"
#include "decoder_config.hpp"

namespace fused::decoder {

inline constexpr int max_layers = 1024;

struct size_problem {
  const char* field;    // the config.json field at fault
  std::string message;  // what is wrong, without the field's name
};

inline std::optional<size_problem> check_sizes(const config& c) {
  const auto mul = checked_mul;
  const auto add = checked_add;
  const auto limit = std::to_string(max_region_bytes);
  for (const auto& [field, v] : {std::pair{"vocab_size", c.vocab_size}, {"hidden_size", c.hidden_size},
                                 {"intermediate_size", c.intermediate_size}, {"num_hidden_layers", c.num_hidden_layers},
                                 {"num_attention_heads", c.num_attention_heads}, {"num_key_value_heads", c.num_key_value_heads},
                                 {"head_dim", c.head_dim}, {"max_position_embeddings", c.max_position_embeddings}})
    if (v < 1) return size_problem{field, std::to_string(v) + " must be positive"};
  if (c.head_dim > FK_MAX_HEAD_DIM)  // (the attention and RoPE kernels keep a head's row on the stack)
    return size_problem{"head_dim", std::to_string(c.head_dim) + " is more than the " + std::to_string(FK_MAX_HEAD_DIM) + " the attention kernels take"};
  if (c.num_hidden_layers > max_layers)
    return size_problem{"num_hidden_layers", std::to_string(c.num_hidden_layers) + " is more than the " + std::to_string(max_layers) +
                                                 " layers this library plans"};
  const std::int64_t V = c.vocab_size, H = c.hidden_size, F = c.intermediate_size, L = c.num_hidden_layers;
  const std::int64_t q = mul(c.num_attention_heads, c.head_dim), kv = mul(c.num_key_value_heads, c.head_dim);
  const std::int64_t bf16 = 2;
  const auto over = [&](const char* what) { return " makes the " + std::string(what) + " more than " + limit + " bytes"; };

  const std::int64_t embed = mul(mul(V, H), bf16);
  if (embed < 0) return size_problem{"vocab_size", std::to_string(V) + " times hidden_size " + std::to_string(H) + over("embedding table")};
  // One layer: q, k, v and o (with biases), gate, up and down, and the norms (an upper bound for every family).
  const std::int64_t attention = mul(add(add(mul(add(q, mul(2, kv)), add(H, 1)), mul(q, add(H, 1))), add(mul(3, H), mul(2, c.head_dim))), bf16);
  if (attention < 0)
    return size_problem{"num_attention_heads", std::to_string(c.num_attention_heads) + " heads of head_dim " + std::to_string(c.head_dim) +
                                                   " at hidden_size " + std::to_string(H) + over("attention weights of one layer")};
  const std::int64_t mlp = mul(add(mul(mul(3, F), H), add(mul(2, F), H)), bf16);
  if (mlp < 0)
    return size_problem{"intermediate_size", std::to_string(F) + " times hidden_size " + std::to_string(H) + over("MLP weights of one layer")};
  const std::int64_t layer = add(attention, mlp);
  if (layer < 0)
    return size_problem{"intermediate_size", std::to_string(F) + " at hidden_size " + std::to_string(H) + " with the attention weights" +
                                                 over("weights of one layer")};
  const std::int64_t weights = add(add(mul(L, layer), mul(embed, c.tie_word_embeddings ? 1 : 2)), mul(H, bf16));
  if (weights < 0)
    return size_problem{"num_hidden_layers", std::to_string(L) + " layers of " + std::to_string(layer) + " bytes" + over("weights")};
  const std::int64_t kv_cache = mul(mul(mul(2, L), mul(kv, c.max_position_embeddings)), bf16);
  if (kv_cache < 0)
    return size_problem{"max_position_embeddings", std::to_string(c.max_position_embeddings) + " positions of " + std::to_string(L) +
                                                       " layers of num_key_value_heads " + std::to_string(c.num_key_value_heads) +
                                                       " x head_dim " + std::to_string(c.head_dim) + over("KV cache at that length")};
  return std::nullopt;
}

}  // namespace fused::decoder
