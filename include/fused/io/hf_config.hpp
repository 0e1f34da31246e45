// Hugging Face config.json -> fused::qwen2::config, validated.
//
// Both formats transformers writes are read:
//   transformers 4: top-level "rope_theta" (and optional "rope_scaling"), "torch_dtype";
//   transformers 5: "rope_parameters": {"rope_theta", "rope_type"}, "dtype".
// Defaults follow transformers' Qwen2Config where it has one that a real checkpoint may rely on
// (num_key_value_heads = num_attention_heads, head_dim = hidden_size / num_attention_heads,
// tie_word_embeddings = false); the fields that define the weights' shapes are required.
// Anything this library cannot run faithfully (another architecture, sliding-window attention,
// scaled RoPE, another activation, quantized weights) is refused rather than run wrongly.
// Every error is one load_error naming the file and the field. Sizes are bounded too
// (qwen2_limits.hpp): a config the parser accepts can be planned without overflow.
//
// config_differences() compares two configs field by field through Hana reflection of
// qwen2::config, so adding a field there is all it takes for every check to cover it.
#pragma once
#include "fused/io/load_error.hpp"
#include "fused/models/qwen2_config.hpp"
#include "fused/models/qwen2_limits.hpp"

#include "fused/models/qwen2_config_fields.hpp"
#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cerrno>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <optional>
#include <sstream>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

namespace fused::io {

// What the run time needs from config.json: the architecture, and the facts generation uses.
struct hf_model_info {
  qwen2::config arch;
  std::vector<int> eos_token_ids;   // "eos_token_id": an id or a list; empty when null or absent
  std::optional<int> bos_token_id;  // "bos_token_id": nullopt when null or absent
  std::string dtype;                // "dtype" (t5) or "torch_dtype" (t4), e.g. "bfloat16"; may be empty
};

namespace detail {

// Reads the fields of one config.json object; every accessor reports errors with the file name.
class config_reader {
 public:
  config_reader(const nlohmann::json& root, std::string_view file) : root_(root), file_(file) {}

  // The value of `key` in `object`, or nullptr when absent or null (transformers writes null for
  // "not set", e.g. "pad_token_id": null).
  static const nlohmann::json* get(const nlohmann::json& object, std::string_view key) {
    const auto it = object.find(key);
    return it == object.end() || it->is_null() ? nullptr : &*it;
  }
  const nlohmann::json* get(std::string_view key) const { return get(root_, key); }

  const nlohmann::json& require(std::string_view key) const {
    const nlohmann::json* v = get(key);
    if (v == nullptr) fail(key, "is missing");
    return *v;
  }

  // An integer >= min_value that fits in int.
  int integer(std::string_view key, const nlohmann::json& v, int min_value) const {
    if (!v.is_number_integer()) fail(key, "must be an integer, got {}", excerpt(v));
    if (v.is_number_unsigned() ? v.get<std::uint64_t>() > static_cast<std::uint64_t>(INT_MAX)
                               : v.get<std::int64_t>() < INT_MIN)
      fail(key, "{} is out of range", excerpt(v));
    const int i = v.get<int>();
    if (i < min_value) fail(key, "{} must be {}", i, min_value == 1 ? "positive" : "non-negative");
    return i;
  }
  int positive(std::string_view key) const { return integer(key, require(key), 1); }

  // A finite number > 0 (and < upper_bound when given).
  double positive_real(std::string_view key, const nlohmann::json& v,
                       std::optional<double> upper_bound = std::nullopt) const {
    if (!v.is_number()) fail(key, "must be a number, got {}", excerpt(v));
    const double d = v.get<double>();
    if (!std::isfinite(d) || d <= 0 || (upper_bound && d >= *upper_bound))
      fail(key, "{} must be positive{}", excerpt(v), upper_bound ? fmt::format(" and below {}", *upper_bound) : "");
    return d;
  }

  const std::string& string(std::string_view key, const nlohmann::json& v) const {
    if (!v.is_string()) fail(key, "must be a string, got {}", excerpt(v));
    return v.get_ref<const std::string&>();
  }

  bool boolean(std::string_view key, const nlohmann::json& v) const {
    if (!v.is_boolean()) fail(key, "must be true or false, got {}", excerpt(v));
    return v.get<bool>();
  }

  template <class... Args>
  [[noreturn]] void fail(std::string_view key, fmt::format_string<Args...> format, Args&&... args) const {
    throw_load_error(file_, "field \"{}\": {}", key, fmt::format(format, std::forward<Args>(args)...));
  }

  // A JSON value as a short string for messages: a hostile file can hold megabytes in one value.
  static std::string excerpt(const nlohmann::json& j) {
    std::string s = j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    constexpr std::size_t max_chars = 60;
    if (s.size() > max_chars) s = s.substr(0, max_chars) + "...";
    return s;
  }

  std::string_view file() const { return file_; }

 private:
  const nlohmann::json& root_;
  std::string_view file_;
};

// RoPE: rope_theta at top level (t4) or in rope_parameters (t5); only the default (unscaled) kind.
inline double read_rope_theta(const config_reader& r) {
  const auto require_default = [&](std::string_view key, const nlohmann::json& params) {
    if (!params.is_object()) r.fail(key, "must be an object, got {}", config_reader::excerpt(params));
    for (const char* type_key : {"rope_type", "type"}) {  // "type" is the older spelling
      if (const nlohmann::json* t = config_reader::get(params, type_key)) {
        const std::string name = fmt::format("{}.{}", key, type_key);
        if (r.string(name, *t) != "default")
          r.fail(name, "{} is not supported (only \"default\" RoPE, without scaling)", config_reader::excerpt(*t));
      }
    }
  };
  std::optional<double> top, nested;
  if (const nlohmann::json* v = r.get("rope_theta")) top = r.positive_real("rope_theta", *v);
  if (const nlohmann::json* scaling = r.get("rope_scaling")) require_default("rope_scaling", *scaling);
  if (const nlohmann::json* params = r.get("rope_parameters")) {
    require_default("rope_parameters", *params);
    if (const nlohmann::json* v = config_reader::get(*params, "rope_theta"))
      nested = r.positive_real("rope_parameters.rope_theta", *v);
  }
  if (top && nested && *top != *nested)
    r.fail("rope_theta", "{} disagrees with rope_parameters.rope_theta {}", *top, *nested);
  if (!top && !nested)
    r.fail("rope_theta", "is missing (expected at top level, or in \"rope_parameters\" since transformers 5)");
  return nested ? *nested : *top;
}

inline void check_architecture(const config_reader& r) {
  const nlohmann::json* model_type = r.get("model_type");
  if (model_type != nullptr && r.string("model_type", *model_type) != "qwen2")
    r.fail("model_type", "{} is not \"qwen2\"", config_reader::excerpt(*model_type));
  const nlohmann::json* architectures = r.get("architectures");
  if (architectures != nullptr) {
    if (!architectures->is_array())
      r.fail("architectures", "must be a list, got {}", config_reader::excerpt(*architectures));
    bool causal_lm = false;
    for (const nlohmann::json& a : *architectures) causal_lm = causal_lm || a == "Qwen2ForCausalLM";
    if (!causal_lm)
      r.fail("architectures", "{} does not include \"Qwen2ForCausalLM\"", config_reader::excerpt(*architectures));
  }
  if (model_type == nullptr && architectures == nullptr)
    r.fail("model_type", "is missing, and so is \"architectures\": cannot tell that this is a Qwen2 model");

  if (const nlohmann::json* act = r.get("hidden_act"); act != nullptr && r.string("hidden_act", *act) != "silu")
    r.fail("hidden_act", "{} is not supported (Qwen2 uses \"silu\")", config_reader::excerpt(*act));
  if (const nlohmann::json* sw = r.get("use_sliding_window"); sw != nullptr && r.boolean("use_sliding_window", *sw))
    r.fail("use_sliding_window", "true is not supported (only full attention)");
  if (r.get("quantization_config") != nullptr)
    r.fail("quantization_config", "quantized checkpoints are not supported (bf16, f16 or f32 weights only)");
}

inline std::vector<int> read_token_ids(const config_reader& r, std::string_view key, int vocab_size) {
  std::vector<int> ids;
  const nlohmann::json* v = r.get(key);
  if (v == nullptr) return ids;
  if (v->is_array()) {
    for (const nlohmann::json& id : *v) ids.push_back(r.integer(key, id, 0));
  } else {
    ids.push_back(r.integer(key, *v, 0));
  }
  for (int id : ids)
    if (id >= vocab_size) r.fail(key, "{} is not below vocab_size {}", id, vocab_size);
  return ids;
}

// Parses with a nesting limit (config.json is shallow; this bounds the work a hostile file can
// cause) and refuses a repeated top-level key (the parser would silently keep the last one).
inline nlohmann::json parse_json_object(std::string_view text, std::string_view file) {
  using nlohmann::json;
  std::unordered_set<std::string> keys;
  const auto guard = [&](int depth, json::parse_event_t event, json& parsed) {
    constexpr int max_depth = 32;
    if ((event == json::parse_event_t::object_start || event == json::parse_event_t::array_start) &&
        depth >= max_depth)
      throw_load_error(file, "JSON nests deeper than {} levels", max_depth);
    if (event == json::parse_event_t::key && depth == 1 && !keys.insert(parsed.get<std::string>()).second)
      throw_load_error(file, "field \"{}\" appears twice", parsed.get<std::string>());
    return true;
  };
  json root;
  try {
    root = json::parse(text.begin(), text.end(), guard);
  } catch (const json::exception& e) {
    throw_load_error(file, "not valid JSON: {}", e.what());
  }
  if (!root.is_object()) throw_load_error(file, "not a JSON object");
  return root;
}

}  // namespace detail

// Parses and validates the text of a config.json; `file` starts every message.
inline hf_model_info parse_hf_config(std::string_view json_text, std::string_view file = "config.json") {
  const nlohmann::json root = detail::parse_json_object(json_text, file);
  const detail::config_reader r(root, file);
  detail::check_architecture(r);

  hf_model_info info;
  qwen2::config& c = info.arch;
  c.vocab_size = r.positive("vocab_size");
  c.hidden_size = r.positive("hidden_size");
  c.intermediate_size = r.positive("intermediate_size");
  c.num_hidden_layers = r.positive("num_hidden_layers");
  c.num_attention_heads = r.positive("num_attention_heads");
  const nlohmann::json* kv = r.get("num_key_value_heads");
  c.num_key_value_heads = kv != nullptr ? r.integer("num_key_value_heads", *kv, 1) : c.num_attention_heads;
  if (c.num_attention_heads % c.num_key_value_heads != 0)
    r.fail("num_key_value_heads", "{} does not divide num_attention_heads {}", c.num_key_value_heads,
           c.num_attention_heads);
  if (const nlohmann::json* hd = r.get("head_dim")) {
    c.head_dim = r.integer("head_dim", *hd, 1);
  } else {
    if (c.hidden_size % c.num_attention_heads != 0)
      r.fail("num_attention_heads", "{} does not divide hidden_size {} (and there is no \"head_dim\")",
             c.num_attention_heads, c.hidden_size);
    c.head_dim = c.hidden_size / c.num_attention_heads;
  }
  if (c.head_dim % 2 != 0) r.fail("head_dim", "{} must be even (RoPE rotates pairs of dimensions)", c.head_dim);
  if (static_cast<std::int64_t>(c.head_dim) * c.num_attention_heads > INT_MAX)
    r.fail("head_dim", "{} times num_attention_heads {} does not fit in an int", c.head_dim, c.num_attention_heads);
  c.max_position_embeddings = r.positive("max_position_embeddings");
  c.rms_norm_eps = r.positive_real("rms_norm_eps", r.require("rms_norm_eps"), 1.0);
  c.rope_theta = detail::read_rope_theta(r);
  const nlohmann::json* tie = r.get("tie_word_embeddings");
  c.tie_word_embeddings = tie != nullptr && r.boolean("tie_word_embeddings", *tie);
  // Byte counts of the weights and the KV cache, overflow-safe, before anything uses them.
  if (const auto p = qwen2::check_sizes(c)) r.fail(p->field, "{}", p->message);

  if (const nlohmann::json* layer_types = r.get("layer_types")) {
    if (!layer_types->is_array() || layer_types->size() != static_cast<std::size_t>(c.num_hidden_layers))
      r.fail("layer_types", "must be a list of num_hidden_layers {} entries, got {}", c.num_hidden_layers,
             detail::config_reader::excerpt(*layer_types));
    for (const nlohmann::json& t : *layer_types)
      if (t != "full_attention")
        r.fail("layer_types", "{} is not supported (only \"full_attention\" layers)",
               detail::config_reader::excerpt(t));
  }

  info.eos_token_ids = detail::read_token_ids(r, "eos_token_id", c.vocab_size);
  const std::vector<int> bos = detail::read_token_ids(r, "bos_token_id", c.vocab_size);
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

namespace detail {

// The whole of a small JSON file: a FIFO or a device would be read without end, and a
// config.json is a few kilobytes, so anything else or anything over 16 MB is refused.
inline std::string read_text_file(const std::filesystem::path& file) {
  const std::string name = file.string();
  std::error_code ec;
  // Checked before opening: opening a FIFO would already block.
  if (std::filesystem::exists(file, ec) && !std::filesystem::is_regular_file(file, ec))
    throw_load_error(name, "not a regular file");
  std::ifstream in(file, std::ios::binary);
  if (!in) throw_load_error(name, "cannot open: {}", std::strerror(errno));
  constexpr std::uintmax_t max_bytes = 16 << 20;
  if (const std::uintmax_t size = std::filesystem::file_size(file, ec); !ec && size > max_bytes)
    throw_load_error(name, "is {} bytes, more than the {} bytes a config file could need", size, max_bytes);
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) throw_load_error(name, "cannot read: {}", std::strerror(errno));
  return std::move(text).str();
}

}  // namespace detail

// Reads a config.json; `path` may also be a model directory holding one.
inline hf_model_info load_hf_config(const std::filesystem::path& path) {
  std::error_code ec;
  const std::filesystem::path file = std::filesystem::is_directory(path, ec) ? path / "config.json" : path;
  return parse_hf_config(detail::read_text_file(file), file.string());
}

// Applies a generation_config.json: its eos/bos token ids, when set, replace those of config.json,
// as transformers' generate() does (instruct checkpoints list their chat end token only there).
inline void apply_generation_config(std::string_view json_text, std::string_view file, hf_model_info& info) {
  const nlohmann::json root = detail::parse_json_object(json_text, file);
  const detail::config_reader r(root, file);
  if (r.get("eos_token_id") != nullptr)
    info.eos_token_ids = detail::read_token_ids(r, "eos_token_id", info.arch.vocab_size);
  if (r.get("bos_token_id") != nullptr) {
    const std::vector<int> bos = detail::read_token_ids(r, "bos_token_id", info.arch.vocab_size);
    if (bos.size() != 1) r.fail("bos_token_id", "must be one id, got {}", bos.size());
    info.bos_token_id = bos[0];
  }
}

// A model directory's config.json, with its generation_config.json applied when there is one.
inline hf_model_info load_hf_model_info(const std::filesystem::path& model_dir) {
  hf_model_info info = load_hf_config(model_dir / "config.json");
  const std::filesystem::path generation = model_dir / "generation_config.json";
  std::error_code ec;
  if (std::filesystem::exists(generation, ec))
    apply_generation_config(detail::read_text_file(generation), generation.string(), info);
  return info;
}

// Every field of qwen2::config whose value differs, as "name: expected E, got A", in declaration
// order. The fields come from Hana reflection, so there is no second list to keep in step.
inline std::vector<std::string> config_differences(const qwen2::config& expected, const qwen2::config& actual) {
  std::vector<std::string> out;
  boost::hana::for_each(boost::hana::accessors<qwen2::config>(), [&](auto field) {
    const auto value = boost::hana::second(field);
    if (value(expected) != value(actual))
      out.push_back(fmt::format("{}: expected {}, got {}", boost::hana::to<const char*>(boost::hana::first(field)),
                                value(expected), value(actual)));
  });
  return out;
}

// Throws a load_error naming `file` and listing every differing field, if any differ.
inline void check_matches(const qwen2::config& expected, const qwen2::config& actual, std::string_view file) {
  const std::vector<std::string> diffs = config_differences(expected, actual);
  if (diffs.empty()) return;
  throw_load_error(file, "does not match the config this program was compiled for ({} field{} differ{}): {}",
                   diffs.size(), diffs.size() == 1 ? "" : "s", diffs.size() == 1 ? "s" : "",
                   fmt::join(diffs, "; "));
}

}  // namespace fused::io
