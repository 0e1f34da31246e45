// The tokenizer on hard text: scripts, emoji sequences, combining marks, whitespace runs, invalid
// UTF-8; and the pieces it is built from (UTF-8 scanner, byte-level alphabet, merge table, regex).
#include <doctest/doctest.h>

#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include <fused/core/json_text.hpp>

#include "fixtures.hpp"

using fused::io::tokenizer;
namespace tk = fused::io::tokenization;

namespace {
std::string nfc(std::string_view s) {
  std::string storage;
  return std::string(tk::normalizer({tk::normal_form::nfc}).apply(s, storage));
}
std::string lossy(std::string_view s) {
  std::string out;
  tk::append_utf8_lossy(s, out);
  return out;
}

// hard_strings_*.jsonl hold ids computed by tests/tokenizer/reference_tokenizer.py, an independent
// Python implementation that itself reproduces the Hugging Face reference encodings.
void check_hard_strings(const tokenizer& tok, const std::string& file) {
  std::ifstream in(std::string(FUSED_SOURCE_DIR) + "/tests/tokenizer/" + file);
  REQUIRE(in.good());
  int n = 0;
  for (std::string line; std::getline(in, line);) {
    const auto r = fused::json_text::parse(line);
    const auto text = r.at("text").get<std::string>();
    CAPTURE(text);
    const auto ids = tok.encode(text);
    CHECK(ids == r.at("ids").get<std::vector<std::int32_t>>());
    CHECK(tok.decode(ids) == nfc(text));
    ++n;
  }
  CHECK(n == 20);
}
}  // namespace

TEST_CASE("hard strings match the independent reference: Qwen2 vocabulary") { check_hard_strings(fused_test::qwen2(), "hard_strings_qwen2.jsonl"); }
TEST_CASE("hard strings match the independent reference: kjv vocabulary") { check_hard_strings(fused_test::kjv(), "hard_strings_kjv.jsonl"); }

TEST_CASE("NFC: composed and decomposed input give the same ids") {
  const tokenizer& t = fused_test::qwen2();
  CHECK(t.encode("caf\xC3\xA9 na\xC3\xAFve") == t.encode("cafe\xCC\x81 nai\xCC\x88ve"));
  CHECK(t.encode("\xED\x95\x9C") == t.encode("\xE1\x84\x92\xE1\x85\xA1\xE1\x86\xAB"));  // 한 as jamo
  // Normalization stops at special tokens: each stretch is normalized on its own.
  CHECK(t.decode(t.encode("e<|im_end|>\xCC\x81")) == "e<|im_end|>\xCC\x81");
}

TEST_CASE("invalid UTF-8: each maximal ill-formed subpart is encoded as U+FFFD") {
  const tokenizer& t = fused_test::qwen2();
  const std::string fffd = "\xEF\xBF\xBD";
  // What Python's bytes.decode("utf-8", errors="replace") gives for each.
  CHECK(lossy("a\xFF" "b") == "a" + fffd + "b");
  CHECK(lossy("a\xE2\x82z") == "a" + fffd + "z");               // truncated 3-byte character: one U+FFFD
  CHECK(lossy("\xF0\x9F\x98") == fffd);                          // truncated at the end
  CHECK(lossy("\xC0\x80") == fffd + fffd);                       // overlong NUL: C0 never starts a character
  CHECK(lossy("\xED\xA0\x80") == fffd + fffd + fffd);            // a UTF-16 surrogate
  CHECK(lossy("\xF4\x90\x80\x80") == fffd + fffd + fffd + fffd); // above U+10FFFF
  CHECK(lossy("\x80\x80") == fffd + fffd);                       // stray continuation bytes
  CHECK(lossy("ok \xE4\xBD\xA0") == "ok \xE4\xBD\xA0");          // valid text is untouched
  for (const std::string& bad : std::vector<std::string>{"a\xFF" "b", "x\xE2\x82", "\xC0\x80<|im_end|>\xED\xA0\x80 tail", std::string("\x80\x00\xFE", 3)}) {
    CAPTURE(bad);
    CHECK(t.encode(bad) == t.encode(lossy(bad)));
    CHECK(t.decode(t.encode(bad)) == lossy(bad));
  }
  CHECK(t.encode("\xFF") == t.encode(fffd));
}

TEST_CASE("encode: round trip and sane output on long and odd inputs") {
  const tokenizer& t = fused_test::qwen2();
  const std::vector<std::string> texts{
      std::string(100000, ' '),
      std::string(50000, 'a'),
      std::string(20000, '\n') + std::string(20000, '\r'),
      std::string(3000, '7'),
      "\xE4\xB8\xAD" + std::string(30000, 'x'),
      std::string("\0\0\0", 3),
  };
  for (const auto& s : texts) {
    const auto ids = t.encode(s);
    CHECK(!ids.empty());
    CHECK(t.decode(ids) == s);
  }
  // Digits are split one by one (\p{N} alone), so 3000 digits are 3000 tokens.
  CHECK(t.encode(std::string(3000, '7')).size() == 3000);
  CHECK(t.encode("").empty());
}

TEST_CASE("utf8_stream holds back incomplete characters") {
  tk::utf8_stream s;
  CHECK(s.push("a\xE4") == "a");
  CHECK(s.has_pending());
  CHECK(s.push("\xBD") == "");
  CHECK(s.push("\xA0z") == "\xE4\xBD\xA0z");
  CHECK(!s.has_pending());
  CHECK(s.push("\xE4\xBD" "b") == "\xEF\xBF\xBD" "b");  // the character was never finished
  CHECK(s.push("\xF0\x9F") == "");
  CHECK(s.finish() == "\xEF\xBF\xBD");
  CHECK(s.finish() == "");
}

TEST_CASE("byte-level alphabet: GPT-2's table, and its inverse") {
  CHECK(tk::byte_level_char(' ') == "\xC4\xA0");   // Ġ
  CHECK(tk::byte_level_char('\n') == "\xC4\x8A");  // Ċ
  CHECK(tk::byte_level_char('A') == "A");
  CHECK(tk::byte_level_char(0xFF) == "\xC3\xBF");  // ÿ stands for itself
  std::string all;
  for (int b = 0; b < 256; ++b) all.push_back(static_cast<char>(b));
  CHECK(tk::from_byte_level(tk::to_byte_level(all)) == all);
  // A token with a character outside the alphabet is kept as its own UTF-8 text.
  CHECK(tk::from_byte_level("<think>") == "<think>");
  CHECK(tk::from_byte_level("\xE4\xBD\xA0") == "\xE4\xBD\xA0");
}

TEST_CASE("merge_table: find, overwrite, growth") {
  tk::merge_table m(1);
  for (std::int32_t i = 0; i < 5000; ++i) m.insert(i, i + 1, {i, 10000 + i});
  CHECK(m.size() == 5000);
  for (std::int32_t i = 0; i < 5000; ++i) {
    const auto* r = m.find(i, i + 1);
    REQUIRE(r != nullptr);
    CHECK(r->rank == i);
    CHECK(r->merged == 10000 + i);
    CHECK(m.find(i + 1, i) == nullptr);
  }
  m.insert(3, 4, {7000, 1});  // a pair given twice keeps the later rule
  CHECK(m.find(3, 4)->rank == 7000);
  CHECK(m.size() == 5000);
}

TEST_CASE("regex: \\s and \\S are rewritten to Unicode White_Space, elsewhere untouched") {
  const std::string ws = "\\t-\\r\\x{20}\\x{85}\\x{A0}\\x{1680}\\x{2000}-\\x{200A}\\x{2028}\\x{2029}\\x{202F}\\x{205F}\\x{3000}";
  CHECK(tk::with_unicode_white_space("\\s+") == "[" + ws + "]+");
  CHECK(tk::with_unicode_white_space("\\S") == "[^" + ws + "]");
  CHECK(tk::with_unicode_white_space("[^\\s\\p{L}]") == "[^" + ws + "\\p{L}]");
  CHECK(tk::with_unicode_white_space("[]\\s]") == "[]" + ws + "]");
  CHECK(tk::with_unicode_white_space("[[:alpha:]\\s]x") == "[[:alpha:]" + ws + "]x");
  CHECK(tk::with_unicode_white_space("\\\\s") == "\\\\s");      // an escaped backslash, then 's'
  CHECK(tk::with_unicode_white_space("\\Q\\s\\E\\s") == "\\Q\\s\\E[" + ws + "]");
  CHECK(tk::with_unicode_white_space("[\\S]") == "[\\S]");      // cannot be spelled out inside a class

  // U+180E is not White_Space: "a\u180Eb" is not cut at it by \s+.
  std::vector<std::string> pieces;
  tk::split_regex("\\s+|[^\\s]+").split("a\xE1\xA0\x8E" "b c", [&](std::string_view p) { pieces.emplace_back(p); });
  CHECK(pieces == std::vector<std::string>{"a\xE1\xA0\x8E" "b", " ", "c"});
  // Gaps between matches are pieces too (behavior "Isolated").
  pieces.clear();
  tk::split_regex("\\d+").split("ab12cd3", [&](std::string_view p) { pieces.emplace_back(p); });
  CHECK(pieces == std::vector<std::string>{"ab", "12", "cd", "3"});
  // An empty match cuts nothing.
  pieces.clear();
  tk::split_regex("x*").split("abxxc", [&](std::string_view p) { pieces.emplace_back(p); });
  CHECK(pieces == std::vector<std::string>{"ab", "xx", "c"});
}
