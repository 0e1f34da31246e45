// Helpers shared by the op headers: shape-rule sentences (shapes as text: core/shape_text.hpp) and the rows of a [rows, cols] tensor.
#pragma once

#include "../core/shape_text.hpp"
#include "../graph/program.hpp"

namespace fused::ops {

constexpr inferred mismatch(int culprit, text what) {
  inferred r{};
  r.error = std::move(what);
  r.culprit = culprit;
  return r;
}

constexpr inferred result(dtype t, shape s) {
  inferred r{};
  r.type = t;
  r.shp = s;
  return r;
}

constexpr text describe(const tensor_info& t) { return text(name_of(t.type)) + " " + shape_text(t.shp); }

// Rows of an activation laid out as [rows..., cols] once the mode binds its symbols.
constexpr std::int64_t rows_of(const shape& s, const binding& b) {
  std::int64_t r = 1;
  for (int i = 0; i + 1 < s.rank; ++i) r *= b(s[i]);
  return r;
}

// An op's kernel when one C function serves it in every mode: `Name`.
template <const char* Name>
constexpr const char* kernel_named(const binding&, const tensor_info* const*, int, const tensor_info&) { return Name; }

// One i32 value, shape [1]: a position, a token id, an index.
constexpr bool is_one_i32(const tensor_info& t) { return t.type == dtype::i32 && t.shp.rank == 1 && t.shp[0] == dim{1, 0}; }

// A positional op's optional last input (op_def::positional): one i32 position. Returns the error
// sentence, empty when there is no such input or it is right.
constexpr inferred position_input(const tensor_info* const* in, int n, int others) {
  if (n <= others) return {};
  const tensor_info& p = *in[others];
  if (!is_one_i32(p))
    return mismatch(others, "the position must be i32 [1], got " + describe(p));
  return {};
}

}  // namespace fused::ops
