// Ops on token ids and positions, what a generation loop runs beside the model (host kernels, like
// graph_ops.hpp's; run-time executors only):
//   argmax(x)              f32 [..., N] -> i32 [...]: the first index of the largest (NaN never
//                          wins), the rule `fused run --temp 0` picks by (fk_argmax)
//   not_in(x; values)      i32 -> bool, same shape: x is none of `values` (up to four ids: the stop ids)
//   store_at(buf, v, i)    i32 [N], i32 [1], i32 [1] -> buf with buf[i] = v, in place over buf
//   increment(x; by)       i32 -> i32: x + by
//   next_position(x)       any [T, ...] -> i32 [1]: the position after x's rows (the call's + T)
//   full_int(; value, shape) -> i32 filled with value
#pragma once
#include <algorithm>
#include <cstdint>
#include <stdexcept>
#include <string>

#include <fk_sample.h>

#include "graph_ops.hpp"

namespace fused::ops {

namespace host_detail {
inline std::int32_t* out_i32(const host_args& a) { return reinterpret_cast<std::int32_t*>(a.out.data); }
inline const std::int32_t* in_i32(const host_args& a, int k) { return reinterpret_cast<const std::int32_t*>(a.in[k].data); }
constexpr bool is_one_i32(const tensor_info& t) { return t.type == dtype::i32 && t.shp.rank == 1 && t.shp[0] == dim{1, 0}; }
inline constexpr attr_field not_in_attributes[] = {{"values", attr_slot::ints}};
inline constexpr attr_field increment_attributes[] = {{"by", attr_slot::i0}};
inline constexpr attr_field full_int_attributes[] = {{"value", attr_slot::f}, {"shape", attr_slot::ints}};
}  // namespace host_detail

inline constexpr op_def argmax = host_detail::host_op({
    .name = "argmax",
    .category = "elementwise",
    .min_inputs = 1,
    .max_inputs = 1,
    .infer = [](const tensor_info* const* in, int, const attrs&) -> inferred {
      const auto& x = *in[0];
      if (x.type != dtype::f32 || x.shp.rank < 1 || x.shp.back().symbol != 0)
        return mismatch(0, "must be f32 with a constant last dim, got " + describe(x));
      shape r = x.shp;
      --r.rank;
      return result(dtype::i32, r);
    },
    .host = [](const host_args& a) {
      const std::int64_t n = host_detail::last_dim(a.in[0]);
      const float* x = host_detail::in_f32(a, 0);
      std::int32_t* out = host_detail::out_i32(a);
      for (std::int64_t row = 0, rows = a.out.elements(); row < rows; ++row)
        out[row] = static_cast<std::int32_t>(fk_argmax(x + row * n, static_cast<std::size_t>(n)));
    }});

inline constexpr op_def not_in = host_detail::host_op({
    .name = "not_in",
    .category = "elementwise",
    .min_inputs = 1,
    .max_inputs = 1,
    .infer = [](const tensor_info* const* in, int, const attrs&) -> inferred {
      if (in[0]->type != dtype::i32) return mismatch(0, "must be i32, got " + describe(*in[0]));
      return result(dtype::boolean, in[0]->shp);
    },
    .host = [](const host_args& a) {
      const std::int32_t* x = host_detail::in_i32(a, 0);
      auto* out = reinterpret_cast<std::uint8_t*>(a.out.data);
      for (std::int64_t i = 0, n = a.out.elements(); i < n; ++i) {
        bool found = false;
        for (int k = 0; k < 4 && a.at->i[k] != no_value; ++k) found = found || a.at->i[k] == x[i];
        out[i] = found ? 0 : 1;
      }
    },
    .attributes = host_detail::not_in_attributes});

namespace host_detail {
constexpr op_def in_place_over_first(op_def d) {
  d.in_place_input = 0;
  return d;
}
}  // namespace host_detail

inline constexpr op_def store_at = host_detail::in_place_over_first(host_detail::host_op({
    .name = "store_at",
    .category = "memory",
    .min_inputs = 3,
    .max_inputs = 3,
    .infer = [](const tensor_info* const* in, int, const attrs&) -> inferred {
      if (in[0]->type != dtype::i32 || in[0]->shp.rank != 1) return mismatch(0, "must be i32 [N], got " + describe(*in[0]));
      if (!host_detail::is_one_i32(*in[1])) return mismatch(1, "the value must be i32 [1], got " + describe(*in[1]));
      if (!host_detail::is_one_i32(*in[2])) return mismatch(2, "the index must be i32 [1], got " + describe(*in[2]));
      return result(dtype::i32, in[0]->shp);
    },
    .host = [](const host_args& a) {
      const std::int64_t n = a.out.elements(), at = *host_detail::in_i32(a, 2);
      if (at < 0 || at >= n) throw std::out_of_range("index " + std::to_string(at) + " is outside [0, " + std::to_string(n) + ")");
      if (a.out.data != a.in[0].data) std::copy_n(host_detail::in_i32(a, 0), n, host_detail::out_i32(a));
      host_detail::out_i32(a)[at] = *host_detail::in_i32(a, 1);
    }}));

inline constexpr op_def increment = host_detail::host_op({
    .name = "increment",
    .category = "elementwise",
    .min_inputs = 1,
    .max_inputs = 1,
    .infer = [](const tensor_info* const* in, int, const attrs& at) -> inferred {
      if (in[0]->type != dtype::i32) return mismatch(0, "must be i32, got " + describe(*in[0]));
      if (at.i[0] < -(std::int64_t{1} << 30) || at.i[0] > (std::int64_t{1} << 30)) return mismatch(-1, "by must be within +-2^30");
      return result(dtype::i32, in[0]->shp);
    },
    .host = [](const host_args& a) {
      const std::int32_t* x = host_detail::in_i32(a, 0);
      std::int32_t* out = host_detail::out_i32(a);
      for (std::int64_t i = 0, n = a.out.elements(); i < n; ++i) {
        const std::int64_t v = std::int64_t{x[i]} + a.at->i[0];
        if (v < INT32_MIN || v > INT32_MAX) throw std::out_of_range(std::to_string(x[i]) + " + " + std::to_string(a.at->i[0]) + " overflows i32");
        out[i] = static_cast<std::int32_t>(v);
      }
    },
    .attributes = host_detail::increment_attributes});

inline constexpr op_def next_position = host_detail::host_op({
    .name = "next_position",
    .category = "memory",
    .min_inputs = 1,
    .max_inputs = 1,
    .infer = [](const tensor_info* const* in, int, const attrs&) -> inferred {
      if (in[0]->shp.rank < 1) return mismatch(0, "must have rows (rank 1 or more), got " + describe(*in[0]));
      return result(dtype::i32, shape(1));
    },
    .host = [](const host_args& a) { *host_detail::out_i32(a) = static_cast<std::int32_t>(a.pos0 + a.in[0].dims[0]); }});

inline constexpr op_def full_int = host_detail::host_op({
    .name = "full_int",
    .category = "memory",
    .min_inputs = 0,
    .max_inputs = 0,
    .infer = [](const tensor_info* const*, int, const attrs& at) -> inferred {
      if (!(at.f >= INT32_MIN && at.f <= INT32_MAX) || at.f != static_cast<double>(static_cast<std::int64_t>(at.f)))
        return mismatch(-1, "value must be an integer within i32's range");
      inferred r = host_detail::constant_shape(at);
      r.type = dtype::i32;
      return r;
    },
    .host = [](const host_args& a) { std::fill_n(host_detail::out_i32(a), a.out.elements(), static_cast<std::int32_t>(a.at->f)); },
    .attributes = host_detail::full_int_attributes});

}  // namespace fused::ops
