// rms_norm: y = x / sqrt(mean(x^2) + eps) * w, row by row. x f32 [..., H], w bf16 [H]; attrs.f = eps.
// head_rms_norm: the same over each head of x f32 [T, heads*head_dim] on its own, with one weight
// bf16 [head_dim] shared by the heads (Qwen3's q_norm / k_norm); attrs.i = {heads}, attrs.f = eps.
#pragma once
#include "common.hpp"

namespace fused::ops {

inline constexpr attr_field rms_norm_attributes[] = {{"eps", attr_slot::f}};

inline constexpr op_def rms_norm{
    .name = "rms_norm",
    .category = "norm",
    .min_inputs = 2,
    .max_inputs = 2,
    .infer = [](const tensor_info* const* in, int, const attrs& a) -> inferred {
      const auto &x = *in[0], &w = *in[1];
      if (x.type != dtype::f32 || x.shp.rank < 1) return mismatch(0, "input must be f32 [..., H], got " + describe(x));
      if (w.type != dtype::bf16 || w.shp.rank != 1 || !(w.shp[0] == x.shp.back()))
        return mismatch(1, "weight must be bf16 [" + dim_text(x.shp.back()) + "] to match the input " + describe(x) + ", got " + describe(w));
      if (!(a.f > 0)) return mismatch(-1, "eps must be positive");
      return result(dtype::f32, x.shp);
    },
    .in_place_input = -1,
    .mode_sensitive = false,
    .kernel = [](const binding&, const tensor_info* const*, int, const tensor_info&) { return "fk_rmsnorm"; },
    .attributes = rms_norm_attributes};

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
      if (w.type != dtype::bf16 || w.shp.rank != 1 || w.shp[0].symbol != 0 || w.shp[0].n <= 0)
        return mismatch(1, "weight must be bf16 [head_dim], got " + describe(w));
      if (heads <= 0 || !(x.shp[1] == dim{heads * w.shp[0].n, 0}))
        return mismatch(0, "input " + describe(x) + " does not hold " + to_text(heads) + " heads of the weight's " + to_text(w.shp[0].n));
      if (!(a.f > 0)) return mismatch(-1, "eps must be positive");
      return result(dtype::f32, x.shp);
    },
    .in_place_input = 0,
    .mode_sensitive = false,
    .kernel = [](const binding&, const tensor_info* const*, int, const tensor_info&) { return "fk_rmsnorm_heads"; },
    .attributes = head_rms_norm_attributes};

}  // namespace fused::ops
