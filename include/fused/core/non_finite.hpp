// Finding a NaN or an infinity in a tensor and saying where, in the one sentence every reader uses:
// `tensor "model.norm.weight" holds NaN at element 7 (3 of 896 values are not finite)`. The weights a
// run loads, a trainer's state and parameters say it so, and the generated C says it the same way
// (fused_safetensors.h, fst__first_non_finite).
#pragma once
#include <cmath>
#include <cstddef>
#include <string>
#include <string_view>

namespace fused {

// The values of a tensor that are not finite: how many, and the index of the first.
struct non_finite_count {
  std::size_t count = 0, first = 0;
};

// value_at(i) for i < n, counted; value_at is any callable returning a float.
template <class ValueAt>
non_finite_count count_non_finite(std::size_t n, ValueAt&& value_at) {
  non_finite_count c;
  for (std::size_t i = 0; i < n; ++i)
    if (!std::isfinite(value_at(i)) && c.count++ == 0) c.first = i;
  return c;
}

// The sentence for tensor `name` of n values, `first_value` being the value at c.first.
inline std::string non_finite_sentence(std::string_view name, float first_value, non_finite_count c, std::size_t n) {
  return "tensor \"" + std::string(name) + "\" holds " + (std::isnan(first_value) ? "NaN" : "an infinity") + " at element " +
         std::to_string(c.first) + " (" + std::to_string(c.count) + " of " + std::to_string(n) + " values are not finite)";
}

}  // namespace fused
