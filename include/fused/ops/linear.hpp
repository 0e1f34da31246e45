// linear: y = x W^T (+ b). x f32 [T, K], W bf16 [N, K] as Hugging Face stores it, b bf16 [N].
// Kernel: a GEMV when the mode gives one row (decode), a GEMM otherwise (prefill).
// Workspace: bf16 [T, K rounded up to 32] = fk_gemm_bf16_work_bytes(T, K): the GEMM paths that
// multiply in bf16 round x into it once per call (the GEMV and the f32 paths leave it unused).
// The rule is written here and in the kernel; tests/plan/workspace_test.cpp holds them equal.
#pragma once
#include "common.hpp"

namespace fused::ops {

inline constexpr op_def linear{
    .name = "linear",
    .category = "matmul",
    .min_inputs = 2,
    .max_inputs = 3,
    .infer = [](const tensor_info* const* in, int n, const attrs&) -> inferred {
      const auto &x = *in[0], &w = *in[1];
      if (x.type != dtype::f32 || x.shp.rank != 2) return mismatch(0, "input must be f32 [T, K], got " + describe(x));
      if (w.type != dtype::bf16 || w.shp.rank != 2) return mismatch(1, "weight must be bf16 [N, K], got " + describe(w));
      if (w.shp[1].symbol != 0) return mismatch(1, "weight " + describe(w) + " must have a constant number of input features");
      if (!(w.shp[1] == x.shp[1]))
        return mismatch(1, "weight " + describe(w) + " has " + dim_text(w.shp[1]) + " input features but the input " + describe(x) + " has " + dim_text(x.shp[1]));
      if (n == 3) {
        const auto& b = *in[2];
        if (b.type != dtype::bf16 || b.shp.rank != 1 || !(b.shp[0] == w.shp[0]))
          return mismatch(2, "bias must be bf16 [" + dim_text(w.shp[0]) + "], got " + describe(b));
      }
      return result(dtype::f32, shape(x.shp[0], w.shp[0]));
    },
    .in_place_input = -1,
    .mode_sensitive = true,
    .kernel = [](const binding& b, const tensor_info* const* in, int, const tensor_info&) {
      return rows_of(in[0]->shp, b) == 1 ? "fk_gemv_bf16" : "fk_gemm_bf16";
    },
    .work = [](const tensor_info* const* in, int, const attrs&) -> inferred {
      shape s = in[0]->shp;
      s.d[static_cast<std::size_t>(s.rank - 1)] = dim{(s.back().n + 31) / 32 * 32, 0};
      return result(dtype::bf16, s);
    },
    .has_work = true};

}  // namespace fused::ops
