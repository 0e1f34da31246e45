// rope: rotary position embedding in Qwen2's rotate-half convention, in place.
// x f32 [T, heads*head_dim]; attrs.i = {heads, head_dim}, attrs.f = theta. Row t is at position pos0+t.
#pragma once
#include "common.hpp"

namespace fused::ops {

inline constexpr op_def rope{
    "rope", "elementwise", 1, 1,
    [](const tensor_info* const* in, int, const attrs& a) -> inferred {
      const auto& x = *in[0];
      const auto heads = a.i[0], hd = a.i[1];
      if (x.type != dtype::f32 || x.shp.rank != 2) return mismatch(0, "input must be f32 [T, heads*head_dim], got " + describe(x));
      if (heads <= 0 || hd <= 0 || hd % 2) return mismatch(-1, "heads and an even head_dim are required");
      if (!(x.shp[1] == dim{heads * hd, 0}))
        return mismatch(0, "input " + describe(x) + " does not hold " + to_text(heads) + " heads of " + to_text(hd));
      if (!(a.f > 0)) return mismatch(-1, "theta must be positive");
      return result(dtype::f32, x.shp);
    },
    0, true,
    [](const binding&, const tensor_info* const*, int, const tensor_info&) { return "fk_rope"; }};

}  // namespace fused::ops
