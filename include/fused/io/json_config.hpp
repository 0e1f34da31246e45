// JSON files of a model directory, read with every error naming the file and the field: a reader
// of one JSON object's fields (config_reader), a parser that bounds nesting and refuses repeated
// keys, and a reader of small text files. What the fields mean is models/hf_config.hpp's business.
#pragma once
#include "fused/core/json_text.hpp"
#include "fused/io/load_error.hpp"
#include "fused/io/read_bounded.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <cerrno>
#include <climits>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

namespace fused::io {

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
  bool contains(std::string_view key) const { return root_.contains(key); }  // null or not

  const nlohmann::json& require(std::string_view key) const {
    const nlohmann::json* v = get(key);
    if (v == nullptr) fail(key, "is missing");
    return *v;
  }

  // An integer >= min_value that fits in int.
  int integer(std::string_view key, const nlohmann::json& v, int min_value) const {
    if (!v.is_number_integer()) fail(key, "must be an integer, got {}", json_text::excerpt(v));
    if (v.is_number_unsigned() ? v.get<std::uint64_t>() > static_cast<std::uint64_t>(INT_MAX)
                               : v.get<std::int64_t>() < INT_MIN)
      fail(key, "{} is out of range", json_text::excerpt(v));
    const int i = v.get<int>();
    if (i < min_value) fail(key, "{} must be {}", i, min_value == 1 ? "positive" : "non-negative");
    return i;
  }
  int positive(std::string_view key) const { return integer(key, require(key), 1); }

  // A finite number > 0 (and < upper_bound when given).
  double positive_real(std::string_view key, const nlohmann::json& v,
                       std::optional<double> upper_bound = std::nullopt) const {
    if (!v.is_number()) fail(key, "must be a number, got {}", json_text::excerpt(v));
    const double d = v.get<double>();
    if (!std::isfinite(d) || d <= 0 || (upper_bound && d >= *upper_bound))
      fail(key, "{} must be positive{}", json_text::excerpt(v), upper_bound ? fmt::format(" and below {}", *upper_bound) : "");
    return d;
  }

  const std::string& string(std::string_view key, const nlohmann::json& v) const {
    if (!v.is_string()) fail(key, "must be a string, got {}", json_text::excerpt(v));
    return v.get_ref<const std::string&>();
  }

  bool boolean(std::string_view key, const nlohmann::json& v) const {
    if (!v.is_boolean()) fail(key, "must be true or false, got {}", json_text::excerpt(v));
    return v.get<bool>();
  }

  template <class... Args>
  [[noreturn]] void fail(std::string_view key, fmt::format_string<Args...> format, Args&&... args) const {
    throw_load_error(file_, "field \"{}\": {}", key, fmt::format(format, std::forward<Args>(args)...));
  }

  std::string_view file() const { return file_; }

 private:
  const nlohmann::json& root_;
  std::string_view file_;
};

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
    root = json_text::parse(text, guard);
  } catch (const json::exception& e) {
    throw_load_error(file, "not valid JSON: {}", json_text::reason(e));
  }
  if (!root.is_object()) throw_load_error(file, "not a JSON object");
  return root;
}

// The whole of a small JSON file: a FIFO or a device would be read without end, and a
// config.json is a few kilobytes, so anything else or anything over 16 MB is refused.
inline std::string read_text_file(const std::filesystem::path& file) {
  const std::string name = file.string();
  std::error_code ec;
  // Checked before reading: a FIFO or a device has no size to bound.
  if (std::filesystem::exists(file, ec) && !std::filesystem::is_regular_file(file, ec))
    throw_load_error(name, "{}", std::filesystem::is_directory(file, ec) ? "is a directory, not a file" : "not a regular file");
  constexpr std::uintmax_t max_bytes = 16 << 20;
  if (const std::uintmax_t size = std::filesystem::file_size(file, ec); !ec && size > max_bytes)
    throw_load_error(name, "is {} bytes, more than the {} bytes a config file could need", size, max_bytes);
  read_result text = read_file_at_most(file, max_bytes);  // a file that grows as it is read stops at the bound too
  if (const std::string why = failure(text); !why.empty()) throw_load_error(name, "{}", why);
  if (text.too_large) throw_load_error(name, "holds more than the {} bytes a config file could need", max_bytes);
  return std::move(text.bytes);
}

}  // namespace detail

}  // namespace fused::io
