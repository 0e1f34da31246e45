// A model family as the generic decoder sees it. A family is one header (models/qwen2.hpp,
// qwen3.hpp, llama.hpp, mistral.hpp) defining a type with:
//
//   static constexpr std::string_view model_type = "llama";              config.json "model_type"
//   static constexpr std::string_view architecture = "LlamaForCausalLM"; its "architectures" entry
//   template <class Builder>
//   static constexpr auto graph(const config&, graph_options);           the forward pass
//   static void read(const config_source&, config&);                     its own config.json fields
//   static constexpr int default_head_dim = 128;  (optional) head_dim when config.json has no key
//
// Everything else (modes, plans, the static and run-time models, codegen, the CLI) takes the family
// as a type (static models) or as a family_entry (run time, picked by model_type in registry.hpp).
#pragma once
#include <string_view>

#include "../graph/builder.hpp"
#include "decoder_config.hpp"
#include "decoder_graph.hpp"

namespace fused::decoder {

// The fields of one config.json, as a family reads those that are its own: the common ones
// (sizes, heads, norms, RoPE, tie_word_embeddings) are read before `read` is called. An interface,
// so that family headers, which every static model compiles, need no JSON library. Keys may be
// dotted ("rope_scaling.factor"); every error names the file and the field.
class config_source {
 public:
  virtual bool has(std::string_view key) const = 0;                      // present and not null
  virtual bool boolean(std::string_view key, bool fallback) const = 0;   // fallback when absent
  virtual int integer(std::string_view key, int min_value) const = 0;    // required
  [[noreturn]] virtual void fail(std::string_view key, std::string_view message) const = 0;

 protected:
  ~config_source() = default;
};

struct family_entry {
  std::string_view model_type;
  std::string_view architecture;
  program (*graph)(const config&, graph_options);
  void (*read)(const config_source&, config&);
  // head_dim of a config.json that has no "head_dim" key: 0 = hidden_size / num_attention_heads (as
  // for null), or the family's config class default (a family's `default_head_dim`).
  int head_dim_when_absent = 0;
};

template <class Family>
constexpr family_entry entry_of() {
  int head_dim_when_absent = 0;
  if constexpr (requires { Family::default_head_dim; }) head_dim_when_absent = Family::default_head_dim;
  return {.model_type = Family::model_type,
          .architecture = Family::architecture,
          .graph = &Family::template graph<graph_builder>,
          .read = &Family::read,
          .head_dim_when_absent = head_dim_when_absent};
}

// A family's program, built at run time or in constant evaluation.
template <class Family>
constexpr program build_graph(const config& c, graph_options o = {}) {
  return Family::template graph<graph_builder>(c, o);
}

}  // namespace fused::decoder
