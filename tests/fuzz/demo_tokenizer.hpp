// What the harnesses over the demo model's tokenizer share: the tokenizer, loaded once, and the
// invariant check that stops the fuzzer with the invariant named.
#pragma once
#include <cstdlib>

#include <fused/io/tokenizer.hpp>

#include "harness.hpp"

namespace fuzz {

// The demo model's tokenizer: the Qwen2 pre-tokenizer and normalizer with a 4k vocabulary, so words
// take many merges (more of the merge loop is exercised) and it loads in milliseconds.
inline const fused::io::tokenizer& demo_tokenizer() {
  static const auto t = fused::io::tokenizer::from_file(FUSED_SOURCE_DIR "/examples/models/kjv-qwen2-4m/tokenizer.json");
  return t;
}

inline void require(bool ok, const char* what) {
  if (!ok) {
    __builtin_printf("invariant broken: %s\n", what);
    std::abort();
  }
}

}  // namespace fuzz
