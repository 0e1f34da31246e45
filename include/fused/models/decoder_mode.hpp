// A decoder's modes: prefill of up to `tokens` tokens, or decode of one token, over a KV cache of
// `ctx` positions. The KV capacity is part of every mode so that both see one state layout.
#pragma once
#include <cstdint>

#include "../core/shape.hpp"
#include "decoder_graph.hpp"

namespace fused::decoder {

enum class phase : std::uint8_t { prefill, decode };

constexpr const char* name_of(phase p) { return p == phase::prefill ? "prefill" : "decode"; }

struct mode {
  phase ph = phase::prefill;
  std::int64_t tokens = 1;  // prefill: the most tokens one call takes; decode: 1
  std::int64_t ctx = 1;     // KV-cache capacity in positions

  constexpr binding bind() const {
    binding b{};
    b.value[sym_tokens] = ph == phase::decode ? 1 : tokens;
    b.value[sym_ctx] = ctx;
    return b;
  }
  static constexpr mode prefill(std::int64_t tokens, std::int64_t ctx) { return {phase::prefill, tokens, ctx}; }
  static constexpr mode decode(std::int64_t ctx) { return {phase::decode, 1, ctx}; }
};

}  // namespace fused::decoder
