// Elementwise ops on f32 tensors of one shape; the result may take over the first input's bytes.
//   add:    a + b            (the residual stream)
//   swiglu: silu(a) * b      (Qwen2's gated MLP: a = gate, b = up)
// Backward: add passes its gradient to both inputs; swiglu_grad (gate, up, dy) -> d gate
// (attrs.i[0] = 0) or d up (1).
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
                             .kernel = [](const binding&, const tensor_info* const*, int, const tensor_info&) { return "fk_add"; },
                             .backward = [](graph_builder&, backward_args& a) { a.out[0] = a.out[1] = a.grad; },
                             .has_backward = true};

inline constexpr op_def swiglu_grad{
    .name = "swiglu_grad",
    .category = "elementwise",
    .min_inputs = 3,
    .max_inputs = 3,
    .infer = [](const tensor_info* const* in, int n, const attrs& a) -> inferred {
      if (inferred r = detail::same_shape_f32(in, n, a); !r.error.empty()) return r;
      if (in[2]->type != dtype::f32 || !(in[2]->shp == in[0]->shp)) return mismatch(2, "the gradient must be " + describe(*in[0]) + ", got " + describe(*in[2]));
      if (a.i[0] != 0 && a.i[0] != 1) return mismatch(-1, "which must be 0 (the gate) or 1 (up)");
      return result(dtype::f32, in[0]->shp);
    },
    .kernel = kernel_named<kernel_names::swiglu_backward>};

inline constexpr op_def swiglu{.name = "swiglu",
                             .category = "elementwise",
                             .min_inputs = 2,
                             .max_inputs = 2,
                             .infer = detail::same_shape_f32,
                             .in_place_input = 0,
                             .mode_sensitive = false,
                             .kernel = [](const binding&, const tensor_info* const*, int, const tensor_info&) { return "fk_swiglu"; },
                             .backward = [](graph_builder& g, backward_args& a) {
                               const tensor_id gate = input_of(a, 0), up = input_of(a, 1);
                               for (int k = 0; k < 2; ++k)
                                 if (a.wants[k]) a.out[k] = g.apply(swiglu_grad, {gate, up, a.grad}, {.i = {k, 0, 0, 0}}, grad_name(g, input_of(a, k)));
                             },
                             .has_backward = true};

}  // namespace fused::ops
