// The ops control flow adds to a program (program.hpp, "Structured control flow"), used by
// graph_builder's conditional / loop calls (graph files reach them through Merge and Loop nodes):
//   copy(x)               x's bytes in a new tensor: a loop carry's first value (graph_builder::carry);
//                         in place over x when x dies there, so usually no byte moves;
//   copy_apart(x)         the same into bytes of its own, never in place (an Output of a graph
//                         file's feed: ir/lower.hpp);
//   merge(c, a, b)        a Conditional's result: a when its condition c held, else b. The planner
//                         puts a and b (each written in its own branch, at most one ever) and the
//                         result on the same bytes wherever it can, and then nothing moves.
// Their kernels (fk_copy_bytes, fk_select_bytes: kernels/fk_sequence.h) move bytes unless the source
// already sits where the result goes.
#pragma once

#include "../core/shape_text.hpp"
#include "program.hpp"

namespace fused::control {

namespace detail {

constexpr inferred refuse(int culprit, text what) {
  inferred r{};
  r.error = std::move(what);
  r.culprit = culprit;
  return r;
}
constexpr inferred same_as(const tensor_info& t) {
  inferred r{};
  r.type = t.type;
  r.shp = t.shp;
  return r;
}
constexpr text describe(const tensor_info& t) { return text(name_of(t.type)) + " " + shape_text(t.shp); }

constexpr const char* copy_kernel(const binding&, const tensor_info* const*, int, const tensor_info&) { return "fk_copy_bytes"; }
constexpr const char* select_kernel(const binding&, const tensor_info* const*, int, const tensor_info&) { return "fk_select_bytes"; }

}  // namespace detail

// A condition: bool, one element (shape [] or [1]).
constexpr bool is_condition(const tensor_info& t) {
  if (t.type != dtype::boolean || t.shp.rank > 1) return false;
  return t.shp.rank == 0 || (t.shp.d[0].symbol == 0 && t.shp.d[0].n == 1);
}

inline constexpr op_def copy{.name = "copy",
                             .category = "memory",
                             .min_inputs = 1,
                             .max_inputs = 1,
                             .infer = [](const tensor_info* const* in, int, const attrs&) { return detail::same_as(*in[0]); },
                             .in_place_input = 0,
                             .mode_sensitive = false,
                             .kernel = detail::copy_kernel};

// A copy that never shares its input's bytes: an Output of a graph file's feed (an Input, a
// parameter, a state whose next value is computed in place) gets bytes of its own.
inline constexpr op_def copy_apart = [] {
  op_def apart = copy;
  apart.in_place_input = -1;
  return apart;
}();

inline constexpr op_def merge{
    .name = "merge",
    .category = "memory",
    .min_inputs = 3,
    .max_inputs = 3,
    .infer = [](const tensor_info* const* in, int, const attrs&) -> inferred {
      if (!is_condition(*in[0])) return detail::refuse(0, "the condition must be one bool ([] or [1]), got " + detail::describe(*in[0]));
      if (in[1]->type != in[2]->type || !(in[1]->shp == in[2]->shp))
        return detail::refuse(2, "the branches yield " + detail::describe(*in[1]) + " and " + detail::describe(*in[2]) + "; a merge needs one type");
      return detail::same_as(*in[1]);
    },
    .mode_sensitive = false,
    .kernel = detail::select_kernel,
    .selects = true};

}  // namespace fused::control
