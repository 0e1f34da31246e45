// GPT-2's byte-level alphabet (Hugging Face `ByteLevel` pre-tokenizer and decoder): every byte is
// shown as one printable code point so that a BPE vocabulary can be stored as text. Printable
// Latin-1 bytes stand for themselves; the other 68 bytes (controls, space, 0x7F-0xA0, 0xAD) are
// numbered from U+0100 upwards in byte order. So ' ' is U+0120 'Ġ' and '\n' is U+010A 'Ċ'.
#pragma once
#include <array>
#include <cstdint>
#include <string>
#include <string_view>

#include "utf8.hpp"

namespace fused::io::tokenization {

namespace byte_level_detail {
constexpr bool stands_for_itself(unsigned b) noexcept {
  return (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || (b >= 0xAE && b <= 0xFF);
}
constexpr std::array<char16_t, 256> make_byte_to_code_point() noexcept {
  std::array<char16_t, 256> t{};
  unsigned next = 256;
  for (unsigned b = 0; b < 256; ++b) t[b] = static_cast<char16_t>(stands_for_itself(b) ? b : next++);
  return t;
}
}  // namespace byte_level_detail

// byte -> the code point that shows it (all below U+0144).
inline constexpr std::array<char16_t, 256> byte_to_code_point = byte_level_detail::make_byte_to_code_point();
inline constexpr char32_t byte_level_code_point_end = 256 + 68;
static_assert(byte_to_code_point[' '] == 0x120 && byte_to_code_point['\n'] == 0x10A && byte_to_code_point[0xAD] == 0x143);

// code point (below byte_level_code_point_end) -> byte, or -1 for a code point that shows no byte.
inline constexpr std::array<std::int16_t, byte_level_code_point_end> code_point_to_byte = [] {
  std::array<std::int16_t, byte_level_code_point_end> t{};
  t.fill(-1);
  for (unsigned b = 0; b < 256; ++b) t[byte_to_code_point[b]] = static_cast<std::int16_t>(b);
  return t;
}();

// The UTF-8 text of the code point that shows byte `b` (1 or 2 bytes).
inline std::string byte_level_char(unsigned char b) {
  const char32_t c = byte_to_code_point[b];
  std::string s;
  if (c < 0x80) {
    s.push_back(static_cast<char>(c));
  } else {
    s.push_back(static_cast<char>(0xC0 | (c >> 6)));
    s.push_back(static_cast<char>(0x80 | (c & 0x3F)));
  }
  return s;
}

// Raw bytes into their byte-level text: "a b" -> "aĠb".
inline std::string to_byte_level(std::string_view bytes) {
  std::string s;
  s.reserve(bytes.size() * 2);
  for (const char ch : bytes) s += byte_level_char(static_cast<unsigned char>(ch));
  return s;
}

// A token's text back into bytes, as the Hugging Face ByteLevel decoder does it: when every code
// point of the token shows a byte, those bytes; otherwise (an added token such as "<think>" written
// in plain text with characters outside the alphabet) the token's own UTF-8 bytes, unchanged.
inline std::string from_byte_level(std::string_view token) {
  std::string bytes;
  bytes.reserve(token.size());
  std::size_t i = 0;
  while (i < token.size()) {
    const utf8_unit u = next_utf8_unit(token, i);
    if (u.kind != utf8_unit::valid || u.size > 2) return std::string(token);
    char32_t c = static_cast<unsigned char>(token[i]);
    if (u.size == 2) c = ((c & 0x1F) << 6) | (static_cast<unsigned char>(token[i + 1]) & 0x3F);
    if (c >= byte_level_code_point_end || code_point_to_byte[c] < 0) return std::string(token);
    bytes.push_back(static_cast<char>(code_point_to_byte[c]));
    i += u.size;
  }
  return bytes;
}

}  // namespace fused::io::tokenization
