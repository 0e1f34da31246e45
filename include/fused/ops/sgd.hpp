// SGD (torch.optim.SGD: L2 weight decay added to the gradient, momentum with dampening, Nesterov) as
// steps over state. With d = g + weight_decay * p:
//   sgd_momentum         (buf, g, p, t i32 [1])  -> the momentum buffer after the step, in place: d on
//                        the first step (t == 1, the count already advanced), else buf*momentum + (1-dampening)*d;
//                        attrs.f = momentum, extra = {dampening, weight_decay}
//   sgd_update           (p, g, lr f32 [1])      -> p - lr * d, in place; attrs.f = weight_decay
//   sgd_momentum_update  (p, g, buf', lr)        -> p - lr * (nesterov ? d + momentum*buf' : buf'), in place;
//                        attrs.f = momentum, extra = {weight_decay}, i[0] = nesterov (0 or 1)
#pragma once
#include "adamw.hpp"

namespace fused::ops {

namespace detail {
constexpr inferred same_f32_then(const tensor_info* const* in, int same, int n, bool one_i32_last) {
  if (inferred r = same_as_first(in, same); !r.error.empty()) return r;
  for (int k = same; k < n; ++k) {
    if (one_i32_last && k == n - 1) {
      if (!is_one_i32(*in[k])) return mismatch(k, "the step count must be i32 [1], got " + describe(*in[k]));
    } else if (!is_one_f32(*in[k])) {
      return mismatch(k, "the learning rate must be f32 [1], got " + describe(*in[k]));
    }
  }
  return result(dtype::f32, in[0]->shp);
}
constexpr bool is_rate(double v) { return v >= 0 && v < 1; }
}  // namespace detail

inline constexpr op_def sgd_momentum{
    .name = "sgd_momentum",
    .category = "optimizer",
    .min_inputs = 4,
    .max_inputs = 4,
    .infer = [](const tensor_info* const* in, int n, const attrs& a) -> inferred {
      if (!detail::is_rate(a.f) || !(a.extra[0] >= 0 && a.extra[0] <= 1)) return mismatch(-1, "momentum must be in [0, 1) and dampening in [0, 1]");
      if (!(a.extra[1] >= 0)) return mismatch(-1, "weight decay must not be negative");
      return detail::same_f32_then(in, 3, n, true);
    },
    .in_place_input = 0,
    .kernel = kernel_named<kernel_names::sgd_momentum>};

inline constexpr op_def sgd_update{
    .name = "sgd_update",
    .category = "optimizer",
    .min_inputs = 3,
    .max_inputs = 3,
    .infer = [](const tensor_info* const* in, int n, const attrs& a) -> inferred {
      if (!(a.f >= 0)) return mismatch(-1, "weight decay must not be negative");
      return detail::same_f32_then(in, 2, n, false);
    },
    .in_place_input = 0,
    .kernel = kernel_named<kernel_names::sgd_update>};

inline constexpr op_def sgd_momentum_update{
    .name = "sgd_momentum_update",
    .category = "optimizer",
    .min_inputs = 4,
    .max_inputs = 4,
    .infer = [](const tensor_info* const* in, int n, const attrs& a) -> inferred {
      if (!detail::is_rate(a.f) || !(a.extra[0] >= 0)) return mismatch(-1, "momentum must be in [0, 1) and weight decay not negative");
      if (a.i[0] != 0 && a.i[0] != 1) return mismatch(-1, "nesterov is 0 or 1");
      return detail::same_f32_then(in, 3, n, false);
    },
    .in_place_input = 0,
    .kernel = kernel_named<kernel_names::sgd_momentum_update>};

}  // namespace fused::ops
