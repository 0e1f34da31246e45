// Ops on token ids and positions, what a generation loop runs beside the model. Each is a C kernel
// (kernels/fk_sequence.h), so every executor runs it, the C generator too:
//   argmax(x)              f32 [..., N] -> i32 [...]: the first index of the largest (NaN never
//                          wins), the rule `fused run --temp 0` picks by (fk_argmax)
//   not_in(x; values)      i32 -> bool, same shape: x is none of `values` (0 to 4 ids: the stop ids)
//   store_at(buf, v, i)    i32 [N], i32 [1], i32 [1] -> buf with buf[i] = v, in place over buf
//   increment(x; by)       i32 -> i32: x + by
//   next_position(x)       any [T, ...] -> i32 [1]: the position after x's rows (the call's + T)
//   full_int(; value, shape) -> i32 filled with value
#pragma once
#include <cstdint>

#include "graph_ops.hpp"

namespace fused::ops {

namespace sequence_detail {
inline constexpr char argmax_kernel[] = "fk_argmax_rows", not_in_kernel[] = "fk_not_in", store_at_kernel[] = "fk_store_at",
                      increment_kernel[] = "fk_increment_i32", next_position_kernel[] = "fk_next_position", fill_kernel[] = "fk_fill_i32";
inline constexpr attr_field not_in_attributes[] = {{"values", attr_slot::ints}};
inline constexpr attr_field increment_attributes[] = {{"by", attr_slot::i0}};
inline constexpr attr_field full_int_attributes[] = {{"value", attr_slot::f}, {"shape", attr_slot::ints}};
constexpr bool is_i32_value(std::int64_t v) { return v >= INT32_MIN && v <= INT32_MAX; }
}  // namespace sequence_detail

inline constexpr op_def argmax{
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
    .kernel = kernel_named<sequence_detail::argmax_kernel>};

inline constexpr op_def not_in{
    .name = "not_in",
    .category = "elementwise",
    .min_inputs = 1,
    .max_inputs = 1,
    .infer = [](const tensor_info* const* in, int, const attrs& at) -> inferred {
      if (in[0]->type != dtype::i32) return mismatch(0, "must be i32, got " + describe(*in[0]));
      for (int k = 0; k < 4; ++k)
        if (at.i[k] != no_value && (at.i[k] < 0 || at.i[k] > INT32_MAX)) return mismatch(-1, "values must be ids in 0 .. 2^31-1");
      return result(dtype::boolean, in[0]->shp);
    },
    .kernel = kernel_named<sequence_detail::not_in_kernel>,
    .attributes = sequence_detail::not_in_attributes};

inline constexpr op_def store_at{
    .name = "store_at",
    .category = "memory",
    .min_inputs = 3,
    .max_inputs = 3,
    .infer = [](const tensor_info* const* in, int, const attrs&) -> inferred {
      if (in[0]->type != dtype::i32 || in[0]->shp.rank != 1 || in[0]->shp[0].symbol != 0)
        return mismatch(0, "must be i32 [N], N a constant, got " + describe(*in[0]));
      if (!is_one_i32(*in[1])) return mismatch(1, "the value must be i32 [1], got " + describe(*in[1]));
      if (!is_one_i32(*in[2])) return mismatch(2, "the index must be i32 [1], got " + describe(*in[2]));
      return result(dtype::i32, in[0]->shp);
    },
    .in_place_input = 0,
    .kernel = kernel_named<sequence_detail::store_at_kernel>};

inline constexpr op_def increment{
    .name = "increment",
    .category = "elementwise",
    .min_inputs = 1,
    .max_inputs = 1,
    .infer = [](const tensor_info* const* in, int, const attrs& at) -> inferred {
      if (in[0]->type != dtype::i32) return mismatch(0, "must be i32, got " + describe(*in[0]));
      if (!sequence_detail::is_i32_value(at.i[0])) return mismatch(-1, "by must be an i32");
      return result(dtype::i32, in[0]->shp);
    },
    .kernel = kernel_named<sequence_detail::increment_kernel>,
    .attributes = sequence_detail::increment_attributes};

inline constexpr op_def next_position{
    .name = "next_position",
    .category = "memory",
    .min_inputs = 1,
    .max_inputs = 1,
    .infer = [](const tensor_info* const* in, int, const attrs&) -> inferred {
      if (in[0]->shp.rank < 1) return mismatch(0, "must have rows (rank 1 or more), got " + describe(*in[0]));
      return result(dtype::i32, shape(1));
    },
    .kernel = kernel_named<sequence_detail::next_position_kernel>};

inline constexpr op_def full_int{
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
    .kernel = kernel_named<sequence_detail::fill_kernel>,
    .attributes = sequence_detail::full_int_attributes};

}  // namespace fused::ops
