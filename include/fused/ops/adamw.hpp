// AdamW (torch.optim.AdamW: decoupled weight decay, bias correction) as steps over state:
//   advance_step        (t i32 [1])                       -> t + 1, in place (the optimizer's step count)
//   adamw_factors       (t i32 [1], lr f32 [1])           -> f32 [4] {1 - lr*wd, lr / (1 - beta1^t), sqrt(1 - beta2^t), lr}
//                       attrs.f = beta1, extra = {beta2, weight_decay}
//   adam_first_moment   (m, g)                            -> m*beta1 + (1-beta1)*g, in place; attrs.f = beta1
//   adam_second_moment  (v, g)                            -> v*beta2 + (1-beta2)*g*g, in place; attrs.f = beta2
//   adamw_update        (p, m', v', factors)              -> the parameter after the step, in place; attrs.f = eps
// Parameters, moments and the step count are state, so each update writes its state's own bytes.
#pragma once
#include "common.hpp"

namespace fused::ops {

namespace detail {
constexpr bool is_one_f32(const tensor_info& t) { return t.type == dtype::f32 && t.shp.rank == 1 && t.shp[0] == dim{1, 0}; }
constexpr inferred same_as_first(const tensor_info* const* in, int n) {
  for (int k = 1; k < n; ++k)
    if (in[k]->type != dtype::f32 || !(in[k]->shp == in[0]->shp)) return mismatch(k, "must be " + describe(*in[0]) + ", got " + describe(*in[k]));
  if (in[0]->type != dtype::f32) return mismatch(0, "must be f32, got " + describe(*in[0]));
  return result(dtype::f32, in[0]->shp);
}
}  // namespace detail

inline constexpr op_def advance_step{
    .name = "advance_step",
    .category = "optimizer",
    .min_inputs = 1,
    .max_inputs = 1,
    .infer = [](const tensor_info* const* in, int, const attrs& a) -> inferred {
      if (!is_one_i32(*in[0])) return mismatch(0, "the step count must be i32 [1], got " + describe(*in[0]));
      if (a.i[0] != 1) return mismatch(-1, "a step advances by 1");
      return result(dtype::i32, in[0]->shp);
    },
    .in_place_input = 0,
    .kernel = kernel_named<kernel_names::increment>};

inline constexpr op_def adamw_factors{
    .name = "adamw_factors",
    .category = "optimizer",
    .min_inputs = 2,
    .max_inputs = 2,
    .infer = [](const tensor_info* const* in, int, const attrs& a) -> inferred {
      if (!is_one_i32(*in[0])) return mismatch(0, "the step count must be i32 [1], got " + describe(*in[0]));
      if (!detail::is_one_f32(*in[1])) return mismatch(1, "the learning rate must be f32 [1], got " + describe(*in[1]));
      if (!(a.f >= 0 && a.f < 1) || !(a.extra[0] >= 0 && a.extra[0] < 1)) return mismatch(-1, "betas must be in [0, 1)");
      if (!(a.extra[1] >= 0)) return mismatch(-1, "weight decay must not be negative");
      return result(dtype::f32, shape(4));
    },
    .kernel = kernel_named<kernel_names::adamw_factors>};

inline constexpr op_def adam_first_moment{
    .name = "adam_first_moment",
    .category = "optimizer",
    .min_inputs = 2,
    .max_inputs = 2,
    .infer = [](const tensor_info* const* in, int n, const attrs&) { return detail::same_as_first(in, n); },
    .in_place_input = 0,
    .kernel = kernel_named<kernel_names::adam_first_moment>};

inline constexpr op_def adam_second_moment{
    .name = "adam_second_moment",
    .category = "optimizer",
    .min_inputs = 2,
    .max_inputs = 2,
    .infer = [](const tensor_info* const* in, int n, const attrs&) { return detail::same_as_first(in, n); },
    .in_place_input = 0,
    .kernel = kernel_named<kernel_names::adam_second_moment>};

inline constexpr op_def adamw_update{
    .name = "adamw_update",
    .category = "optimizer",
    .min_inputs = 4,
    .max_inputs = 4,
    .infer = [](const tensor_info* const* in, int, const attrs& a) -> inferred {
      if (inferred r = detail::same_as_first(in, 3); !r.error.empty()) return r;
      if (in[3]->type != dtype::f32 || !(in[3]->shp == shape(4))) return mismatch(3, "the factors must be f32 [4], got " + describe(*in[3]));
      if (!(a.f > 0)) return mismatch(-1, "eps must be positive");
      return result(dtype::f32, in[0]->shp);
    },
    .in_place_input = 0,
    .kernel = kernel_named<kernel_names::adamw_update>};

}  // namespace fused::ops
