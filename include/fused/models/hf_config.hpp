// Hugging Face config.json -> the family (registry.hpp, by "model_type") and its decoder::config,
// validated.
//
// Both formats transformers writes are read:
//   transformers 4: top-level "rope_theta" (and optional "rope_scaling"), "torch_dtype";
//   transformers 5: "rope_parameters": {"rope_theta", "rope_type", ...}, "dtype".
// The common fields are read here, with transformers' defaults where a real checkpoint may rely on
// one (num_key_value_heads = num_attention_heads, head_dim = hidden_size / num_attention_heads,
// tie_word_embeddings = false); the fields that define the weights' shapes are required. Then the
// family reads its own (attention_bias, sliding_window, ...). Anything this library cannot run
// faithfully (another architecture, sliding windows that matter, RoPE other than default and
// llama3, another activation, quantized weights) is refused rather than run wrongly. Every error
// is one load_error naming the file and the field. Sizes are bounded too (decoder_limits.hpp): a
// config the parser accepts can be planned without overflow.
//
// config_differences() compares two configs field by field through Hana reflection of
// decoder::config, so adding a field there is all it takes for every check to cover it.
#pragma once
#include "fused/core/json_text.hpp"
#include "fused/io/json_config.hpp"
#include "fused/models/decoder_config.hpp"
#include "fused/models/decoder_config_fields.hpp"
#include "fused/models/decoder_limits.hpp"
#include "fused/models/registry.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <climits>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace fused::decoder {

// What the run time needs from config.json: the family, the architecture, and the facts
// generation uses.
struct hf_model_info {
  const family_entry* family = nullptr;
  config arch;
  std::vector<int> eos_token_ids;   // "eos_token_id": an id or a list; empty when null or absent
  std::optional<int> bos_token_id;  // "bos_token_id": nullopt when null or absent
  std::string dtype;                // "dtype" (t5) or "torch_dtype" (t4), e.g. "bfloat16"; may be empty
};

namespace detail {

using io::detail::config_reader;

// config_source over one config.json object: what a family's read() sees.
class json_source final : public config_source {
 public:
  explicit json_source(const config_reader& r) : r_(r) {}
  bool has(std::string_view key) const override { return find(key) != nullptr; }
  bool boolean(std::string_view key, bool fallback) const override {
    const nlohmann::json* v = find(key);
    return v == nullptr ? fallback : r_.boolean(key, *v);
  }
  int integer(std::string_view key, int min_value) const override {
    const nlohmann::json* v = find(key);
    if (v == nullptr) r_.fail(key, "is missing");
    return r_.integer(key, *v, min_value);
  }
  [[noreturn]] void fail(std::string_view key, std::string_view message) const override { r_.fail(key, "{}", message); }

 private:
  // A dotted key walks nested objects: "rope_scaling.factor".
  const nlohmann::json* find(std::string_view key) const {
    const nlohmann::json* at = nullptr;
    std::string_view rest = key;
    for (bool first = true; first || !rest.empty(); first = false) {
      const std::size_t dot = rest.find('.');
      const std::string_view part = rest.substr(0, dot);
      rest = dot == std::string_view::npos ? std::string_view{} : rest.substr(dot + 1);
      at = first ? r_.get(part) : (at->is_object() ? config_reader::get(*at, part) : nullptr);
      if (at == nullptr) return nullptr;
    }
    return at;
  }
  const config_reader& r_;
};

// RoPE: rope_theta at top level (t4) or in rope_parameters (t5); the kind ("rope_type", or "type"
// in older files) in rope_scaling (t4) or rope_parameters (t5): "default", or "llama3" with its
// factor, low/high frequency factors and original_max_position_embeddings.
inline void read_rope(const config_reader& r, config& c) {
  const auto read_kind = [&](std::string_view key, const nlohmann::json& params) {
    if (!params.is_object()) r.fail(key, "must be an object, got {}", json_text::excerpt(params));
    for (const char* type_key : {"rope_type", "type"}) {
      const nlohmann::json* t = config_reader::get(params, type_key);
      if (t == nullptr) continue;
      const std::string name = fmt::format("{}.{}", key, type_key);
      const std::string& kind = r.string(name, *t);
      if (kind == "default") return;
      if (kind != "llama3")
        r.fail(name, "{} is not supported (only \"default\" and \"llama3\" RoPE)", json_text::excerpt(*t));
      c.rope_type = rope_kind::llama3;
      const auto real = [&](const char* field) {
        const nlohmann::json* v = config_reader::get(params, field);
        const std::string full = fmt::format("{}.{}", key, field);
        if (v == nullptr) r.fail(full, "is missing (rope_type \"llama3\" needs it)");
        return r.positive_real(full, *v);
      };
      c.rope_factor = real("factor");
      c.rope_low_freq_factor = real("low_freq_factor");
      c.rope_high_freq_factor = real("high_freq_factor");
      const std::string original = fmt::format("{}.original_max_position_embeddings", key);
      const nlohmann::json* o = config_reader::get(params, "original_max_position_embeddings");
      if (o == nullptr) r.fail(original, "is missing (rope_type \"llama3\" needs it)");
      c.rope_original_max_position_embeddings = r.integer(original, *o, 1);
      if (c.rope_factor < 1) r.fail(fmt::format("{}.factor", key), "{} must be at least 1", c.rope_factor);
      if (!(c.rope_high_freq_factor > c.rope_low_freq_factor))
        r.fail(fmt::format("{}.high_freq_factor", key), "{} must be greater than low_freq_factor {}", c.rope_high_freq_factor,
               c.rope_low_freq_factor);
      return;
    }
    // No kind: transformers fails looking one up; scaling parameters read as plain RoPE would be wrong.
    for (const auto& [field, value] : params.items())
      if (field != "rope_theta")
        r.fail(key, "gives \"{}\" but no \"rope_type\" (or \"type\"): which RoPE it scales by is not said", field);
  };
  std::optional<double> top, nested;
  if (const nlohmann::json* v = r.get("rope_theta")) top = r.positive_real("rope_theta", *v);
  const nlohmann::json* scaling = r.get("rope_scaling");
  const nlohmann::json* params = r.get("rope_parameters");
  if (scaling != nullptr) read_kind("rope_scaling", *scaling);
  if (params != nullptr) {
    if (scaling != nullptr && c.rope_type != rope_kind::plain) {
      const config before = c;
      read_kind("rope_parameters", *params);
      if (!(before == c)) r.fail("rope_parameters", "disagrees with rope_scaling");
    } else {
      read_kind("rope_parameters", *params);
    }
    if (const nlohmann::json* v = config_reader::get(*params, "rope_theta"))
      nested = r.positive_real("rope_parameters.rope_theta", *v);
  }
  // RoPE over part of each head (Phi, some GLM) rotates other dims than the kernels do: refused, not
  // run as full RoPE. 1 is full RoPE.
  const auto refuse_partial = [&](std::string_view key, const nlohmann::json& v) {
    if (r.positive_real(key, v) != 1.0)
      r.fail(key, "{} is not supported (RoPE over the whole head_dim only)", json_text::excerpt(v));
  };
  if (const nlohmann::json* v = r.get("partial_rotary_factor")) refuse_partial("partial_rotary_factor", *v);
  if (params != nullptr && params->is_object())
    if (const nlohmann::json* v = config_reader::get(*params, "partial_rotary_factor"))
      refuse_partial("rope_parameters.partial_rotary_factor", *v);
  if (top && nested && *top != *nested)
    r.fail("rope_theta", "{} disagrees with rope_parameters.rope_theta {}", *top, *nested);
  // None given: transformers' default, 10000 in the config class of every family this build runs
  // (older Llama 2 era files leave it out).
  c.rope_theta = nested ? *nested : top ? *top : 10000.0;
  // Below 1 the frequencies grow with the dim instead of falling, and the angles overflow within a
  // few positions: every logit NaN, blamed on the activations. No model has such a base.
  if (c.rope_theta < 1)
    r.fail(nested ? "rope_parameters.rope_theta" : "rope_theta", "{} must be at least 1 (RoPE's base)", c.rope_theta);
}

template <class T>
T printable(T v) { return v; }
inline const char* printable(rope_kind k) { return name_of(k); }

inline std::string known_model_types() {
  std::string s;
  for (const family_entry& f : families) s += (s.empty() ? "\"" : ", \"") + std::string(f.model_type) + "\"";
  return s;
}

// The family: by model_type, else by the architectures list; both must agree when both are there.
inline const family_entry& find_family_of(const config_reader& r) {
  const nlohmann::json* model_type = r.get("model_type");
  const nlohmann::json* architectures = r.get("architectures");
  const family_entry* f = nullptr;
  if (model_type != nullptr) {
    f = find_family(r.string("model_type", *model_type));
    if (f == nullptr) r.fail("model_type", "{} is not supported (supported: {})", json_text::excerpt(*model_type), known_model_types());
  }
  if (architectures != nullptr) {
    if (!architectures->is_array()) r.fail("architectures", "must be a list, got {}", json_text::excerpt(*architectures));
    const family_entry* by_architecture = nullptr;  // the first one named that this build runs
    bool names_f = false;                           // model_type's family is among them
    for (const nlohmann::json& a : *architectures)
      if (const family_entry* g = a.is_string() ? find_family(a.get_ref<const std::string&>(), true) : nullptr) {
        if (by_architecture == nullptr) by_architecture = g;
        names_f = names_f || g == f;
      }
    if (f != nullptr && !names_f)
      r.fail("architectures", "{} does not include \"{}\"", json_text::excerpt(*architectures), f->architecture);
    if (by_architecture == nullptr)
      r.fail("architectures", "{} names no supported architecture", json_text::excerpt(*architectures));
    if (f == nullptr) f = by_architecture;
  }
  if (f == nullptr) r.fail("model_type", "is missing, and so is \"architectures\": cannot tell which model this is");
  return *f;
}

inline void check_unsupported(const config_reader& r) {
  if (const nlohmann::json* act = r.get("hidden_act"); act != nullptr && r.string("hidden_act", *act) != "silu")
    r.fail("hidden_act", "{} is not supported (only \"silu\")", json_text::excerpt(*act));
  if (const nlohmann::json* sw = r.get("use_sliding_window"); sw != nullptr && r.boolean("use_sliding_window", *sw))
    r.fail("use_sliding_window", "true is not supported (only full attention)");
  if (r.get("quantization_config") != nullptr)
    r.fail("quantization_config", "quantized checkpoints are not supported (bf16, f16 or f32 weights only)");
  for (const char* moe : {"num_experts", "num_local_experts", "n_routed_experts"})
    if (r.get(moe) != nullptr) r.fail(moe, "mixture-of-experts models are not supported");
}

}  // namespace detail

// Parses and validates the text of a config.json; `file` starts every message.
inline hf_model_info parse_hf_config(std::string_view json_text, std::string_view file = "config.json") {
  const nlohmann::json root = io::detail::parse_json_object(json_text, file);
  const detail::config_reader r(root, file);
  hf_model_info info;
  info.family = &detail::find_family_of(r);
  detail::check_unsupported(r);

  config& c = info.arch;
  c.vocab_size = r.positive("vocab_size");
  c.hidden_size = r.positive("hidden_size");
  c.intermediate_size = r.positive("intermediate_size");
  c.num_hidden_layers = r.positive("num_hidden_layers");
  c.num_attention_heads = r.positive("num_attention_heads");
  const nlohmann::json* kv = r.get("num_key_value_heads");
  c.num_key_value_heads = kv != nullptr ? r.integer("num_key_value_heads", *kv, 1) : c.num_attention_heads;
  if (c.num_attention_heads % c.num_key_value_heads != 0)
    r.fail("num_key_value_heads", "{} does not divide num_attention_heads {}", c.num_key_value_heads, c.num_attention_heads);
  if (const nlohmann::json* hd = r.get("head_dim")) {
    c.head_dim = r.integer("head_dim", *hd, 1);
  } else if (!r.contains("head_dim") && info.family->head_dim_when_absent != 0) {
    c.head_dim = info.family->head_dim_when_absent;
  } else {
    if (c.hidden_size % c.num_attention_heads != 0)
      r.fail("num_attention_heads", "{} does not divide hidden_size {} (and there is no \"head_dim\")", c.num_attention_heads,
             c.hidden_size);
    c.head_dim = c.hidden_size / c.num_attention_heads;
  }
  if (c.head_dim % 2 != 0) r.fail("head_dim", "{} must be even (RoPE rotates pairs of dimensions)", c.head_dim);
  if (static_cast<std::int64_t>(c.head_dim) * c.num_attention_heads > INT_MAX)
    r.fail("head_dim", "{} times num_attention_heads {} does not fit in an int", c.head_dim, c.num_attention_heads);
  c.max_position_embeddings = r.positive("max_position_embeddings");
  c.rms_norm_eps = r.positive_real("rms_norm_eps", r.require("rms_norm_eps"), 1.0);
  detail::read_rope(r, c);
  if (const nlohmann::json* p = r.get("attention_dropout")) {
    if (!p->is_number() || !std::isfinite(p->get<double>()) || p->get<double>() < 0 || p->get<double>() >= 1)
      r.fail("attention_dropout", "must be a probability in [0, 1), got {}", json_text::excerpt(*p));
    c.attention_dropout = p->get<double>();
  }
  const nlohmann::json* tie = r.get("tie_word_embeddings");
  c.tie_word_embeddings = tie != nullptr && r.boolean("tie_word_embeddings", *tie);
  info.family->read(detail::json_source(r), c);
  // Byte counts of the weights and the KV cache, overflow-safe, before anything uses them.
  if (const auto p = check_sizes(c)) r.fail(p->field, "{}", p->message);

  if (const nlohmann::json* layer_types = r.get("layer_types")) {
    if (!layer_types->is_array() || layer_types->size() != static_cast<std::size_t>(c.num_hidden_layers))
      r.fail("layer_types", "must be a list of num_hidden_layers {} entries, got {}", c.num_hidden_layers,
             json_text::excerpt(*layer_types));
    for (const nlohmann::json& t : *layer_types)
      if (t != "full_attention")
        r.fail("layer_types", "{} is not supported (only \"full_attention\" layers)", json_text::excerpt(t));
  }

  info.eos_token_ids = io::detail::read_token_ids(r, "eos_token_id", c.vocab_size);
  const std::vector<int> bos = io::detail::read_token_ids(r, "bos_token_id", c.vocab_size);
  if (bos.size() > 1) r.fail("bos_token_id", "must be one id, got {}", bos.size());
  if (!bos.empty()) info.bos_token_id = bos[0];
  for (const char* key : {"dtype", "torch_dtype"}) {  // transformers 5 name first
    if (const nlohmann::json* d = r.get(key)) {
      info.dtype = r.string(key, *d);
      break;
    }
  }
  return info;
}

// Reads a config.json; `path` may also be a model directory holding one.
inline hf_model_info load_hf_config(const std::filesystem::path& path) {
  std::error_code ec;
  const std::filesystem::path file = std::filesystem::is_directory(path, ec) ? path / "config.json" : path;
  return parse_hf_config(io::detail::read_text_file(file), file.string());
}

// Applies a generation_config.json: its eos/bos token ids, when set, replace those of config.json,
// as transformers' generate() does (instruct checkpoints list their chat end token only there).
inline void apply_generation_config(std::string_view json_text, std::string_view file, hf_model_info& info) {
  const nlohmann::json root = io::detail::parse_json_object(json_text, file);
  const detail::config_reader r(root, file);
  if (r.get("eos_token_id") != nullptr)
    info.eos_token_ids = io::detail::read_token_ids(r, "eos_token_id", info.arch.vocab_size);
  if (r.get("bos_token_id") != nullptr) {
    const std::vector<int> bos = io::detail::read_token_ids(r, "bos_token_id", info.arch.vocab_size);
    if (bos.size() != 1) r.fail("bos_token_id", "must be one id, got {}", bos.size());
    info.bos_token_id = bos[0];
  }
}

// A model directory's config.json, with its generation_config.json applied when there is one.
inline hf_model_info load_hf_model_info(const std::filesystem::path& model_dir) {
  // (read as the file it must be: load_hf_config would look inside a directory of that name)
  const std::filesystem::path config = model_dir / "config.json";
  hf_model_info info = parse_hf_config(io::detail::read_text_file(config), config.string());
  const std::filesystem::path generation = model_dir / "generation_config.json";
  std::error_code ec;
  if (std::filesystem::exists(generation, ec))
    apply_generation_config(io::detail::read_text_file(generation), generation.string(), info);
  return info;
}

// Every field of config whose value differs, as "name: expected E, got A", in declaration
// order. The fields come from Hana reflection, so there is no second list to keep in step.
inline std::vector<std::string> config_differences(const config& expected, const config& actual) {
  std::vector<std::string> out;
  boost::hana::for_each(boost::hana::accessors<config>(), [&](auto field) {
    const auto value = boost::hana::second(field);
    if (value(expected) != value(actual))
      out.push_back(fmt::format("{}: expected {}, got {}", boost::hana::to<const char*>(boost::hana::first(field)),
                                detail::printable(value(expected)), detail::printable(value(actual))));
  });
  return out;
}

// Whether a config.json describes exactly the model a preset compiles: its family and every field.
template <class Preset>
bool is_model_of(const hf_model_info& info) {
  return info.family != nullptr && info.family->model_type == Preset::family::model_type &&
         config_differences(Preset::value, info.arch).empty();
}

// Throws a load_error naming `file` and listing every differing field, if any differ.
inline void check_matches(const config& expected, const config& actual, std::string_view file) {
  const std::vector<std::string> diffs = config_differences(expected, actual);
  if (diffs.empty()) return;
  io::throw_load_error(file, "does not match the config this program was compiled for ({} field{} differ{}): {}",
                   diffs.size(), diffs.size() == 1 ? "" : "s", diffs.size() == 1 ? "s" : "",
                   fmt::join(diffs, "; "));
}

}  // namespace fused::decoder
