// Elementwise ops on f32 tensors of one shape; the result may take over the first input's bytes.
//   add:    a + b            (the residual stream)
//   swiglu: silu(a) * b      (Qwen2's gated MLP: a = gate, b = up)
#pragma once
#include "common.hpp"

namespace fused::ops {

namespace detail {
constexpr inferred same_shape_f32(const tensor_info* const* in, int, const attrs&) {
  const auto &a = *in[0], &b = *in[1];
  if (a.type != dtype::f32) return mismatch(0, "must be f32, got " + describe(a));
  if (b.type != dtype::f32 || !(a.shp == b.shp)) return mismatch(1, describe(b) + " differs from the first input " + describe(a));
  return result(dtype::f32, a.shp);
}
}  // namespace detail

inline constexpr op_def add{.name = "add",
                             .category = "elementwise",
                             .min_inputs = 2,
                             .max_inputs = 2,
                             .infer = detail::same_shape_f32,
                             .in_place_input = 0,
                             .mode_sensitive = false,
                             .kernel = [](const binding&, const tensor_info* const*, int, const tensor_info&) { return "fk_add"; }};

inline constexpr op_def swiglu{.name = "swiglu",
                             .category = "elementwise",
                             .min_inputs = 2,
                             .max_inputs = 2,
                             .infer = detail::same_shape_f32,
                             .in_place_input = 0,
                             .mode_sensitive = false,
                             .kernel = [](const binding&, const tensor_info* const*, int, const tensor_info&) { return "fk_swiglu"; }};

}  // namespace fused::ops
