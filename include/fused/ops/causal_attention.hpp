// causal_attention: causal grouped-query attention of one whole sequence, no KV cache (training):
// q f32 [T, heads*hd], k and v f32 [T, kv_heads*hd] -> f32 [T, heads*hd]; attrs.i = {heads, kv_heads,
// period, dropout key}: with a period P > 0 the rows are sequences of P rows packed (a batch), each
// attending within its own sequence. Attention dropout: attrs.f = p, and a fourth input, the step
// number i32 [1] (the train step's), draws the mask (fk_dropout_f32's, keyed by attrs.i[3]); mode
// sensitive: a program that does not train attends without it.
// Its backward: attention_grad (q, k, v, dy [, step]) -> [T, (heads + 2*kv_heads)*hd], each row
// [dq | dk | dv] (workspace: f32 [2*kv_heads, T]), and take_columns, which copies one of the three out.
#pragma once
#include "common.hpp"

namespace fused::ops {

namespace detail {
struct attention_sizes {
  std::int64_t heads = 0, kv_heads = 0, head_dim = 0;
};
constexpr attention_sizes attention_sizes_of(const tensor_info& q, const attrs& a) {
  const std::int64_t heads = a.i[0], kv = a.i[1];
  if (heads <= 0 || kv <= 0 || heads % kv || q.shp.rank != 2 || q.shp[1].symbol != 0 || q.shp[1].n % heads) return {};
  return {heads, kv, q.shp[1].n / heads};
}
constexpr inferred causal_attention_shape(const tensor_info* const* in, int, const attrs& a) {
  const auto &q = *in[0], &k = *in[1], &v = *in[2];
  const attention_sizes z = attention_sizes_of(q, a);
  if (z.heads == 0) return mismatch(0, "queries must be f32 [T, heads*head_dim] with heads a multiple of kv_heads (attrs " + to_text(a.i[0]) + ", " + to_text(a.i[1]) + "), got " + describe(q));
  if (q.type != dtype::f32) return mismatch(0, "queries must be f32, got " + describe(q));
  if (a.i[2] < 0) return mismatch(-1, "the period (rows per packed sequence) must not be negative");
  const shape kv_shape(q.shp[0], z.kv_heads * z.head_dim);
  if (k.type != dtype::f32 || !(k.shp == kv_shape)) return mismatch(1, "keys must be f32 " + shape_text(kv_shape) + ", got " + describe(k));
  if (v.type != dtype::f32 || !(v.shp == kv_shape)) return mismatch(2, "values must be f32 " + shape_text(kv_shape) + ", got " + describe(v));
  if (!(a.f >= 0 && a.f < 1)) return mismatch(-1, "the dropout probability must be in [0, 1)");
  return result(dtype::f32, q.shp);
}
// The optional step count after the `others` inputs: needed exactly when there is dropout.
constexpr inferred dropout_step(const tensor_info* const* in, int n, const attrs& a, int others) {
  if (n > others && !is_one_i32(*in[others])) return mismatch(others, "the dropout's step count must be i32 [1], got " + describe(*in[others]));
  if (a.f > 0 && n <= others) return mismatch(-1, "attention dropout needs the step count as input " + to_text(others));
  return {};
}
}  // namespace detail

inline constexpr attr_field causal_attention_attributes[] = {{"heads", attr_slot::i0}, {"kv_heads", attr_slot::i1}, {"period", attr_slot::i2},
                                                             {"dropout_key", attr_slot::i3}, {"dropout", attr_slot::f}};

inline constexpr op_def attention_grad{
    .name = "attention_grad",
    .category = "attention",
    .min_inputs = 4,
    .max_inputs = 5,
    .infer = [](const tensor_info* const* in, int n, const attrs& a) -> inferred {
      inferred r = detail::causal_attention_shape(in, n, a);
      if (!r.error.empty()) return r;
      if (in[3]->type != dtype::f32 || !(in[3]->shp == in[0]->shp)) return mismatch(3, "the gradient must be " + describe(*in[0]) + ", got " + describe(*in[3]));
      if (inferred s = detail::dropout_step(in, n, a, 4); !s.error.empty()) return s;
      const detail::attention_sizes z = detail::attention_sizes_of(*in[0], a);
      return result(dtype::f32, shape(in[0]->shp[0], (z.heads + 2 * z.kv_heads) * z.head_dim));
    },
    .mode_sensitive = true,
    .kernel = kernel_named<kernel_names::attention_causal_backward>,
    .work = [](const tensor_info* const* in, int, const attrs& a) -> inferred {
      return result(dtype::f32, shape(2 * a.i[1], in[0]->shp[0]));
    },
    .has_work = true};

// attrs.i = {first column, columns}
inline constexpr op_def take_columns{
    .name = "take_columns",
    .category = "memory",
    .min_inputs = 1,
    .max_inputs = 1,
    .infer = [](const tensor_info* const* in, int, const attrs& a) -> inferred {
      const auto& x = *in[0];
      if (x.type != dtype::f32 || x.shp.rank != 2 || x.shp[1].symbol != 0) return mismatch(0, "must be f32 [T, N], got " + describe(x));
      if (a.i[0] < 0 || a.i[1] <= 0 || a.i[0] + a.i[1] > x.shp[1].n)
        return mismatch(-1, "columns " + to_text(a.i[0]) + ".." + to_text(a.i[0] + a.i[1] - 1) + " are not within " + describe(x));
      return result(dtype::f32, shape(x.shp[0], a.i[1]));
    },
    .kernel = kernel_named<kernel_names::take_columns>};

inline constexpr op_def causal_attention{
    .name = "causal_attention",
    .category = "attention",
    .min_inputs = 3,
    .max_inputs = 4,
    .infer = [](const tensor_info* const* in, int n, const attrs& a) -> inferred {
      inferred r = detail::causal_attention_shape(in, n, a);
      if (!r.error.empty()) return r;
      if (inferred s = detail::dropout_step(in, n, a, 3); !s.error.empty()) return s;
      return r;
    },
    .mode_sensitive = true,
    .kernel = kernel_named<kernel_names::attention_causal>,
    .attributes = causal_attention_attributes,
    .backward = [](graph_builder& g, backward_args& a) {
      const tensor_id q = input_of(a, 0), k = input_of(a, 1), v = input_of(a, 2);
      const detail::attention_sizes z = detail::attention_sizes_of(g.peek().tensor(q), a.forward->at);
      const name_ref all_name{g.peek().tensor(a.forward->result).name.pattern, g.peek().tensor(a.forward->result).name.index, ".grad_qkv"};
      const tensor_id all = a.forward->n_inputs > 3 ? g.apply(attention_grad, {q, k, v, a.grad, input_of(a, 3)}, a.forward->at, all_name)
                                                    : g.apply(attention_grad, {q, k, v, a.grad}, a.forward->at, all_name);
      const std::int64_t first[3] = {0, z.heads * z.head_dim, (z.heads + z.kv_heads) * z.head_dim};
      const std::int64_t count[3] = {z.heads * z.head_dim, z.kv_heads * z.head_dim, z.kv_heads * z.head_dim};
      for (int i = 0; i < 3; ++i)
        if (a.wants[i]) a.out[i] = g.apply(take_columns, {all}, {.i = {first[i], count[i], 0, 0}}, grad_name(g, input_of(a, i)));
    },
    .has_backward = true};

}  // namespace fused::ops
