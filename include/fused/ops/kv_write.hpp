// kv_write: store T rows of keys or values (f32 [T, n_kv*head_dim]) into a bf16 cache
// [n_kv, capacity, head_dim] at positions pos0..pos0+T-1. The result is the cache's next value, in
// the cache's own bytes (in place over a state feed).
#pragma once
#include "common.hpp"

namespace fused::ops {

inline constexpr op_def kv_write{
    .name = "kv_write",
    .category = "memory",
    .min_inputs = 2,
    .max_inputs = 2,
    .infer = [](const tensor_info* const* in, int, const attrs&) -> inferred {
      const auto &x = *in[0], &cache = *in[1];
      if (x.type != dtype::f32 || x.shp.rank != 2) return mismatch(0, "rows must be f32 [T, n_kv*head_dim], got " + describe(x));
      if (cache.type != dtype::bf16 || cache.shp.rank != 3) return mismatch(1, "cache must be bf16 [n_kv, capacity, head_dim], got " + describe(cache));
      if (cache.shp[0].symbol || cache.shp[2].symbol || !(x.shp[1] == dim{cache.shp[0].n * cache.shp[2].n, 0}))
        return mismatch(0, "rows " + describe(x) + " do not match the cache " + describe(cache));
      return result(dtype::bf16, cache.shp);
    },
    .in_place_input = 1,
    .mode_sensitive = true,
    .kernel = [](const binding&, const tensor_info* const*, int, const tensor_info&) { return "fk_kv_store"; }};

}  // namespace fused::ops
