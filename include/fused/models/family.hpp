// A model family as the generic decoder sees it. A family is one header (models/qwen2.hpp,
// qwen3.hpp, llama.hpp, mistral.hpp) defining a type with:
//
//   static constexpr std::string_view model_type = "llama";              config.json "model_type"
//   static constexpr std::string_view architecture = "LlamaForCausalLM"; its "architectures" entry
//   template <class Builder>
//   static constexpr auto graph(const config&, graph_options);           the forward pass
//   static void read(const config_source&, config&);                     its own config.json fields
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
};

template <class Family>
constexpr family_entry entry_of() {
  return {Family::model_type, Family::architecture, &Family::template graph<graph_builder>, &Family::read};
}

// A family's program, built at run time or in constant evaluation.
template <class Family>
constexpr program build_graph(const config& c, graph_options o = {}) {
  return Family::template graph<graph_builder>(c, o);
}

}  // namespace fused::decoder
