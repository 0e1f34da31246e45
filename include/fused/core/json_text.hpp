// JSON text in and out for every reader and printer of the library (configs, tokenizers,
// safetensors headers, plans, graph files, the server).
//
// nlohmann::json's lexer, parser and serializer are templates that each unit calling them
// instantiates and compiles again: parse and dump of json and ordered_json cost a unit 12 s of g++
// -O2 and 29 s of clang with ASan (docs/COMPILE_TIME.md). Behind these functions a program of many
// units compiles them once, as it can the kernels (FK_KERNELS_EXTERN): define FUSED_JSON_EXTERN in
// every unit but one and FUSED_JSON_IMPLEMENTATION in that one (CMake's FUSED_KERNELS_ONCE does so
// for fused's tests and tool). By default they are inline, like the rest of the library.
#pragma once
#include <cmath>
#include <istream>
#include <iterator>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#if defined(FUSED_JSON_IMPLEMENTATION)
#define FUSED_JSON_API
#define FUSED_JSON_DEFINITIONS 1
#elif defined(FUSED_JSON_EXTERN)
#define FUSED_JSON_API
#define FUSED_JSON_DEFINITIONS 0
#else
#define FUSED_JSON_API inline
#define FUSED_JSON_DEFINITIONS 1
#endif

namespace fused::json_text {

// What dump does with a string that is not UTF-8: throw nlohmann's type_error 316, or write U+FFFD.
enum class invalid_utf8 { refuse, replace };

// A callback sees every value as it is parsed (nlohmann::json::parser_callback_t): limits on depth
// or duplicate keys, which the parser itself does not check.
using callback = nlohmann::json::parser_callback_t;

// nlohmann::json::parse of `text` (throws nlohmann::json::parse_error; with `allow_exceptions` false,
// a value of type discarded instead).
FUSED_JSON_API nlohmann::json parse(std::string_view text, const callback& check = nullptr, bool allow_exceptions = true);
// All of a stream (a file's contents), parsed as above.
FUSED_JSON_API nlohmann::json parse(std::istream& in);
// The same as an ordered_json: objects keep their keys in the text's order.
FUSED_JSON_API nlohmann::ordered_json parse_ordered(std::string_view text);
// j.dump(indent), strings that are not UTF-8 as `bad` says.
FUSED_JSON_API std::string dump(const nlohmann::json& j, int indent = -1, invalid_utf8 bad = invalid_utf8::refuse);
FUSED_JSON_API std::string dump(const nlohmann::ordered_json& j, int indent = -1, invalid_utf8 bad = invalid_utf8::refuse);

// nlohmann's lexer ends JSON text at a NUL byte, and what follows one would go unread: every reader
// here refuses a text with one (parse_error 101 at its 1-based byte, as nlohmann counts).
inline std::size_t first_nul(std::string_view text) {
  const std::size_t at = text.find('\0');
  return at == std::string_view::npos ? 0 : at + 1;
}
inline nlohmann::json::parse_error nul_error(std::size_t byte) {
  return nlohmann::json::parse_error::create(101, byte, "a NUL byte (JSON text has none)", nullptr);
}
inline void require_no_nul(std::string_view text) {
  if (const std::size_t byte = first_nul(text)) throw nul_error(byte);
}

#if FUSED_JSON_DEFINITIONS
namespace detail {
constexpr nlohmann::json::error_handler_t handler_of(invalid_utf8 bad) {
  return bad == invalid_utf8::replace ? nlohmann::json::error_handler_t::replace : nlohmann::json::error_handler_t::strict;
}
}  // namespace detail

FUSED_JSON_API nlohmann::json parse(std::string_view text, const callback& check, bool allow_exceptions) {
  if (const std::size_t byte = first_nul(text)) {  // looked for once
    if (!allow_exceptions) return nlohmann::json(nlohmann::json::value_t::discarded);
    throw nul_error(byte);
  }
  return nlohmann::json::parse(text.data(), text.data() + text.size(), check, allow_exceptions);
}
FUSED_JSON_API nlohmann::json parse(std::istream& in) {
  const std::string text{std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
  return parse(text);
}
FUSED_JSON_API nlohmann::ordered_json parse_ordered(std::string_view text) {
  require_no_nul(text);
  return nlohmann::ordered_json::parse(text.data(), text.data() + text.size());
}
FUSED_JSON_API std::string dump(const nlohmann::json& j, int indent, invalid_utf8 bad) {
  return j.dump(indent, ' ', false, detail::handler_of(bad));
}
FUSED_JSON_API std::string dump(const nlohmann::ordered_json& j, int indent, invalid_utf8 bad) {
  return j.dump(indent, ' ', false, detail::handler_of(bad));
}
#endif

// nlohmann's message without its internals: "[json.exception.parse_error.101] parse error at line 1,
// column 6: syntax error ..." -> "at line 1, column 6: syntax error ...", for a sentence after a file's name.
inline std::string reason(const nlohmann::json::exception& e) {
  std::string_view text = e.what();
  if (text.starts_with("[json.exception.")) {
    const auto end = text.find("] ");
    if (end != std::string_view::npos) text.remove_prefix(end + 2);
  }
  if (text.starts_with("parse error ")) text.remove_prefix(12);
  return std::string(text);
}

// A value as a message quotes it (a hostile file can hold megabytes in one): its JSON text cut after
// 60 characters, strings that are not UTF-8 with U+FFFD, and NaN and the infinities (which
// MessagePack holds, and dump writes as null) spelt out, in an array's elements too.
template <class Json>
std::string excerpt(const Json& j) {
  constexpr std::size_t max_chars = 60;
  auto scalar = [](const Json& v) -> std::string {
    if (v.is_number_float() && !std::isfinite(v.template get<double>()))
      return std::isnan(v.template get<double>()) ? "NaN" : v.template get<double>() > 0 ? "Infinity" : "-Infinity";
    return dump(v, -1, invalid_utf8::replace);
  };
  std::string s;
  if (j.is_array()) {
    s = "[";
    for (std::size_t i = 0; i < j.size() && s.size() <= max_chars; ++i) s.append(i ? "," : "").append(scalar(j[i]));
    s += "]";
  } else {
    s = scalar(j);
  }
  return s.size() > max_chars ? s.substr(0, max_chars) + "..." : s;
}

}  // namespace fused::json_text

#undef FUSED_JSON_DEFINITIONS
#undef FUSED_JSON_API
