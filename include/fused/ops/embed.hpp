// embed: token ids i32 [T] gathered from a table [V, H] (bf16, or f32 master weights when training) -> f32 [T, H].
// embed_grad: its backward for the table: d table [V, H] = the rows of d result added at their ids
// (attrs.i[0] = V).
#pragma once
#include "common.hpp"

namespace fused::ops {

inline constexpr op_def embed_grad{
    .name = "embed_grad",
    .category = "memory",
    .min_inputs = 2,
    .max_inputs = 2,
    .infer = [](const tensor_info* const* in, int, const attrs& a) -> inferred {
      const auto &ids = *in[0], &dy = *in[1];
      if (ids.type != dtype::i32 || ids.shp.rank != 1) return mismatch(0, "token ids must be i32 [T], got " + describe(ids));
      if (dy.type != dtype::f32 || dy.shp.rank != 2 || !(dy.shp[0] == ids.shp[0])) return mismatch(1, "the gradient must be f32 [T, H], got " + describe(dy));
      if (a.i[0] <= 0) return mismatch(-1, "the vocabulary size must be positive");
      return result(dtype::f32, shape(a.i[0], dy.shp[1]));
    },
    .kernel = [](const binding&, const tensor_info* const*, int, const tensor_info&) { return "fk_embed_backward"; }};

inline constexpr op_def embed{
    .name = "embed",
    .category = "memory",
    .min_inputs = 2,
    .max_inputs = 2,
    .infer = [](const tensor_info* const* in, int, const attrs&) -> inferred {
      const auto &ids = *in[0], &table = *in[1];
      if (ids.type != dtype::i32 || ids.shp.rank != 1) return mismatch(0, "token ids must be i32 [T], got " + describe(ids));
      if (!is_weight_type(table.type) || table.shp.rank != 2) return mismatch(1, "the table must be bf16 or f32 [V, H], got " + describe(table));
      return result(dtype::f32, shape(ids.shp[0], table.shp[1]));
    },
    .in_place_input = -1,
    .mode_sensitive = false,
    .kernel = [](const binding&, const tensor_info* const* in, int, const tensor_info&) { return in[1]->type == dtype::f32 ? "fk_embed_f32" : "fk_embed"; },
    .backward = [](graph_builder& g, backward_args& a) {
      const tensor_id table = input_of(a, 1);
      if (a.wants[1]) a.out[1] = g.apply(embed_grad, {input_of(a, 0), a.grad}, {.i = {g.peek().tensor(table).shp[0].n, 0, 0, 0}}, grad_name(g, table));
    },
    .has_backward = true};

}  // namespace fused::ops
