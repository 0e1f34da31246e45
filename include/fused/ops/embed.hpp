// embed: token ids i32 [T] gathered from a bf16 table [V, H] -> f32 [T, H].
#pragma once
#include "common.hpp"

namespace fused::ops {

inline constexpr op_def embed{
    .name = "embed",
    .category = "memory",
    .min_inputs = 2,
    .max_inputs = 2,
    .infer = [](const tensor_info* const* in, int, const attrs&) -> inferred {
      const auto &ids = *in[0], &table = *in[1];
      if (ids.type != dtype::i32 || ids.shp.rank != 1) return mismatch(0, "token ids must be i32 [T], got " + describe(ids));
      if (table.type != dtype::bf16 || table.shp.rank != 2) return mismatch(1, "the table must be bf16 [V, H], got " + describe(table));
      return result(dtype::f32, shape(ids.shp[0], table.shp[1]));
    },
    .in_place_input = -1,
    .mode_sensitive = false,
    .kernel = [](const binding&, const tensor_info* const*, int, const tensor_info&) { return "fk_embed"; }};

}  // namespace fused::ops
