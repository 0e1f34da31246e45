// Fuzzes the tokenizer.json loader: any bytes must either load or throw io::load_error (any other
// exception escapes and libFuzzer reports it, as it does a crash). A file that loads is then used
// once, on its own bytes as text, to reach the regex and merge code it configured (encode may throw
// std::runtime_error when a file's regex exceeds PCRE2's match limit).
#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string_view>

#include <fused/io/tokenizer.hpp>

#include "harness.hpp"

namespace fuzz::tokenizer_load {

int one_input(const std::uint8_t* data, std::size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  std::optional<fused::io::tokenizer> tok;
  try {
    tok.emplace(fused::io::tokenizer::from_json(bytes, "fuzz.json"));
  } catch (const fused::io::load_error&) {
    return 0;
  }
  try {
    const auto ids = tok->encode(bytes);
    (void)tok->decode(ids);
  } catch (const std::runtime_error&) {
  }
  return 0;
}

}  // namespace fuzz::tokenizer_load
