// Fuzzes the tokenizer.json loader: any bytes must either load or throw std::runtime_error (any
// other exception escapes and libFuzzer reports it, as it does a crash). A file that loads is then
// used once, on its own bytes as text, to reach the regex and merge code it configured.
#include <cstdint>
#include <stdexcept>
#include <string_view>

#include <fused/io/tokenizer.hpp>

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  try {
    const auto tok = fused::io::tokenizer::from_json(bytes, "fuzz.json");
    const auto ids = tok.encode(bytes);
    (void)tok.decode(ids);
  } catch (const std::runtime_error&) {
  }
  return 0;
}
