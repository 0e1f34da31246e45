// UTF-8 scanning with the Unicode "maximal subpart" rule (Unicode 15, section 3.9, table 3-7):
// the rule Python's bytes.decode(errors="replace") and Rust's String::from_utf8_lossy both follow,
// so text cleaned here equals what a Hugging Face user gets from the same bytes.
//
// Example: "a\xE2\x82zb\xFF" -> "a\uFFFDzb\uFFFD" (the truncated E2 82 is one maximal subpart,
// so it becomes one U+FFFD; the stray FF becomes another).
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

namespace fused::io::tokenization {

inline constexpr std::string_view replacement_character = "\xEF\xBF\xBD";  // U+FFFD

// One step of a left-to-right scan.
struct utf8_unit {
  enum kind_t : std::uint8_t {
    valid,       // a well-formed character of `size` bytes
    invalid,     // a maximal ill-formed subpart of `size` bytes: becomes one U+FFFD
    incomplete,  // a well-formed prefix cut off by the end of the input (more bytes may follow)
  };
  kind_t kind;
  std::size_t size;
};

// The unit starting at s[i] (i < s.size()).
constexpr utf8_unit next_utf8_unit(std::string_view s, std::size_t i) noexcept {
  const auto b0 = static_cast<unsigned char>(s[i]);
  if (b0 < 0x80) return {utf8_unit::valid, 1};
  std::size_t need = 0;           // continuation bytes after the lead byte
  unsigned char lo = 0x80, hi = 0xBF;  // allowed range of the *first* continuation byte
  if (b0 >= 0xC2 && b0 <= 0xDF) need = 1;
  else if (b0 == 0xE0) { need = 2; lo = 0xA0; }            // no overlongs
  else if (b0 >= 0xE1 && b0 <= 0xEC) need = 2;
  else if (b0 == 0xED) { need = 2; hi = 0x9F; }            // no surrogates
  else if (b0 >= 0xEE && b0 <= 0xEF) need = 2;
  else if (b0 == 0xF0) { need = 3; lo = 0x90; }            // no overlongs
  else if (b0 >= 0xF1 && b0 <= 0xF3) need = 3;
  else if (b0 == 0xF4) { need = 3; hi = 0x8F; }            // nothing above U+10FFFF
  else return {utf8_unit::invalid, 1};                      // 80..C1, F5..FF never start a character
  for (std::size_t k = 1; k <= need; ++k) {
    if (i + k >= s.size()) return {utf8_unit::incomplete, k};
    const auto b = static_cast<unsigned char>(s[i + k]);
    const unsigned char l = k == 1 ? lo : 0x80, h = k == 1 ? hi : 0xBF;
    if (b < l || b > h) return {utf8_unit::invalid, k};
  }
  return {utf8_unit::valid, need + 1};
}

// True when `s` is well-formed UTF-8. The ASCII run is checked 8 bytes at a time because almost
// every input is mostly ASCII.
inline bool is_valid_utf8(std::string_view s) noexcept {
  std::size_t i = 0;
  while (i < s.size()) {
    if (i + 8 <= s.size()) {
      std::uint64_t w;
      std::memcpy(&w, s.data() + i, 8);
      if ((w & 0x8080808080808080ull) == 0) { i += 8; continue; }
    }
    const utf8_unit u = next_utf8_unit(s, i);
    if (u.kind != utf8_unit::valid) return false;
    i += u.size;
  }
  return true;
}

// Appends `s` to `out`, each maximal ill-formed subpart (a truncated tail included) replaced by U+FFFD.
inline void append_utf8_lossy(std::string_view s, std::string& out) {
  std::size_t i = 0, run = 0;  // [run, i) is well-formed and not yet copied
  while (i < s.size()) {
    const utf8_unit u = next_utf8_unit(s, i);
    if (u.kind == utf8_unit::valid) { i += u.size; continue; }
    out.append(s.substr(run, i - run));
    out.append(replacement_character);
    i += u.size;
    run = i;
  }
  out.append(s.substr(run));
}

// A view of well-formed UTF-8 equal to `s` with invalid bytes replaced: `s` itself when it is
// already valid (no copy), else a view of `storage`.
inline std::string_view to_valid_utf8(std::string_view s, std::string& storage) {
  if (is_valid_utf8(s)) return s;
  storage.clear();
  append_utf8_lossy(s, storage);
  return storage;
}

// Turns a byte stream that arrives in pieces (one token at a time) into well-formed UTF-8 text,
// holding back a character whose bytes have not all arrived yet. The concatenation of every
// push() plus finish() equals append_utf8_lossy() of all the bytes at once.
class utf8_stream {
 public:
  std::string push(std::string_view bytes) {
    pending_.append(bytes);
    std::string out;
    std::size_t i = 0, run = 0;
    while (i < pending_.size()) {
      const utf8_unit u = next_utf8_unit(pending_, i);
      if (u.kind == utf8_unit::incomplete) break;  // wait for the rest of this character
      if (u.kind == utf8_unit::invalid) {
        out.append(pending_, run, i - run);
        out.append(replacement_character);
        run = i + u.size;
      }
      i += u.size;
    }
    out.append(pending_, run, i - run);
    pending_.erase(0, i);
    return out;
  }
  // End of stream: a character still incomplete can no longer be finished.
  std::string finish() {
    std::string out;
    append_utf8_lossy(pending_, out);
    pending_.clear();
    return out;
  }
  bool has_pending() const noexcept { return !pending_.empty(); }

 private:
  std::string pending_;  // at most 3 bytes: the start of an incomplete character
};

}  // namespace fused::io::tokenization
