// Kernel calls: the last lowering step. A planned program (tensors, steps, buffers, kernel names)
// becomes a flat list of fully resolved kernel calls — which fk_ function, where each operand lives
// (region + constant offset, or a weight slot), every size — computed by one constexpr function.
//
// That list is the single source the executors share: the static model keeps it as `static
// constexpr` data and unrolls it into direct kernel calls with constant offsets; the run-time model
// walks the same list built at run time; the C generator prints it. Only two numbers stay dynamic:
// the tokens in this call (symbol $1 may bind to fewer than the planned maximum) and the position.
#pragma once
#include <array>
#include <cstdint>
#include <string_view>
#include <vector>

#include "../graph/program.hpp"
#include "../plan/memory_plan.hpp"

namespace fused::runtime {

enum class kernel : std::uint8_t {
  embed,
  rmsnorm,
  rmsnorm_heads,
  gemv,  // a linear of one row (decode)
  gemm,
  rope,
  rope_llama3,
  kv_store,  // values (and a cache no attention reads)
  k_store,   // keys
  attention_prefill,
  attention_decode,
  add,
  swiglu,
  copy_last_row,
  argmax_rows,   // a generation loop's ids and positions (ops/sequence_ops.hpp)
  not_in,
  store_at,
  increment,
  next_position,
  fill_i32,
  copy_bytes,    // control flow: a loop carry's first value, a merge
  select_bytes,
  unary_f32,     // graph files' f32 math (ops/graph_ops.hpp): one kernel per arity, the op by code
  binary_f32,
  fill_f32,
  arange_f32,
  // a train step's f32 kernels (kernels/fk_train.h)
  embed_f32,
  rmsnorm_f32,
  linear_f32,
  attention_causal,
  cross_entropy,
  cross_entropy_backward,
  linear_backward_input,
  linear_backward_weight,
  sum_rows,
  rmsnorm_backward_input,
  rmsnorm_backward_weight,
  rope_backward,
  rope_llama3_backward,
  swiglu_backward,
  attention_causal_backward,
  take_columns,
  embed_backward,
  adam_first_moment,
  adam_second_moment,
  adamw_factors,
  adamw_update,
  sgd_momentum,
  sgd_update,
  sgd_momentum_update,
  dropout,
  host,  // the op's host function (op_def::host): run-time executors only (execute.hpp)
  unknown,
};

// One argument of a kernel's C function, in the call's terms. Each names exactly one field of
// `call` (operands, rows, sizes, reals) or the one dynamic value, pos0.
enum class arg : std::uint8_t {
  input0, input1, input2, input3, input4,  // the step's inputs, in its order
  bias,                    // input 2 when the step has three inputs, else NULL
  optional2, optional3, optional4,  // input 2 / 3 / 4 when the step has that many inputs, else NULL
  output,                  // the step's result
  work,                    // the step's workspace, or NULL
  rows,                    // rows of input 0 (this call's tokens, when they follow them)
  elements,                // rows * cols
  pos0,                    // the position of row 0: the call's, or its position input's value
  cols, out_cols, heads, kv_heads, head_dim, capacity, original_max, vocab, period,  // call::sizes
  inner0, extent0, inner1, extent1,                                   // ... an input's broadcast_span
  eps, theta, factor, low_freq_factor, high_freq_factor, value, beta1, beta2, weight_decay, momentum, dampening, dropout,  // call::reals
  int0, int1, int2, int3,  // call::ints
  bytes,                   // rows * sizes.row_bytes
};

// Every kernel's contract, once: its C name and its arguments in the C function's order. The
// run-time invoker (invoke.hpp) calls the function with exactly these, and the C emitter prints
// exactly these; `copy_into_output` names an input an in-place kernel first copies into its
// output when the plan did not give them the same bytes.
struct kernel_spec {
  kernel k = kernel::unknown;
  std::string_view name;
  std::array<arg, 16> args{};
  std::uint8_t arity = 0;
  int copy_into_output = -1;
  // The C function returns nonzero, writing nothing, when an input is out of its range; this says
  // which range, for the executors' errors.
  const char* refuses = nullptr;
};

namespace detail {
template <class... A>
constexpr kernel_spec spec(kernel k, std::string_view name, int copy_into_output, A... a) {
  return {k, name, {a...}, static_cast<std::uint8_t>(sizeof...(A)), copy_into_output};
}
constexpr kernel_spec refusing(kernel_spec s, const char* why) {
  s.refuses = why;
  return s;
}
}  // namespace detail

inline constexpr std::array<kernel_spec, 51> kernel_specs{{
    detail::spec(kernel::embed, "fk_embed", -1, arg::input1, arg::out_cols, arg::input0, arg::rows, arg::output),
    detail::spec(kernel::rmsnorm, "fk_rmsnorm", -1, arg::input0, arg::input1, arg::rows, arg::cols, arg::eps, arg::output),
    detail::spec(kernel::rmsnorm_heads, "fk_rmsnorm_heads", -1, arg::input0, arg::input1, arg::rows, arg::heads, arg::head_dim, arg::eps,
                 arg::output),
    detail::spec(kernel::gemv, "fk_gemv_bf16", -1, arg::input0, arg::cols, arg::input1, arg::out_cols, arg::bias, arg::output),
    detail::spec(kernel::gemm, "fk_gemm_bf16", -1, arg::input0, arg::rows, arg::cols, arg::input1, arg::out_cols, arg::bias, arg::output,
                 arg::work),
    detail::spec(kernel::rope, "fk_rope", 0, arg::output, arg::rows, arg::heads, arg::head_dim, arg::pos0, arg::period, arg::theta),
    detail::spec(kernel::rope_llama3, "fk_rope_llama3", 0, arg::output, arg::rows, arg::heads, arg::head_dim, arg::pos0, arg::period, arg::theta,
                 arg::factor, arg::low_freq_factor, arg::high_freq_factor, arg::original_max),
    detail::spec(kernel::kv_store, "fk_kv_store", 1, arg::input0, arg::rows, arg::kv_heads, arg::head_dim, arg::output, arg::capacity,
                 arg::pos0),
    detail::spec(kernel::k_store, "fk_k_store", 1, arg::input0, arg::rows, arg::kv_heads, arg::head_dim, arg::output, arg::capacity,
                 arg::pos0),
    detail::spec(kernel::attention_prefill, "fk_attention_prefill", -1, arg::input0, arg::rows, arg::heads, arg::input1, arg::input2,
                 arg::kv_heads, arg::head_dim, arg::capacity, arg::pos0, arg::output),
    detail::spec(kernel::attention_decode, "fk_attention_decode", -1, arg::input0, arg::heads, arg::input1, arg::input2, arg::kv_heads,
                 arg::head_dim, arg::capacity, arg::pos0, arg::output),
    detail::spec(kernel::add, "fk_add", -1, arg::input0, arg::input1, arg::elements, arg::output),
    detail::spec(kernel::swiglu, "fk_swiglu", -1, arg::input0, arg::input1, arg::elements, arg::output),
    detail::spec(kernel::copy_last_row, "fk_copy_last_row", -1, arg::input0, arg::rows, arg::cols, arg::output),
    detail::spec(kernel::argmax_rows, "fk_argmax_rows", -1, arg::input0, arg::rows, arg::cols, arg::output),
    detail::spec(kernel::not_in, "fk_not_in", -1, arg::input0, arg::elements, arg::int0, arg::int1, arg::int2, arg::int3, arg::output),
    detail::refusing(detail::spec(kernel::store_at, "fk_store_at", 0, arg::output, arg::cols, arg::input1, arg::input2),
                     "the index is outside the buffer"),
    detail::refusing(detail::spec(kernel::increment, "fk_increment_i32", -1, arg::input0, arg::elements, arg::int0, arg::output),
                     "a sum leaves i32's range"),
    detail::spec(kernel::next_position, "fk_next_position", -1, arg::rows, arg::pos0, arg::output),
    detail::spec(kernel::fill_i32, "fk_fill_i32", -1, arg::elements, arg::int0, arg::output),
    detail::spec(kernel::copy_bytes, "fk_copy_bytes", -1, arg::input0, arg::bytes, arg::output),
    detail::spec(kernel::select_bytes, "fk_select_bytes", -1, arg::input0, arg::input1, arg::input2, arg::bytes, arg::output),
    detail::spec(kernel::unary_f32, "fk_unary_f32", -1, arg::input0, arg::elements, arg::int0, arg::output),
    detail::spec(kernel::binary_f32, "fk_binary_f32", -1, arg::input0, arg::inner0, arg::extent0, arg::input1, arg::inner1, arg::extent1,
                 arg::elements, arg::int0, arg::output),
    detail::spec(kernel::fill_f32, "fk_fill_f32", -1, arg::elements, arg::value, arg::output),
    detail::spec(kernel::arange_f32, "fk_arange_f32", -1, arg::elements, arg::output),
    detail::spec(kernel::embed_f32, "fk_embed_f32", -1, arg::input1, arg::out_cols, arg::input0, arg::rows, arg::output),
    detail::spec(kernel::rmsnorm_f32, "fk_rmsnorm_f32", -1, arg::input0, arg::input1, arg::rows, arg::cols, arg::eps, arg::output),
    detail::spec(kernel::linear_f32, "fk_linear_f32", -1, arg::input0, arg::rows, arg::cols, arg::input1, arg::out_cols, arg::bias, arg::output),
    detail::spec(kernel::attention_causal, "fk_attention_causal_f32", -1, arg::input0, arg::rows, arg::heads, arg::input1, arg::input2,
                 arg::kv_heads, arg::head_dim, arg::period, arg::dropout, arg::int0, arg::optional3, arg::output),
    detail::refusing(detail::spec(kernel::cross_entropy, "fk_cross_entropy", -1, arg::input0, arg::rows, arg::cols, arg::input1, arg::optional2,
                                  arg::output),
                     "a label is outside the vocabulary"),
    detail::refusing(detail::spec(kernel::cross_entropy_backward, "fk_cross_entropy_backward", -1, arg::input0, arg::rows, arg::cols, arg::input1,
                                  arg::input2, arg::optional3, arg::output),
                     "a label is outside the vocabulary"),
    detail::spec(kernel::linear_backward_input, "fk_linear_backward_input", -1, arg::input0, arg::rows, arg::cols, arg::input1, arg::out_cols,
                 arg::output),
    detail::spec(kernel::linear_backward_weight, "fk_linear_backward_weight", -1, arg::input0, arg::rows, arg::cols, arg::input1, arg::out_cols,
                 arg::output),
    detail::spec(kernel::sum_rows, "fk_sum_rows", -1, arg::input0, arg::rows, arg::cols, arg::output),
    detail::spec(kernel::rmsnorm_backward_input, "fk_rmsnorm_backward_input", -1, arg::input0, arg::input1, arg::input2, arg::rows, arg::cols,
                 arg::eps, arg::output),
    detail::spec(kernel::rmsnorm_backward_weight, "fk_rmsnorm_backward_weight", -1, arg::input0, arg::input1, arg::rows, arg::cols, arg::eps,
                 arg::output),
    detail::spec(kernel::rope_backward, "fk_rope_backward", 0, arg::output, arg::rows, arg::heads, arg::head_dim, arg::pos0, arg::period,
                 arg::theta),
    detail::spec(kernel::rope_llama3_backward, "fk_rope_llama3_backward", 0, arg::output, arg::rows, arg::heads, arg::head_dim, arg::pos0,
                 arg::period, arg::theta, arg::factor, arg::low_freq_factor, arg::high_freq_factor, arg::original_max),
    detail::spec(kernel::swiglu_backward, "fk_swiglu_backward", -1, arg::input0, arg::input1, arg::input2, arg::elements, arg::int0, arg::output),
    detail::spec(kernel::attention_causal_backward, "fk_attention_causal_backward", -1, arg::input0, arg::input1, arg::input2, arg::input3,
                 arg::rows, arg::heads, arg::kv_heads, arg::head_dim, arg::period, arg::dropout, arg::int0, arg::optional4, arg::work, arg::output),
    detail::spec(kernel::take_columns, "fk_take_columns", -1, arg::input0, arg::rows, arg::cols, arg::int0, arg::out_cols, arg::output),
    detail::spec(kernel::embed_backward, "fk_embed_backward", -1, arg::input0, arg::rows, arg::input1, arg::out_cols, arg::vocab, arg::output),
    detail::spec(kernel::adam_first_moment, "fk_adam_first_moment", -1, arg::input0, arg::input1, arg::elements, arg::beta1, arg::output),
    detail::spec(kernel::adam_second_moment, "fk_adam_second_moment", -1, arg::input0, arg::input1, arg::elements, arg::beta2, arg::output),
    detail::spec(kernel::adamw_factors, "fk_adamw_factors", -1, arg::input0, arg::input1, arg::beta1, arg::beta2, arg::weight_decay, arg::output),
    detail::spec(kernel::adamw_update, "fk_adamw_update", -1, arg::input0, arg::input1, arg::input2, arg::input3, arg::elements, arg::eps,
                 arg::output),
    detail::spec(kernel::sgd_momentum, "fk_sgd_momentum", -1, arg::input0, arg::input1, arg::input2, arg::input3, arg::elements, arg::momentum,
                 arg::dampening, arg::weight_decay, arg::output),
    detail::spec(kernel::sgd_update, "fk_sgd_update", -1, arg::input0, arg::input1, arg::input2, arg::elements, arg::weight_decay, arg::output),
    detail::spec(kernel::sgd_momentum_update, "fk_sgd_momentum_update", -1, arg::input0, arg::input1, arg::input2, arg::input3, arg::elements,
                 arg::momentum, arg::weight_decay, arg::int0, arg::output),
    detail::spec(kernel::dropout, "fk_dropout_f32", -1, arg::input0, arg::elements, arg::dropout, arg::int0, arg::input1, arg::output),
}};

constexpr const kernel_spec& spec_of(kernel k) {
  for (const auto& s : kernel_specs)
    if (s.k == k) return s;
  return kernel_specs[0];  // not reached for a lowered call (kernel::unknown is never lowered)
}
constexpr kernel kernel_of(std::string_view name) {
  if (name == host_kernel_name) return kernel::host;
  for (const auto& s : kernel_specs)
    if (s.name == name) return s.k;
  return kernel::unknown;
}
constexpr std::string_view name_of(kernel k) {
  return k == kernel::unknown ? "unknown" : k == kernel::host ? host_kernel_name : spec_of(k).name;
}

// Where one operand lives: a weight slot (index into the caller's weight table, in feed order), or
// a constant byte offset in the state region or the activation arena.
struct operand {
  region where = region::activations;
  std::int32_t slot = -1;      // weights: the slot; otherwise -1
  std::int64_t offset = 0;     // state / activations: bytes from the region's base
  std::int32_t tensor = -1;    // for diagnostics

  friend constexpr bool operator==(const operand&, const operand&) = default;
};

// A row count `n * value($symbol)`: the number of rows of the call's first operand, which may
// follow the tokens of this call (prefill of fewer tokens than planned).
struct rows_t {
  std::int64_t n = 1;
  std::uint8_t symbol = 0;
  friend constexpr bool operator==(const rows_t&, const rows_t&) = default;
};

struct call {
  kernel k = kernel::unknown;
  std::int32_t step = -1;                   // step id, for diagnostics and comments
  std::array<operand, max_inputs> in{};     // in[2] of a linear without bias: slot -1
  std::int32_t n_in = 0;
  operand out{};
  operand work{};                           // gemm: the step's workspace (tensor -1: none)
  rows_t rows{};
  // The sizes and reals a kernel's spec names (the others stay 0).
  struct size_fields {
    std::int64_t cols = 0;          // the last dim of input 0 (K of a linear)
    std::int64_t out_cols = 0;      // the last dim of the result (N of a linear, H of embed)
    std::int64_t heads = 0, kv_heads = 0, head_dim = 0;
    std::int64_t capacity = 0;      // KV-cache positions
    std::int64_t original_max = 0;  // rope_llama3: original_max_position_embeddings
    std::int64_t vocab = 0;         // embed: rows of the table (for executors' id checks); embed_backward: of its result
    std::int64_t period = 0;        // rope, causal attention: rows per packed sequence (0: one sequence)
    std::int64_t row_bytes = 0;     // copy_bytes, select_bytes: bytes of a row of the result
    std::int64_t inner0 = 1, extent0 = 1, inner1 = 1, extent1 = 1;  // binary_f32: its inputs' broadcast_span
    friend constexpr bool operator==(const size_fields&, const size_fields&) = default;
  } sizes{};
  struct real_fields {
    float eps = 0, theta = 0, factor = 0, low_freq_factor = 0, high_freq_factor = 0;
    float value = 0;  // fill_f32
    float beta1 = 0, beta2 = 0, weight_decay = 0;  // AdamW (weight_decay: SGD's too)
    float momentum = 0, dampening = 0;             // SGD
    float dropout = 0;  // dropout, causal attention: the probability; 0 unless the program trains
    friend constexpr bool operator==(const real_fields&, const real_fields&) = default;
  } reals{};
  std::array<std::int32_t, 4> ints{};       // int0..int3: not_in's values (-1: none), increment's by, fill_i32's value,
                                            // unary_f32's and binary_f32's op (op_def::variant)
  std::int8_t position = -1;                // the input holding row 0's position (op_def::positional), or -1: the call's
  std::int64_t copy_row_bytes = 0;          // in-place kernels: bytes a row of the copied input holds
  bool copy_follows_rows = false;           // ... times the rows (else the bytes are the whole tensor)

  friend constexpr bool operator==(const call&, const call&) = default;
};

// The value a size or real argument names in a call: the one mapping from `arg` to call's fields,
// read by the invoker (the number) and the C emitter (its text). 0 for an argument that is not one
// (is_size / is_real tell; operands, rows and pos0 each executor has at hand).
constexpr std::int64_t size_value(arg a, const call& c) {
  switch (a) {
    case arg::cols: return c.sizes.cols;
    case arg::out_cols: return c.sizes.out_cols;
    case arg::heads: return c.sizes.heads;
    case arg::kv_heads: return c.sizes.kv_heads;
    case arg::head_dim: return c.sizes.head_dim;
    case arg::capacity: return c.sizes.capacity;
    case arg::original_max: return c.sizes.original_max;
    case arg::vocab: return c.sizes.vocab;
    case arg::period: return c.sizes.period;
    case arg::inner0: return c.sizes.inner0;
    case arg::extent0: return c.sizes.extent0;
    case arg::inner1: return c.sizes.inner1;
    case arg::extent1: return c.sizes.extent1;
    default: return 0;
  }
}
constexpr bool is_size(arg a) { return a >= arg::cols && a <= arg::extent1; }
constexpr bool is_real(arg a) { return a >= arg::eps && a <= arg::dropout; }
constexpr float real_value(arg a, const call& c) {
  switch (a) {
    case arg::eps: return c.reals.eps;
    case arg::theta: return c.reals.theta;
    case arg::factor: return c.reals.factor;
    case arg::low_freq_factor: return c.reals.low_freq_factor;
    case arg::high_freq_factor: return c.reals.high_freq_factor;
    case arg::value: return c.reals.value;
    case arg::beta1: return c.reals.beta1;
    case arg::beta2: return c.reals.beta2;
    case arg::weight_decay: return c.reals.weight_decay;
    case arg::momentum: return c.reals.momentum;
    case arg::dampening: return c.reals.dampening;
    case arg::dropout: return c.reals.dropout;
    default: return 0;
  }
}

// Weight slots: weights numbered in tensor-id order (the planner's weights-region order).
template <class Tensors>
constexpr std::vector<std::int32_t> weight_slots(const Tensors& tensors) {
  std::vector<std::int32_t> slot;
  slot.reserve(tensors.size());
  std::int32_t next = 0;
  for (const auto& t : tensors) slot.push_back(t.kind == role::weight ? next++ : -1);
  return slot;
}

template <class Tensors>
constexpr std::size_t weight_count(const Tensors& tensors) {
  std::size_t n = 0;
  for (const auto& t : tensors) n += t.kind == role::weight ? 1 : 0;
  return n;
}

struct lowering_error {
  int step = -1;
  std::string_view what{};
};

// Lowers every step in schedule order. `Tensors`, `Steps`, `Buffers`, `Kernels` are ranges (a
// program + memory_plan at run time, or a frozen static_plan's arrays); `b` is the mode's binding;
// `training` the program's flag, which mode-sensitive steps honour (dropout only when it is set).
// Every symbol is resolved through `b` except `dynamic` (the tokens of one call), which stays in
// `rows` so that one plan serves any token count up to the planned one. On a step no kernel here
// implements, the result is empty and `err` says which.
template <class Tensors, class Steps, class Buffers, class Kernels>
constexpr std::vector<call> lower_calls(const Tensors& tensors, const Steps& steps, const Buffers& buffers,
                                        const Kernels& kernels, const binding& b, bool training, std::uint8_t dynamic,
                                        lowering_error* err = nullptr) {
  const std::vector<std::int32_t> slot = weight_slots(tensors);
  auto at = [&](tensor_id id) {
    const auto& buf = buffers[static_cast<std::size_t>(id)];
    operand o{};
    o.where = buf.where;
    o.tensor = id;
    if (buf.where == region::weights) o.slot = slot[static_cast<std::size_t>(id)];
    else o.offset = buf.offset;
    return o;
  };
  auto shp = [&](tensor_id id) -> const shape& { return tensors[static_cast<std::size_t>(id)].shp; };
  std::vector<call> out;
  out.reserve(steps.size());
  std::size_t pos = 0;
  for (const auto& s : steps) {
    call c{};
    c.k = kernel_of(kernels[pos++]);
    c.step = s.id;
    c.n_in = s.n_inputs;
    for (int i = 0; i < s.n_inputs; ++i) c.in[static_cast<std::size_t>(i)] = at(s.inputs[static_cast<std::size_t>(i)]);
    c.out = at(s.result);
    if (s.op->positional && s.n_inputs == s.op->max_inputs) c.position = static_cast<std::int8_t>(s.n_inputs - 1);
    const shape& x = s.n_inputs ? shp(s.inputs[0]) : shp(s.result);  // a creation step has no input
    // Rows of the first input: all dims but the last (symbols kept symbolic).
    auto rows_of = [&](const dim& d) -> rows_t { return d.symbol == dynamic && d.symbol ? rows_t{d.n, d.symbol} : rows_t{b(d), 0}; };
    c.rows = {1, 0};
    for (int i = 0; i + 1 < x.rank; ++i) {
      const rows_t r = rows_of(x[i]);
      c.rows.n *= r.n;
      if (r.symbol) c.rows.symbol = r.symbol;
    }
    const shape& result = shp(s.result);
    // A dim's size: a symbol's bound value (a graph file's ["b"] or ["2*b"]), except the per-call token
    // count, which stays its coefficient (a kernel reading a [T] operand takes T from its rows).
    auto size_of_dim = [&](const dim& d) { return d.symbol != 0 && d.symbol == dynamic ? d.n : b(d); };
    const std::int64_t cols = x.rank ? size_of_dim(x.back()) : 1;
    auto rows_of_result = [&] {  // all dims of the result but the last
      rows_t r{1, 0};
      for (int i = 0; i + 1 < result.rank; ++i) {
        const rows_t d = rows_of(result[i]);
        r.n *= d.n;
        if (d.symbol) r.symbol = d.symbol;
      }
      return r;
    };
    c.sizes.cols = cols;
    c.sizes.out_cols = result.rank ? size_of_dim(result.back()) : 1;
    // A mode-sensitive step runs its training behaviour (dropout's probability) only when training.
    const float dropout = training && s.mode_sensitive ? static_cast<float>(s.at.f) : 0.0f;
    switch (c.k) {
      case kernel::embed:
        c.rows = rows_of(x[0]);
        c.sizes.vocab = size_of_dim(shp(s.inputs[1])[0]);
        break;
      case kernel::rmsnorm: c.reals.eps = static_cast<float>(s.at.f); break;
      case kernel::rmsnorm_f32:  // also head_rms_norm's (attrs.i[0] heads): each head a row of its own
      case kernel::rmsnorm_backward_input:
      case kernel::rmsnorm_backward_weight:
        if (s.at.i[0] > 0) {
          c.rows.n *= s.at.i[0];
          c.sizes.cols = cols / s.at.i[0];
        }
        c.reals.eps = static_cast<float>(s.at.f);
        break;
      case kernel::embed_f32:
        c.rows = rows_of(x[0]);
        c.sizes.vocab = size_of_dim(shp(s.inputs[1])[0]);
        break;
      case kernel::embed_backward:
        c.rows = rows_of(x[0]);
        c.sizes.vocab = size_of_dim(result[0]);
        break;
      case kernel::attention_causal:
      case kernel::attention_causal_backward:
        c.sizes.heads = s.at.i[0];
        c.sizes.kv_heads = s.at.i[1];
        c.sizes.head_dim = cols / s.at.i[0];
        c.sizes.period = s.at.i[2];
        c.reals.dropout = dropout;
        c.ints[0] = static_cast<std::int32_t>(s.at.i[3]);
        if (s.work >= 0) c.work = at(s.work);
        break;
      case kernel::dropout:
        c.reals.dropout = dropout;
        c.ints[0] = static_cast<std::int32_t>(s.at.i[0]);
        break;
      case kernel::swiglu_backward:
      case kernel::take_columns: c.ints[0] = static_cast<std::int32_t>(s.at.i[0]); break;
      case kernel::adam_first_moment: c.reals.beta1 = static_cast<float>(s.at.f); break;
      case kernel::adam_second_moment: c.reals.beta2 = static_cast<float>(s.at.f); break;
      case kernel::adamw_factors:
        c.reals.beta1 = static_cast<float>(s.at.f);
        c.reals.beta2 = static_cast<float>(s.at.extra[0]);
        c.reals.weight_decay = static_cast<float>(s.at.extra[1]);
        break;
      case kernel::adamw_update: c.reals.eps = static_cast<float>(s.at.f); break;
      case kernel::sgd_momentum:
        c.reals.momentum = static_cast<float>(s.at.f);
        c.reals.dampening = static_cast<float>(s.at.extra[0]);
        c.reals.weight_decay = static_cast<float>(s.at.extra[1]);
        break;
      case kernel::sgd_update: c.reals.weight_decay = static_cast<float>(s.at.f); break;
      case kernel::sgd_momentum_update:
        c.reals.momentum = static_cast<float>(s.at.f);
        c.reals.weight_decay = static_cast<float>(s.at.extra[0]);
        c.ints[0] = static_cast<std::int32_t>(s.at.i[0]);
        break;
      case kernel::linear_f32:
      case kernel::cross_entropy:
      case kernel::cross_entropy_backward:
      case kernel::linear_backward_input:
      case kernel::linear_backward_weight:
      case kernel::sum_rows: break;
      case kernel::rmsnorm_heads:
        c.sizes.heads = s.at.i[0];
        c.sizes.head_dim = cols / s.at.i[0];
        c.reals.eps = static_cast<float>(s.at.f);
        break;
      case kernel::gemv: break;
      case kernel::gemm:
        if (s.work >= 0) c.work = at(s.work);
        break;
      case kernel::rope:
      case kernel::rope_llama3:
      case kernel::rope_backward:
      case kernel::rope_llama3_backward:
        c.sizes.heads = s.at.i[0];
        c.sizes.head_dim = s.at.i[1];
        c.sizes.period = s.at.i[3];
        c.reals.theta = static_cast<float>(s.at.f);
        if (c.k == kernel::rope_llama3 || c.k == kernel::rope_llama3_backward) {
          c.sizes.original_max = s.at.i[2];
          c.reals.factor = static_cast<float>(s.at.extra[0]);
          c.reals.low_freq_factor = static_cast<float>(s.at.extra[1]);
          c.reals.high_freq_factor = static_cast<float>(s.at.extra[2]);
        }
        c.copy_row_bytes = cols * 4;
        c.copy_follows_rows = true;
        break;
      case kernel::kv_store:
      case kernel::k_store:
      case kernel::attention_prefill:
      case kernel::attention_decode: {
        const shape& cache = shp(s.inputs[1]);
        c.sizes.kv_heads = size_of_dim(cache[0]);
        c.sizes.head_dim = size_of_dim(cache[2]);
        c.sizes.capacity = b(cache[1]);
        if (c.k == kernel::kv_store || c.k == kernel::k_store) c.copy_row_bytes = c.sizes.kv_heads * c.sizes.capacity * c.sizes.head_dim * 2;
        else c.sizes.heads = s.at.i[0];
        break;
      }
      case kernel::not_in:
        for (std::size_t k = 0; k < 4; ++k) c.ints[k] = s.at.i[k] == no_value ? -1 : static_cast<std::int32_t>(s.at.i[k]);
        break;
      case kernel::store_at: c.copy_row_bytes = cols * 4; break;
      case kernel::increment: c.ints[0] = static_cast<std::int32_t>(s.at.i[0]); break;
      case kernel::fill_i32: c.ints[0] = static_cast<std::int32_t>(s.at.f); break;
      case kernel::next_position: c.rows = rows_of(x[0]); break;  // the rows of a [T, ...] input: T
      case kernel::copy_bytes:
      case kernel::select_bytes:  // the result's rows, of one row's bytes (a merge's input 0 is its condition)
        c.rows = rows_of_result();
        c.sizes.row_bytes = (result.rank ? size_of_dim(result.back()) : 1) * size_of(tensors[static_cast<std::size_t>(s.result)].type);
        break;
      case kernel::unary_f32: c.ints[0] = s.op->variant; break;
      case kernel::binary_f32: {  // the result's elements; each input read through its span
        c.rows = rows_of_result();
        c.sizes.cols = c.sizes.out_cols;
        c.ints[0] = s.op->variant;
        const broadcast_span x_span = span_of(shp(s.inputs[0]), result, b), y_span = span_of(shp(s.inputs[1]), result, b);
        if (!x_span.ok || !y_span.ok || c.rows.symbol) {
          if (err) *err = {s.id, "a broadcast fk_binary_f32 cannot read as a span"};
          return {};
        }
        c.sizes.inner0 = x_span.inner, c.sizes.extent0 = x_span.extent, c.sizes.inner1 = y_span.inner, c.sizes.extent1 = y_span.extent;
        break;
      }
      case kernel::fill_f32: c.reals.value = static_cast<float>(s.at.f); break;
      case kernel::arange_f32: break;
      case kernel::add:
      case kernel::swiglu:
      case kernel::copy_last_row:
      case kernel::argmax_rows:
      case kernel::host: break;
      case kernel::unknown:
        if (err) *err = {s.id, "a step whose kernel no executor implements"};
        return {};
    }
    out.push_back(c);
  }
  return out;
}

// A frozen (static) plan's calls as an array, for `static constexpr` data. A step lower_calls cannot
// lower leaves the whole list empty, so the array then holds calls of kernel::unknown: checked on
// the array (lowered / lowers_to_kernels), with no second lowering.
template <std::size_t N, class Plan>
constexpr std::array<call, N> freeze_calls(const Plan& p, std::uint8_t dynamic) {
  std::array<call, N> out{};
  const std::vector<call> calls = lower_calls(p.tensors, p.steps, p.buffers, p.kernels, p.bind, p.training, dynamic);
  for (std::size_t i = 0; i < N && i < calls.size(); ++i) out[i] = calls[i];
  return out;
}
// Every call has a kernel (host functions included).
template <std::size_t N>
constexpr bool lowered(const std::array<call, N>& calls) {
  for (const auto& c : calls)
    if (c.k == kernel::unknown) return false;
  return true;
}
// Every call has a C kernel (no host function): what the static decoder models and the C require.
template <std::size_t N>
constexpr bool lowers_to_kernels(const std::array<call, N>& calls) {
  for (const auto& c : calls)
    if (c.k == kernel::unknown || c.k == kernel::host) return false;
  return true;
}

}  // namespace fused::runtime
