// linear: y = x W^T (+ b). x f32 [T, K], W bf16 [N, K] as Hugging Face stores it, b bf16 [N].
// Kernel: a GEMV when the mode gives one row (decode), a GEMM otherwise (prefill).
// Workspace: bf16 [T, K rounded up to 32] = fk_gemm_bf16_work_bytes(T, K): the GEMM paths that
// multiply in bf16 round x into it once per call (the GEMV and the f32 paths leave it unused).
// The rule is written here and in the kernel; tests/plan/workspace_test.cpp holds them equal.
//
// linear_f32: the same over f32 master weights (training), no workspace; its backward:
//   linear_grad_input  (dy [T, N], W [N, K]) -> dx = dy W      [T, K]
//   linear_grad_weight (dy [T, N], x [T, K]) -> dW = dy^T x    [N, K]
//   sum_rows           (dy [T, N])           -> db = sum_t dy  [N]
#pragma once
#include "common.hpp"

namespace fused::ops {

namespace detail {
constexpr inferred linear_shape(const tensor_info* const* in, int n, dtype weight_type) {
  const auto &x = *in[0], &w = *in[1];
  const text wt = name_of(weight_type);
  if (x.type != dtype::f32 || x.shp.rank != 2) return mismatch(0, "input must be f32 [T, K], got " + describe(x));
  if (w.type != weight_type || w.shp.rank != 2) return mismatch(1, "weight must be " + wt + " [N, K], got " + describe(w));
  if (w.shp[1].symbol != 0) return mismatch(1, "weight " + describe(w) + " must have a constant number of input features");
  if (!(w.shp[1] == x.shp[1]))
    return mismatch(1, "weight " + describe(w) + " has " + dim_text(w.shp[1]) + " input features but the input " + describe(x) + " has " + dim_text(x.shp[1]));
  if (n == 3) {
    const auto& b = *in[2];
    if (b.type != weight_type || b.shp.rank != 1 || !(b.shp[0] == w.shp[0]))
      return mismatch(2, "bias must be " + wt + " [" + dim_text(w.shp[0]) + "], got " + describe(b));
  }
  return result(dtype::f32, shape(x.shp[0], w.shp[0]));
}
}  // namespace detail

inline constexpr op_def linear{
    .name = "linear",
    .category = "matmul",
    .min_inputs = 2,
    .max_inputs = 3,
    .infer = [](const tensor_info* const* in, int n, const attrs&) { return detail::linear_shape(in, n, dtype::bf16); },
    .in_place_input = -1,
    .mode_sensitive = false,
    .kernel = [](const binding& b, const tensor_info* const* in, int, const tensor_info&) {
      return rows_of(in[0]->shp, b) == 1 ? "fk_gemv_bf16" : "fk_gemm_bf16";
    },
    .work = [](const tensor_info* const* in, int, const attrs&) -> inferred {
      shape s = in[0]->shp;
      s.d[static_cast<std::size_t>(s.rank - 1)] = dim{(s.back().n + 31) / 32 * 32, 0};
      return result(dtype::bf16, s);
    },
    .has_work = true};

inline constexpr op_def linear_grad_input{
    .name = "linear_grad_input",
    .category = "matmul",
    .min_inputs = 2,
    .max_inputs = 2,
    .infer = [](const tensor_info* const* in, int, const attrs&) -> inferred {
      const auto &dy = *in[0], &w = *in[1];
      if (w.type != dtype::f32 || w.shp.rank != 2) return mismatch(1, "weight must be f32 [N, K], got " + describe(w));
      if (dy.type != dtype::f32 || dy.shp.rank != 2 || !(dy.shp[1] == w.shp[0])) return mismatch(0, "the gradient must be f32 [T, " + dim_text(w.shp[0]) + "], got " + describe(dy));
      return result(dtype::f32, shape(dy.shp[0], w.shp[1]));
    },
    .kernel = kernel_named<kernel_names::linear_backward_input>};

inline constexpr op_def linear_grad_weight{
    .name = "linear_grad_weight",
    .category = "matmul",
    .min_inputs = 2,
    .max_inputs = 2,
    .infer = [](const tensor_info* const* in, int, const attrs&) -> inferred {
      const auto &dy = *in[0], &x = *in[1];
      if (dy.type != dtype::f32 || dy.shp.rank != 2 || dy.shp[1].symbol != 0) return mismatch(0, "the gradient must be f32 [T, N], got " + describe(dy));
      if (x.type != dtype::f32 || x.shp.rank != 2 || !(x.shp[0] == dy.shp[0])) return mismatch(1, "input must be f32 [" + dim_text(dy.shp[0]) + ", K], got " + describe(x));
      return result(dtype::f32, shape(dy.shp[1], x.shp[1]));
    },
    .kernel = kernel_named<kernel_names::linear_backward_weight>};

inline constexpr op_def sum_rows{
    .name = "sum_rows",
    .category = "elementwise",
    .min_inputs = 1,
    .max_inputs = 1,
    .infer = [](const tensor_info* const* in, int, const attrs&) -> inferred {
      const auto& x = *in[0];
      if (x.type != dtype::f32 || x.shp.rank != 2 || x.shp[1].symbol != 0) return mismatch(0, "must be f32 [T, N], got " + describe(x));
      return result(dtype::f32, shape(x.shp[1]));
    },
    .kernel = kernel_named<kernel_names::sum_rows>};

inline constexpr op_def linear_f32{
    .name = "linear_f32",
    .category = "matmul",
    .min_inputs = 2,
    .max_inputs = 3,
    .infer = [](const tensor_info* const* in, int n, const attrs&) { return detail::linear_shape(in, n, dtype::f32); },
    .kernel = kernel_named<kernel_names::linear_f32>,
    .backward = [](graph_builder& g, backward_args& a) {
      const tensor_id x = input_of(a, 0), w = input_of(a, 1);
      if (a.wants[0]) a.out[0] = g.apply(linear_grad_input, {a.grad, w}, {}, grad_name(g, x));
      if (a.wants[1]) a.out[1] = g.apply(linear_grad_weight, {a.grad, x}, {}, grad_name(g, w));
      if (a.forward->n_inputs == 3 && a.wants[2]) a.out[2] = g.apply(sum_rows, {a.grad}, {}, grad_name(g, input_of(a, 2)));
    },
    .has_backward = true};

}  // namespace fused::ops
