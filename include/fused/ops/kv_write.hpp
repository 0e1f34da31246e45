// kv_write: store T rows of keys or values (f32 [T, n_kv*head_dim]) into a bf16 cache
// [n_kv, capacity, head_dim] at positions pos0..pos0+T-1 (pos0: the call's, or an optional i32 [1] third input). The result is the cache's next value, in
// the cache's own bytes (in place over a state feed). A head's elements are in the order attention reads
// them, which differs for keys and values (fk_k_index, fk_kv_index in kernels/fk_attention.h), not
// [capacity][head_dim] rows: a cache is read through attention only (graph_builder::finish refuses other
// readers). Which order is its readers' to say (data_layout): attention reads its key cache as a key
// cache, so the kv_write under it stores keys.
#pragma once
#include "common.hpp"

namespace fused::ops {

// By the layout the cache is read in (data_layout): values, and a cache no step reads, in fk_kv_store's order.
inline constexpr const char* kv_write_kernels[data_layout_count] = {"fk_kv_store", "fk_k_store", "fk_kv_store"};

inline constexpr op_def kv_write{
    .name = "kv_write",
    .category = "memory",
    .min_inputs = 2,
    .max_inputs = 3,
    .infer = [](const tensor_info* const* in, int n, const attrs&) -> inferred {
      const auto &x = *in[0], &cache = *in[1];
      if (inferred p = position_input(in, n, 2); !p.error.empty()) return p;
      if (x.type != dtype::f32 || x.shp.rank != 2) return mismatch(0, "rows must be f32 [T, n_kv*head_dim], got " + describe(x));
      if (cache.type != dtype::bf16 || cache.shp.rank != 3) return mismatch(1, "cache must be bf16 [n_kv, capacity, head_dim], got " + describe(cache));
      if (cache.shp[0].symbol || cache.shp[2].symbol || !(x.shp[1] == dim{cache.shp[0].n * cache.shp[2].n, 0}))
        return mismatch(0, "rows " + describe(x) + " do not match the cache " + describe(cache));
      return result(dtype::bf16, cache.shp);
    },
    .in_place_input = 1,
    .mode_sensitive = false,
    .kernels_by_layout = kv_write_kernels,
    .positional = true};

}  // namespace fused::ops
