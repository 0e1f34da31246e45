// rope: rotary position embedding in the rotate-half convention (Qwen2, Llama, Mistral), in place.
// x f32 [T, heads*head_dim]; attrs.i = {heads, head_dim}, attrs.f = theta. Row t is at position pos0+t,
// pos0 the call's or, given, the value of an i32 [1] second input (op_def::positional); with
// attrs.i[3] = P > 0 (a training batch: sequences of P rows packed), at pos0 + t % P.
// rope_llama3: the same with Llama 3.1's frequencies (transformers' rope_type "llama3"):
// attrs.i[2] = original_max_position_embeddings, attrs.extra = {factor, low_freq_factor, high_freq_factor}.
// rope_grad, rope_llama3_grad: their backward, the gradient rotated back by the same angles, in place
// (the forward's attributes and position input).
#pragma once
#include "common.hpp"

namespace fused::ops {

namespace detail {
constexpr inferred rope_shape(const tensor_info* const* in, int n, const attrs& a) {
  const auto& x = *in[0];
  if (inferred p = position_input(in, n, 1); !p.error.empty()) return p;
  const auto heads = a.i[0], hd = a.i[1];
  if (x.type != dtype::f32 || x.shp.rank != 2) return mismatch(0, "input must be f32 [T, heads*head_dim], got " + describe(x));
  if (heads <= 0 || hd <= 0 || hd % 2) return mismatch(-1, "heads and an even head_dim are required");
  if (hd > max_head_dim) return mismatch(-1, "head_dim " + to_text(hd) + " is more than the kernels take (" + to_text(max_head_dim) + ")");
  if (!(x.shp[1] == dim{heads * hd, 0}))
    return mismatch(0, "input " + describe(x) + " does not hold " + to_text(heads) + " heads of " + to_text(hd));
  if (!(a.f > 0)) return mismatch(-1, "theta must be positive");
  if (a.i[3] < 0) return mismatch(-1, "the period (rows per packed sequence) must not be negative");
  return result(dtype::f32, x.shp);
}
}  // namespace detail

namespace detail {
inline constexpr char rope_grad_name[] = "rope_grad", rope_backward_kernel[] = "fk_rope_backward", rope_llama3_grad_name[] = "rope_llama3_grad",
                      rope_llama3_backward_kernel[] = "fk_rope_llama3_backward";
// The backward op of a rope variant: its shape rule and position input, its own kernel.
template <const char* Name, const char* Kernel>
inline constexpr op_def rope_grad_op{.name = Name,
                                     .category = "elementwise",
                                     .min_inputs = 1,
                                     .max_inputs = 2,
                                     .infer = rope_shape,
                                     .in_place_input = 0,
                                     .mode_sensitive = false,
                                     .kernel = kernel_named<Kernel>,
                                     .positional = true};
}  // namespace detail

inline constexpr const op_def& rope_grad = detail::rope_grad_op<detail::rope_grad_name, detail::rope_backward_kernel>;
inline constexpr const op_def& rope_llama3_grad = detail::rope_grad_op<detail::rope_llama3_grad_name, detail::rope_llama3_backward_kernel>;

namespace detail {
template <const op_def& Grad>
constexpr void rope_backward(graph_builder& g, backward_args& a) {
  if (!a.wants[0]) return;
  const tensor_id x = input_of(a, 0);
  a.out[0] = a.forward->n_inputs == 2 ? g.apply(Grad, {a.grad, input_of(a, 1)}, a.forward->at, grad_name(g, x))
                                      : g.apply(Grad, {a.grad}, a.forward->at, grad_name(g, x));
}
}  // namespace detail

inline constexpr attr_field rope_attributes[] = {{"heads", attr_slot::i0}, {"head_dim", attr_slot::i1}, {"theta", attr_slot::f}};

inline constexpr op_def rope{.name = "rope",
                             .category = "elementwise",
                             .min_inputs = 1,
                             .max_inputs = 2,
                             .infer = detail::rope_shape,
                             .in_place_input = 0,
                             .mode_sensitive = false,
                             .kernel = [](const binding&, const tensor_info* const*, int, const tensor_info&) { return "fk_rope"; },
    .attributes = rope_attributes,
    .positional = true,
    .backward = detail::rope_backward<rope_grad>,
    .has_backward = true};

inline constexpr attr_field rope_llama3_attributes[] = {
    {"heads", attr_slot::i0},         {"head_dim", attr_slot::i1},         {"theta", attr_slot::f},
    {"original_max_position_embeddings", attr_slot::i2},                    {"factor", attr_slot::extra0},
    {"low_freq_factor", attr_slot::extra1}, {"high_freq_factor", attr_slot::extra2}};

inline constexpr op_def rope_llama3{
    .name = "rope_llama3",
    .category = "elementwise",
    .min_inputs = 1,
    .max_inputs = 2,
    .infer = [](const tensor_info* const* in, int n, const attrs& a) -> inferred {
      if (!(a.extra[0] >= 1)) return mismatch(-1, "the llama3 factor must be at least 1");
      if (!(a.extra[1] > 0) || !(a.extra[2] > a.extra[1])) return mismatch(-1, "the llama3 frequency factors must satisfy 0 < low < high");
      if (a.i[2] <= 0) return mismatch(-1, "the llama3 original_max_position_embeddings must be positive");
      return detail::rope_shape(in, n, a);
    },
    .in_place_input = 0,
    .mode_sensitive = false,
    .kernel = [](const binding&, const tensor_info* const*, int, const tensor_info&) { return "fk_rope_llama3"; },
    .attributes = rope_llama3_attributes,
    .positional = true,
    .backward = detail::rope_backward<rope_llama3_grad>,
    .has_backward = true};

}  // namespace fused::ops
