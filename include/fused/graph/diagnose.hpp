// Compile-time diagnostics: a recorded mistake becomes one readable static_assert sentence, and the
// template's argument carries the details (op, tensors, shapes), which every compiler prints:
//   error: static assertion failed: fused: shape mismatch: an op's inputs do not fit its shape rule
//          (the op, the tensors and the shapes are in the message argument of fused::compile_error)
// g++ prints a string template argument whole. clang 16 prints only its first 34 characters and
// "[...]", so under clang the message also travels as word-wrapped lines of at most 36 characters
// (compile_error_lines<Kind, line, line, ...>), each short enough to be printed whole.
#pragma once
#include <cstddef>
#include <string_view>
#include <utility>

#include "../core/text.hpp"
#include "program.hpp"

namespace fused {

inline constexpr std::size_t diagnostic_chars = 384;
using diagnostic = fixed_string<diagnostic_chars>;

namespace detail {

inline constexpr std::size_t line_chars = 36;  // clang's limit for printing a string argument whole
inline constexpr std::size_t max_lines = 14;
using diagnostic_line = fixed_string<line_chars + 1>;

// Line `n` of `m` wrapped at spaces into lines of at most line_chars (a longer word is cut), padded
// with spaces so that clang prints no escaped NULs.
constexpr diagnostic_line wrap(std::string_view m, std::size_t n) {
  std::size_t at = 0;
  std::string_view line;
  for (std::size_t i = 0; i <= n; ++i) {
    while (at < m.size() && m[at] == ' ') ++at;
    std::size_t len = m.size() - at < line_chars ? m.size() - at : line_chars;
    if (at + len < m.size() && m[at + len] != ' ') {
      std::size_t cut = len;
      while (cut > 0 && m[at + cut] != ' ') --cut;
      if (cut > 0) len = cut;
    }
    line = m.substr(at, len);
    at += len;
  }
  diagnostic_line out;
  if (line.empty()) return out;
  for (std::size_t i = 0; i < line_chars; ++i) out.text[i] = i < line.size() ? line[i] : ' ';
  return out;
}

// How many lines wrap() makes of `m`.
constexpr std::size_t line_count(std::string_view m) {
  std::size_t n = 0;
  while (n < max_lines && !wrap(m, n).empty()) ++n;
  return n;
}

}  // namespace detail

template <error_kind Kind, auto... Lines>
struct compile_error_lines {
  static_assert(Kind != error_kind::shape_mismatch,
                "fused: shape mismatch: an op's inputs do not fit its shape rule (the op, the tensors and the shapes are in "
                "this template's Message)");
  static_assert(Kind != error_kind::unbound_feed,
                "fused: unbound feed: a step reads a tensor that is neither a feed nor produced by a step (see Message)");
  static_assert(Kind != error_kind::cycle, "fused: cycle: the steps named in Message wait for each other's results");
  static_assert(Kind != error_kind::bad_program, "fused: invalid program (see Message)");
  static constexpr bool ok = true;
};

namespace detail {
template <error_kind Kind, diagnostic Message, class Lines>
struct wrapped_error;
template <error_kind Kind, diagnostic Message, std::size_t... I>
struct wrapped_error<Kind, Message, std::index_sequence<I...>> : compile_error_lines<Kind, wrap(Message.view(), I)...> {};
}  // namespace detail

template <error_kind Kind, diagnostic Message>
struct compile_error
#if defined(__clang__)
    : detail::wrapped_error<Kind, Message, std::make_index_sequence<detail::line_count(Message.view())>> {
#else
    : compile_error_lines<Kind, Message> {
#endif
};

template <diagnostic Message>
struct compile_error<error_kind::none, Message> {
  static constexpr bool ok = true;
};

template <diagnostic Message>
struct invalid_memory_plan {
  static_assert(Message.empty(), "fused: the memory plan failed verification (see Message): a planner bug, please report it");
  static constexpr bool ok = true;
};

}  // namespace fused
