// rms_norm: y = x / sqrt(mean(x^2) + eps) * w, row by row. x f32 [..., H], w [H] (bf16, or f32
// master weights when training); attrs.f = eps.
// head_rms_norm: the same over each head of x f32 [T, heads*head_dim] on its own, with one weight
// [head_dim] shared by the heads (Qwen3's q_norm / k_norm); attrs.i = {heads}, attrs.f = eps.
// Backward (f32 weights): rms_norm_grad_input (x, w, dy) -> dx and rms_norm_grad_weight (x, dy) -> dw,
// with the forward's attributes (attrs.i[0] = heads for the head-wise norm, 0 for the whole row).
#pragma once
#include "common.hpp"

namespace fused::ops {

namespace detail {
// The rows the norm normalizes on their own: heads of head_dim (a.i[0] > 0), or whole rows.
constexpr inferred norm_rows(const tensor_info& x, const tensor_info& w, const attrs& a, dtype weight_type) {
  if (x.type != dtype::f32 || x.shp.rank < 1) return mismatch(0, "input must be f32 [..., H], got " + describe(x));
  if (w.type != weight_type || w.shp.rank != 1 || w.shp[0].symbol != 0 || w.shp[0].n <= 0)
    return mismatch(1, "weight must be " + text(name_of(weight_type)) + " [" + (a.i[0] > 0 ? text("head_dim") : dim_text(x.shp.back())) + "], got " + describe(w));
  const std::int64_t heads = a.i[0] > 0 ? a.i[0] : 1;
  if (!(x.shp.back() == dim{heads * w.shp[0].n, 0}))
    return mismatch(1, "weight " + describe(w) + " does not fit " + (a.i[0] > 0 ? to_text(heads) + " heads of " : text()) + "the input " + describe(x));
  if (!(a.f > 0)) return mismatch(-1, "eps must be positive");
  return result(dtype::f32, x.shp);
}

constexpr inferred norm_grad_input(const tensor_info* const* in, int, const attrs& a) {
  if (inferred r = norm_rows(*in[0], *in[1], a, dtype::f32); !r.error.empty()) return r;
  if (in[2]->type != dtype::f32 || !(in[2]->shp == in[0]->shp)) return mismatch(2, "the gradient must be " + describe(*in[0]) + ", got " + describe(*in[2]));
  return result(dtype::f32, in[0]->shp);
}
constexpr inferred norm_grad_weight(const tensor_info* const* in, int, const attrs& a) {
  const auto &x = *in[0], &dy = *in[1];
  if (x.type != dtype::f32 || x.shp.rank < 1 || x.shp.back().symbol != 0) return mismatch(0, "input must be f32 [..., H], got " + describe(x));
  if (dy.type != dtype::f32 || !(dy.shp == x.shp)) return mismatch(1, "the gradient must be " + describe(x) + ", got " + describe(dy));
  const std::int64_t heads = a.i[0] > 0 ? a.i[0] : 1;
  if (x.shp.back().n % heads) return mismatch(0, "input " + describe(x) + " does not hold " + to_text(heads) + " heads");
  if (!(a.f > 0)) return mismatch(-1, "eps must be positive");
  return result(dtype::f32, shape(x.shp.back().n / heads));
}
}  // namespace detail

inline constexpr op_def rms_norm_grad_input{
    .name = "rms_norm_grad_input",
    .category = "norm",
    .min_inputs = 3,
    .max_inputs = 3,
    .infer = detail::norm_grad_input,
    .kernel = kernel_named<kernel_names::rmsnorm_backward_input>};

inline constexpr op_def rms_norm_grad_weight{
    .name = "rms_norm_grad_weight",
    .category = "norm",
    .min_inputs = 2,
    .max_inputs = 2,
    .infer = detail::norm_grad_weight,
    .kernel = kernel_named<kernel_names::rmsnorm_backward_weight>};

namespace detail {
constexpr void norm_backward(graph_builder& g, backward_args& a) {
  const tensor_id x = input_of(a, 0), w = input_of(a, 1);
  attrs at = a.forward->at;
  if (a.wants[0]) a.out[0] = g.apply(rms_norm_grad_input, {x, w, a.grad}, at, grad_name(g, x));
  if (a.wants[1]) a.out[1] = g.apply(rms_norm_grad_weight, {x, a.grad}, at, grad_name(g, w));
}
constexpr const char* norm_kernel(const char* bf16_kernel, const tensor_info& w) { return w.type == dtype::f32 ? kernel_names::rmsnorm_f32 : bf16_kernel; }
}  // namespace detail

inline constexpr attr_field rms_norm_attributes[] = {{"eps", attr_slot::f}};

inline constexpr op_def rms_norm{
    .name = "rms_norm",
    .category = "norm",
    .min_inputs = 2,
    .max_inputs = 2,
    .infer = [](const tensor_info* const* in, int, const attrs& a) -> inferred {
      const auto &x = *in[0], &w = *in[1];
      if (x.type != dtype::f32 || x.shp.rank < 1) return mismatch(0, "input must be f32 [..., H], got " + describe(x));
      if (!is_weight_type(w.type) || w.shp.rank != 1 || !(w.shp[0] == x.shp.back()))
        return mismatch(1, "weight must be bf16 or f32 [" + dim_text(x.shp.back()) + "] to match the input " + describe(x) + ", got " + describe(w));
      if (!(a.f > 0)) return mismatch(-1, "eps must be positive");
      return result(dtype::f32, x.shp);
    },
    .in_place_input = -1,
    .mode_sensitive = false,
    .kernel = [](const binding&, const tensor_info* const* in, int, const tensor_info&) { return detail::norm_kernel("fk_rmsnorm", *in[1]); },
    .attributes = rms_norm_attributes,
    .backward = detail::norm_backward,
    .has_backward = true};

inline constexpr attr_field head_rms_norm_attributes[] = {{"heads", attr_slot::i0}, {"eps", attr_slot::f}};

inline constexpr op_def head_rms_norm{
    .name = "head_rms_norm",
    .category = "norm",
    .min_inputs = 2,
    .max_inputs = 2,
    .infer = [](const tensor_info* const* in, int, const attrs& a) -> inferred {
      const auto &x = *in[0], &w = *in[1];
      const auto heads = a.i[0];
      if (x.type != dtype::f32 || x.shp.rank != 2) return mismatch(0, "input must be f32 [T, heads*head_dim], got " + describe(x));
      if (!is_weight_type(w.type) || w.shp.rank != 1 || w.shp[0].symbol != 0 || w.shp[0].n <= 0)
        return mismatch(1, "weight must be bf16 or f32 [head_dim], got " + describe(w));
      if (heads <= 0 || !(x.shp[1] == dim{heads * w.shp[0].n, 0}))
        return mismatch(0, "input " + describe(x) + " does not hold " + to_text(heads) + " heads of the weight's " + to_text(w.shp[0].n));
      if (!(a.f > 0)) return mismatch(-1, "eps must be positive");
      return result(dtype::f32, x.shp);
    },
    .in_place_input = 0,
    .mode_sensitive = false,
    .kernel = [](const binding&, const tensor_info* const* in, int, const tensor_info&) { return detail::norm_kernel("fk_rmsnorm_heads", *in[1]); },
    .attributes = head_rms_norm_attributes,
    .backward = detail::norm_backward,
    .has_backward = true};

}  // namespace fused::ops
