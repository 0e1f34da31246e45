// The `Split` pre-tokenizer with behavior "Isolated": a regex cuts the text into pieces; matches and
// the gaps between them each become a piece. Compiled by PCRE2 in UTF + UCP mode (\p{L}, \p{N},
// Unicode case folding for `(?i:'s|...)`), JIT-compiled when the platform supports it.
#pragma once
#ifndef PCRE2_CODE_UNIT_WIDTH
#define PCRE2_CODE_UNIT_WIDTH 8
#endif
#include <array>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>

#include <pcre2.h>

#include "utf8.hpp"

namespace fused::io::tokenization {

// Hugging Face runs these patterns with Oniguruma, whose \s is the Unicode White_Space property.
// PCRE2 (before 10.43) also counts U+180E MONGOLIAN VOWEL SEPARATOR as \s, so \s and \S are
// spelled out as White_Space before compiling. Inside a class only \s can be spelled out (PCRE2
// has no class subtraction), so a \S there keeps PCRE2's meaning; the Qwen2 pattern has none.
inline std::string with_unicode_white_space(std::string_view pattern) {
  static constexpr std::string_view ws = "\\t-\\r\\x{20}\\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}\\x{205F}\\x{3000}";
  std::string out;
  out.reserve(pattern.size() + 64);
  bool in_class = false;
  for (std::size_t i = 0; i < pattern.size(); ++i) {
    const char c = pattern[i];
    if (c == '\\' && i + 1 < pattern.size()) {
      const char e = pattern[i + 1];
      if (e == 'Q') {  // \Q...\E quotes everything up to \E: copy it untouched
        const std::size_t end = pattern.find("\\E", i + 2);
        const std::size_t stop = end == std::string_view::npos ? pattern.size() : end + 2;
        out.append(pattern.substr(i, stop - i));
        i = stop - 1;
        continue;
      }
      if (e == 's') out += in_class ? std::string(ws) : "[" + std::string(ws) + "]";
      else if (e == 'S' && !in_class) out += "[^" + std::string(ws) + "]";
      else { out += c; out += e; }
      ++i;
      continue;
    }
    out += c;
    if (!in_class && c == '[') {
      in_class = true;
      // A ']' right after '[' or '[^' is a literal member, not the end of the class.
      if (i + 1 < pattern.size() && pattern[i + 1] == '^') out += pattern[++i];
      if (i + 1 < pattern.size() && pattern[i + 1] == ']') out += pattern[++i];
    } else if (in_class && c == '[' && i + 1 < pattern.size() && pattern[i + 1] == ':') {
      const std::size_t end = pattern.find(":]", i + 2);  // a POSIX class such as [:alpha:]
      if (end != std::string_view::npos) { out.append(pattern.substr(i + 1, end + 1 - i)); i = end + 1; }
    } else if (in_class && c == ']') {
      in_class = false;
    }
  }
  return out;
}

class split_regex {
 public:
  // `where` names the pattern for a match that fails at run time ("tokenizer.json: pre_tokenizer.pattern").
  explicit split_regex(std::string_view pattern, std::string where = "the pre-tokenizer's regex") : where_(std::move(where)) {
    const std::string p = with_unicode_white_space(pattern);
    int err = 0;
    PCRE2_SIZE at = 0;
    code_.reset(pcre2_compile(reinterpret_cast<PCRE2_SPTR>(p.data()), p.size(), PCRE2_UTF | PCRE2_UCP, &err, &at, nullptr));
    if (!code_) throw std::runtime_error("regex does not compile at offset " + std::to_string(at) + ": " + message(err));
    // JIT is an optimization only: without it (unsupported CPU, no executable memory) the
    // interpreter gives the same matches.
    jit_ = pcre2_jit_compile(code_.get(), PCRE2_JIT_COMPLETE) == 0;
  }

  // Calls piece(std::string_view) for each piece of `text` in order: the matches and the
  // non-empty gaps between them. `text` must be well-formed UTF-8.
  template <class F>
  void split(std::string_view text, F&& piece) const {
    const std::unique_ptr<pcre2_match_data, match_data_deleter> md(pcre2_match_data_create_from_pattern(code_.get(), nullptr));
    if (!md) throw std::bad_alloc();
    const auto* subject = reinterpret_cast<PCRE2_SPTR>(text.data());
    std::size_t pos = 0, emitted = 0;  // search from pos; text before `emitted` is handed out
    while (pos < text.size()) {
      int rc = jit_ ? pcre2_jit_match(code_.get(), subject, text.size(), pos, 0, md.get(), nullptr)
                    : PCRE2_ERROR_JIT_STACKLIMIT;
      // The JIT's small fixed stack can run out on pathological input where the interpreter,
      // which keeps its backtracking frames on the heap, still succeeds.
      if (rc == PCRE2_ERROR_JIT_STACKLIMIT)
        rc = pcre2_match(code_.get(), subject, text.size(), pos, PCRE2_NO_UTF_CHECK | PCRE2_NO_JIT, md.get(), nullptr);
      if (rc == PCRE2_ERROR_NOMATCH) break;
      if (rc < 0)
        throw std::runtime_error(where_ + ": the regex gave up on this text (" + message(rc) +
                                 "): a pattern that backtracks without bound on it, or text too long for it");
      const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(md.get());
      const std::size_t start = ov[0], end = ov[1];
      if (end == start) {
        // An empty match cuts nothing (as with Oniguruma's find_iter); search on after one character.
        pos = start + next_utf8_unit(text, start).size;
        continue;
      }
      if (start > emitted) piece(text.substr(emitted, start - emitted));
      piece(text.substr(start, end - start));
      emitted = pos = end;
    }
    if (emitted < text.size()) piece(text.substr(emitted));
  }

 private:
  std::string where_;
  struct code_deleter {
    void operator()(pcre2_code* c) const noexcept { pcre2_code_free(c); }
  };
  struct match_data_deleter {
    void operator()(pcre2_match_data* m) const noexcept { pcre2_match_data_free(m); }
  };
  static std::string message(int err) {
    std::array<PCRE2_UCHAR, 256> buf{};
    pcre2_get_error_message(err, buf.data(), buf.size());
    return reinterpret_cast<const char*>(buf.data());
  }

  std::unique_ptr<pcre2_code, code_deleter> code_;
  bool jit_ = false;
};

}  // namespace fused::io::tokenization
