// Tokenizers shared by the tokenizer tests: loading the 151k-token Qwen2 file takes a few hundred
// milliseconds, so each is loaded once per test executable.
#pragma once
#include <fused/io/tokenizer.hpp>

#include <string>

namespace fused_test {

inline const fused::io::tokenizer& qwen2() {
  static const auto tok = fused::io::tokenizer::from_file(FUSED_QWEN2_TOKENIZER_JSON);
  return tok;
}

inline const fused::io::tokenizer& kjv() {
  static const auto tok = fused::io::tokenizer::from_file(std::string(FUSED_SOURCE_DIR) + "/examples/models/kjv-qwen2-4m/tokenizer.json");
  return tok;
}

}  // namespace fused_test
