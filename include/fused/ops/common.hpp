// Helpers shared by the op headers: shape-rule sentences (shapes as text: core/shape_text.hpp) and the rows of a [rows, cols] tensor.
#pragma once

#include "../core/shape_text.hpp"
#include "../graph/builder.hpp"
#include "../graph/program.hpp"

namespace fused::ops {

constexpr inferred mismatch(int culprit, text what) {
  inferred r{};
  r.error = std::move(what);
  r.culprit = culprit;
  return r;
}

constexpr inferred result(dtype t, shape s) {
  inferred r{};
  r.type = t;
  r.shp = s;
  return r;
}

// The largest head_dim the RoPE and attention kernels take (they keep a head's row on the stack):
// kernels/fk_common.h's FK_MAX_HEAD_DIM, which models/decoder_model.hpp checks this against.
inline constexpr std::int64_t max_head_dim = 128;

constexpr text describe(const tensor_info& t) { return text(name_of(t.type)) + " " + shape_text(t.shp); }

// Rows of an activation laid out as [rows..., cols] once the mode binds its symbols.
constexpr std::int64_t rows_of(const shape& s, const binding& b) {
  std::int64_t r = 1;
  for (int i = 0; i + 1 < s.rank; ++i) r *= b(s[i]);
  return r;
}

// An op's kernel when one C function serves it in every mode: `Name`.
template <const char* Name>
constexpr const char* kernel_named(const binding&, const tensor_info* const*, int, const tensor_info&) { return Name; }

// One i32 value, shape [1]: a position, a token id, an index.
constexpr bool is_one_i32(const tensor_info& t) { return t.type == dtype::i32 && t.shp.rank == 1 && t.shp[0] == dim{1, 0}; }

// A positional op's optional last input (op_def::positional): one i32 position. Returns the error
// sentence, empty when there is no such input or it is right.
constexpr inferred position_input(const tensor_info* const* in, int n, int others) {
  if (n <= others) return {};
  const tensor_info& p = *in[others];
  if (!is_one_i32(p))
    return mismatch(others, "the position must be i32 [1], got " + describe(p));
  return {};
}

// C kernel names that several ops or ops without a choosing rule name (kernel_named<...>).
namespace kernel_names {
inline constexpr char rmsnorm_f32[] = "fk_rmsnorm_f32", rmsnorm_backward_input[] = "fk_rmsnorm_backward_input",
                      rmsnorm_backward_weight[] = "fk_rmsnorm_backward_weight", linear_f32[] = "fk_linear_f32",
                      linear_backward_input[] = "fk_linear_backward_input", linear_backward_weight[] = "fk_linear_backward_weight",
                      sum_rows[] = "fk_sum_rows", swiglu_backward[] = "fk_swiglu_backward", take_columns[] = "fk_take_columns",
                      attention_causal[] = "fk_attention_causal_f32", attention_causal_backward[] = "fk_attention_causal_backward",
                      cross_entropy[] = "fk_cross_entropy", cross_entropy_backward[] = "fk_cross_entropy_backward",
                      adam_first_moment[] = "fk_adam_first_moment", adam_second_moment[] = "fk_adam_second_moment",
                      adamw_factors[] = "fk_adamw_factors", adamw_update[] = "fk_adamw_update", increment[] = "fk_increment_i32",
                      sgd_momentum[] = "fk_sgd_momentum", sgd_update[] = "fk_sgd_update", sgd_momentum_update[] = "fk_sgd_momentum_update";
}  // namespace kernel_names

// Backward rules (op_def::backward): the name of the gradient of tensor t ("layers.0.q" -> "layers.0.q.grad").
constexpr name_ref grad_name(const graph_builder& g, tensor_id t) {
  const name_ref& n = g.peek().tensor(t).name;
  return {n.pattern, n.index, ".grad"};
}
// The forward step's input k, attributes and result.
constexpr tensor_id input_of(const backward_args& a, int k) { return a.forward->inputs[k]; }

// A weight of an op that trains reads f32 master weights; inference reads bf16 (both: `either`).
constexpr bool is_weight_type(dtype t) { return t == dtype::bf16 || t == dtype::f32; }

}  // namespace fused::ops
