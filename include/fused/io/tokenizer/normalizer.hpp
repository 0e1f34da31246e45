// Unicode normalization forms (Hugging Face normalizers NFC, NFD, NFKC, NFKD), done by utf8proc.
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

// A chain of normal forms applied in order (a Hugging Face "Sequence" normalizer; empty = none).
class normalizer {
 public:
  normalizer() = default;
  explicit normalizer(std::vector<normal_form> steps) : steps_(std::move(steps)) {}

  bool empty() const noexcept { return steps_.empty(); }

  // The normalized text: `text` itself when nothing changes it, else a view of `storage`.
  // `text` must be well-formed UTF-8.
  std::string_view apply(std::string_view text, std::string& storage) const {
    // Every normal form leaves ASCII as it is, and most text is ASCII: skip utf8proc then.
    bool ascii = true;
    for (const char c : text) ascii &= static_cast<unsigned char>(c) < 0x80;
    if (steps_.empty() || ascii) return text;
    std::string cur(text);
    for (const normal_form f : steps_) cur = apply_one(cur, f);
    storage = std::move(cur);
    return storage;
  }

 private:
  static std::string apply_one(std::string_view text, normal_form f) {
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

  std::vector<normal_form> steps_;
};

}  // namespace fused::io::tokenization
