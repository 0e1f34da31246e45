// The Mistral family (model_type "mistral", MistralForCausalLM: Mistral 7B v0.1-v0.3), as Hugging
// Face's MistralForCausalLM computes it: Llama's decoder without biases. Its sliding-window
// attention equals full attention while the KV capacity is within the window; a model whose
// window is smaller than the capacity asked for is refused (decoder_plan.hpp, static_plans), never
// run as full attention.
#pragma once
#include <string_view>

#include "family.hpp"
#include "llama.hpp"

namespace fused::mistral {

using decoder::config;

struct family {
  static constexpr std::string_view model_type = "mistral";
  static constexpr std::string_view architecture = "MistralForCausalLM";

  // Llama's forward pass without biases (MistralAttention and MistralMLP have none, whatever a
  // config says).
  template <class Builder>
  static constexpr auto graph(const config& c, decoder::graph_options o = {}) {
    config no_bias = c;
    no_bias.attention_bias = no_bias.mlp_bias = false;
    return llama::family::graph<Builder>(no_bias, o);
  }

  static void read(const decoder::config_source& in, config& c) {
    if (in.has("sliding_window")) c.sliding_window = in.integer("sliding_window", 1);
  }
};

inline constexpr decoder::family_entry entry = decoder::entry_of<family>();

// Configs of released checkpoints (their config.json), for static models.
namespace presets {
struct mistral_7b_v0_3 {
  using family = mistral::family;
  static constexpr config value{.vocab_size = 32768, .hidden_size = 4096, .intermediate_size = 14336, .num_hidden_layers = 32,
                                .num_attention_heads = 32, .num_key_value_heads = 8, .head_dim = 128, .max_position_embeddings = 32768,
                                .rms_norm_eps = 1e-5, .rope_theta = 1000000.0, .tie_word_embeddings = false};
};
}  // namespace presets

}  // namespace fused::mistral
