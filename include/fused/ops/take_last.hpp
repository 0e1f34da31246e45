// take_last: the last row of f32 [T, H] -> [1, H]. Generation needs logits for the last position only,
// so the final norm and the (vocabulary-sized) head run on one row.
#pragma once
#include "common.hpp"

namespace fused::ops {

inline constexpr op_def take_last{
    .name = "take_last",
    .category = "memory",
    .min_inputs = 1,
    .max_inputs = 1,
    .infer = [](const tensor_info* const* in, int, const attrs&) -> inferred {
      const auto& x = *in[0];
      if (x.type != dtype::f32 || x.shp.rank != 2) return mismatch(0, "input must be f32 [T, H], got " + describe(x));
      return result(dtype::f32, shape(1, x.shp[1]));
    },
    .in_place_input = -1,
    .mode_sensitive = false,
    .kernel = [](const binding&, const tensor_info* const*, int, const tensor_info&) { return "fk_copy_last_row"; }};

}  // namespace fused::ops
