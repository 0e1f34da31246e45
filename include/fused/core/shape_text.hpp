// Dims and shapes as text for messages, e.g. "[2*$1, 896]", in constant evaluation too.
#pragma once
#include "shape.hpp"
#include "text.hpp"

namespace fused {

constexpr text dim_text(const dim& d) {
  if (d.symbol == 0) return to_text(d.n);
  text s = d.n == 1 ? "" : to_text(d.n) + "*";
  return s + "$" + to_text(d.symbol);
}

constexpr text shape_text(const shape& s) {
  text out = "[";
  for (int i = 0; i < s.rank; ++i) out += (i ? ", " : "") + dim_text(s[i]);
  return out + "]";
}

}  // namespace fused
