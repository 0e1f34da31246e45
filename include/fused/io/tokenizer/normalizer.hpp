// Hugging Face normalizers: the Unicode normal forms NFC, NFD, NFKC, NFKD (done by utf8proc), and
// the Prepend and Replace (of a literal string) that SentencePiece-style tokenizers (Llama 2,
// Mistral) use to turn "Hello world" into "▁Hello▁world".
#pragma once
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <utf8proc.h>

namespace fused::io::tokenization {

enum class normal_form : std::uint8_t { nfc, nfd, nfkc, nfkd };

// One normalizer: a normal form, Prepend (`text` before any non-empty input) or Replace (every
// non-overlapping occurrence of `pattern`, left to right, by `text`).
struct normalizer_step {
  enum kind_t : std::uint8_t { form, prepend, replace } kind;
  normal_form nf = normal_form::nfc;
  std::string pattern, text;
};

// A chain of normalizers applied in order (a Hugging Face "Sequence" normalizer; empty = none).
class normalizer {
 public:
  normalizer() = default;
  explicit normalizer(const std::vector<normal_form>& forms) {
    for (const normal_form f : forms) steps_.push_back({normalizer_step::form, f, {}, {}});
  }
  explicit normalizer(std::vector<normalizer_step> steps) : steps_(std::move(steps)) {}

  bool empty() const noexcept { return steps_.empty(); }

  // The normalized text: `text` itself when nothing changes it, else a view of `storage`.
  // `text` must be well-formed UTF-8.
  std::string_view apply(std::string_view text, std::string& storage) const {
    if (steps_.empty()) return text;
    std::string cur;
    bool copied = false;  // cur holds the text (else it is still `text`, untouched)
    for (const normalizer_step& s : steps_) {
      const std::string_view in = copied ? std::string_view(cur) : text;
      if (s.kind == normalizer_step::form) {
        // Every normal form leaves ASCII as it is, and most text is ASCII: skip utf8proc then.
        bool ascii = true;
        for (const char c : in) ascii &= static_cast<unsigned char>(c) < 0x80;
        if (ascii) continue;
        cur = apply_form(in, s.nf);
      } else if (s.kind == normalizer_step::prepend) {
        if (in.empty()) continue;  // as tokenizers' Prepend: nothing is added to empty text
        cur = s.text + std::string(in);
      } else {
        if (s.pattern.empty() || in.find(s.pattern) == std::string_view::npos) continue;
        cur = replace_all(in, s.pattern, s.text);
      }
      copied = true;
    }
    if (!copied) return text;
    storage = std::move(cur);
    return storage;
  }

 private:
  static std::string replace_all(std::string_view in, std::string_view pattern, std::string_view with) {
    std::string out;
    out.reserve(in.size() + in.size() / 4);
    std::size_t at = 0;
    for (std::size_t hit; (hit = in.find(pattern, at)) != std::string_view::npos; at = hit + pattern.size()) {
      out.append(in.substr(at, hit - at));
      out.append(with);
    }
    out.append(in.substr(at));
    return out;
  }

  static std::string apply_form(std::string_view text, normal_form f) {
    int options = UTF8PROC_STABLE;
    switch (f) {
      case normal_form::nfc: options |= UTF8PROC_COMPOSE; break;
      case normal_form::nfd: options |= UTF8PROC_DECOMPOSE; break;
      case normal_form::nfkc: options |= UTF8PROC_COMPOSE | UTF8PROC_COMPAT; break;
      case normal_form::nfkd: options |= UTF8PROC_DECOMPOSE | UTF8PROC_COMPAT; break;
    }
    utf8proc_uint8_t* out = nullptr;
    // An explicit length (no UTF8PROC_NULLTERM) keeps U+0000 inside the text as a character.
    const utf8proc_ssize_t n = utf8proc_map(reinterpret_cast<const utf8proc_uint8_t*>(text.data()),
                                            static_cast<utf8proc_ssize_t>(text.size()), &out,
                                            static_cast<utf8proc_option_t>(options));
    const std::unique_ptr<utf8proc_uint8_t, decltype(&std::free)> owned(out, &std::free);
    if (n < 0) throw std::runtime_error(std::string("Unicode normalization failed: ") + utf8proc_errmsg(n));
    return std::string(reinterpret_cast<const char*>(out), static_cast<std::size_t>(n));
  }

  std::vector<normalizer_step> steps_;
};

}  // namespace fused::io::tokenization
