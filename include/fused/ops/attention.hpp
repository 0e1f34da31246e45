// attention: causal grouped-query attention of T queries over a KV cache.
// q f32 [T, heads*head_dim], k and v caches bf16 [n_kv, capacity, head_dim]; attrs.i = {heads}.
// Query t sits at position pos0+t and sees cache positions 0..pos0+t. heads % n_kv == 0. pos0 is
// the call's, or the value of an optional i32 [1] fourth input (op_def::positional).
// Kernel: tiled online softmax for many queries (prefill), a single-query scan for one (decode).
#pragma once
#include "common.hpp"

namespace fused::ops {

inline constexpr attr_field attention_attributes[] = {{"heads", attr_slot::i0}};
inline constexpr data_layout attention_input_layouts[] = {data_layout::plain, data_layout::key_cache, data_layout::value_cache};

inline constexpr op_def attention{
    .name = "attention",
    .category = "attention",
    .min_inputs = 3,
    .max_inputs = 4,
    .infer = [](const tensor_info* const* in, int n, const attrs& a) -> inferred {
      const auto &q = *in[0], &k = *in[1], &v = *in[2];
      if (inferred p = position_input(in, n, 3); !p.error.empty()) return p;
      const auto heads = a.i[0];
      if (k.type != dtype::bf16 || k.shp.rank != 3) return mismatch(1, "key cache must be bf16 [n_kv, capacity, head_dim], got " + describe(k));
      if (!(v.shp == k.shp) || v.type != k.type) return mismatch(2, "value cache " + describe(v) + " differs from the key cache " + describe(k));
      const auto n_kv = k.shp[0].n, hd = k.shp[2].n;
      if (heads <= 0 || n_kv <= 0 || heads % n_kv) return mismatch(1, to_text(heads) + " query heads cannot share " + to_text(n_kv) + " KV heads evenly");
      if (k.shp[2].symbol == 0 && hd > max_head_dim)
        return mismatch(1, "head_dim " + to_text(hd) + " is more than the kernels take (" + to_text(max_head_dim) + ")");
      if (q.type != dtype::f32 || q.shp.rank != 2 || !(q.shp[1] == dim{heads * hd, 0}))
        return mismatch(0, "queries must be f32 [T, " + to_text(heads * hd) + "] (" + to_text(heads) + " heads of " + to_text(hd) + "), got " + describe(q));
      return result(dtype::f32, q.shp);
    },
    .in_place_input = -1,
    .mode_sensitive = false,
    .kernel = [](const binding& b, const tensor_info* const* in, int, const tensor_info&) {
      return rows_of(in[0]->shp, b) == 1 ? "fk_attention_decode" : "fk_attention_prefill";
    },
    .input_layouts = attention_input_layouts,
    .attributes = attention_attributes,
    .positional = true};

}  // namespace fused::ops
