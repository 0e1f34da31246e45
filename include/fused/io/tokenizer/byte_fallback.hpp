// The pieces of a converted SentencePiece BPE tokenizer.json (Llama 2, Mistral, TinyLlama) that
// byte-level BPE does without: the Metaspace pre-tokenizer (spaces shown as "▁") and the decoder
// Sequence [Replace "▁" -> " ", ByteFallback, Fuse, Strip], whose ByteFallback turns "<0x0A>"
// tokens back into bytes.
#pragma once
#include <cstdint>
#include <string>
#include <string_view>

#include "utf8.hpp"

namespace fused::io::tokenization {

// The byte of a "<0xAB>" token, read as tokenizers' ByteFallback decoder does (hex digits of
// either case); -1 for any other token.
inline int byte_fallback_value(std::string_view token) noexcept {
  if (token.size() != 6 || token.substr(0, 3) != "<0x" || token[5] != '>') return -1;
  int v = 0;
  for (const char c : token.substr(3, 2)) {
    const int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
    if (d < 0) return -1;
    v = v * 16 + d;
  }
  return v;
}

// The token the encoder falls back to for byte `b`: "<0x0A>" (upper-case hex, as tokenizers writes it).
inline std::string byte_fallback_token(unsigned char b) {
  static constexpr char hex[] = "0123456789ABCDEF";
  return std::string("<0x") + hex[b >> 4] + hex[b & 15] + '>';
}

// ByteFallback on one run of consecutive byte tokens: their bytes when these are well-formed
// UTF-8, else one U+FFFD per byte (tokenizers' rule, stricter than a lossy UTF-8 decode).
inline void append_byte_run(std::string_view bytes, std::string& out) {
  if (is_valid_utf8(bytes)) {
    out.append(bytes);
  } else {
    for (std::size_t i = 0; i < bytes.size(); ++i) out.append(replacement_character);
  }
}

// The Metaspace pre-tokenizer with split: false: every ' ' becomes the replacement, which is also
// put in front of text that does not start with it: always, never, or only for the stretch that
// starts the input ("first", where text after a leading added token gets none).
struct metaspace {
  enum scheme_t : std::uint8_t { always, first, never };
  std::string replacement;  // one character, "▁"
  scheme_t scheme = always;

  std::string apply(std::string_view text, bool at_start) const {
    std::string out;
    out.reserve(text.size() + 8);
    for (const char c : text) {
      if (c == ' ') out += replacement;
      else out += c;
    }
    if ((scheme == always || (scheme == first && at_start)) && out.compare(0, replacement.size(), replacement) != 0)
      out.insert(0, replacement);
    return out;
  }
};

}  // namespace fused::io::tokenization
