// Executes one kernel call (runtime/calls.hpp) on caller-owned regions. This is the only place that
// turns a call into an fk_ kernel invocation, so the static and the run-time model cannot differ:
// the static model passes each call as a `static constexpr` object and, the function being always
// inlined, the compiler folds the switch and the offsets into one direct kernel call.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <type_traits>
#include <utility>

#include <fk_kernels.h>

#include "calls.hpp"

#if defined(__GNUC__) || defined(__clang__)
#define FUSED_ALWAYS_INLINE inline __attribute__((always_inline))
#else
#define FUSED_ALWAYS_INLINE inline
#endif

namespace fused::runtime {

// The three regions of a plan: weights are reached through a table of pointers (one per weight
// slot: into a memory-mapped checkpoint, or into one caller blob at the planned offsets), state
// and activations through their bases. Bases must be 64-byte aligned.
struct regions {
  const std::uint16_t* const* weights = nullptr;
  std::byte* state = nullptr;
  std::byte* arena = nullptr;
};

// What stays dynamic in a call: the value of each symbol (the tokens of this call) and the
// position of the first token (unless the call reads it from a tensor: call::position).
struct call_dims {
  binding b{};
  std::int64_t pos0 = 0;
};

namespace detail {
template <class T>
FUSED_ALWAYS_INLINE T* data_ptr(const operand& o, const regions& r) {
  std::byte* base = o.where == region::state ? r.state : r.arena;
  return reinterpret_cast<T*>(base + o.offset);
}

// The operand an argument names, or nullptr (no bias, no optional input, no workspace).
FUSED_ALWAYS_INLINE const operand* operand_of(arg a, const call& c) {
  switch (a) {
    case arg::input0: return &c.in[0];
    case arg::input1: return &c.in[1];
    case arg::input2: return &c.in[2];
    case arg::input3: return &c.in[3];
    case arg::input4: return &c.in[4];
    case arg::bias: return c.n_in == 3 ? &c.in[2] : nullptr;
    case arg::optional2: return c.n_in > 2 ? &c.in[2] : nullptr;
    case arg::optional3: return c.n_in > 3 ? &c.in[3] : nullptr;
    case arg::optional4: return c.n_in > 4 ? &c.in[4] : nullptr;
    case arg::output: return &c.out;
    case arg::work: return c.work.tensor >= 0 ? &c.work : nullptr;
    default: return nullptr;
  }
}

// Where row 0 of the call sits.
FUSED_ALWAYS_INLINE std::int64_t position_of(const call& c, const regions& r, const call_dims& d) {
  return c.position >= 0 ? *data_ptr<const std::int32_t>(c.in[static_cast<std::size_t>(c.position)], r) : d.pos0;
}

// Argument A of call c as the C function's parameter type P: a pointer into a region (weights
// through their table), a size, or a real.
template <class P, arg A>
FUSED_ALWAYS_INLINE P argument(const call& c, const regions& r, const call_dims& d, std::size_t rows) {
  if constexpr (std::is_pointer_v<P>) {
    using element = std::remove_pointer_t<P>;
    const operand* o = operand_of(A, c);
    if (o == nullptr) return nullptr;
    // Only a read-only parameter can take a weight: a bf16 one (the shape rules see to it), or the
    // bytes fk_copy_bytes copies (a graph file's Output of a parameter).
    if constexpr (std::is_same_v<element, const std::uint16_t> || std::is_same_v<element, const void>)
      if (o->where == region::weights) return r.weights[static_cast<std::size_t>(o->slot)];
    return data_ptr<element>(*o, r);
  } else if constexpr (std::is_floating_point_v<P>) {
    static_assert(is_real(A), "fused: a real parameter takes a real argument");
    return real_value(A, c);
  } else {
    if constexpr (A == arg::rows) return rows;
    else if constexpr (A == arg::elements) return rows * static_cast<std::size_t>(c.sizes.cols);
    else if constexpr (A == arg::bytes) return rows * static_cast<std::size_t>(c.sizes.row_bytes);
    else if constexpr (A >= arg::int0 && A <= arg::int3) return static_cast<P>(c.ints[static_cast<std::size_t>(A) - static_cast<std::size_t>(arg::int0)]);
    else if constexpr (A == arg::pos0) return static_cast<std::size_t>(position_of(c, r, d));
    else {
      static_assert(is_size(A), "fused: a size parameter takes a size argument");
      return static_cast<std::size_t>(size_value(A, c));
    }
  }
}

// 0, or the kernel's nonzero status when it refused an input (kernel_spec::refuses).
template <kernel K, class R, class... P, std::size_t... I>
FUSED_ALWAYS_INLINE int call_kernel(R (*fn)(P...), const call& c, const regions& r, const call_dims& d, std::index_sequence<I...>) {
  constexpr const kernel_spec& s = spec_of(K);
  static_assert(s.arity == sizeof...(P), "fused: a kernel_spec lists as many arguments as its C function has parameters");
  const auto rows = static_cast<std::size_t>(c.rows.n * d.b.value[c.rows.symbol]);
  if constexpr (s.copy_into_output >= 0) {
    const std::byte* from = data_ptr<const std::byte>(c.in[s.copy_into_output], r);
    std::byte* to = data_ptr<std::byte>(c.out, r);
    if (from != to) std::memcpy(to, from, static_cast<std::size_t>(c.copy_row_bytes) * (c.copy_follows_rows ? rows : 1));
  }
  if constexpr (std::is_void_v<R>) {
    fn(argument<P, s.args[I]>(c, r, d, rows)...);
    return 0;
  } else {
    static_assert(s.refuses != nullptr, "fused: a kernel that returns a status says what it refuses (kernel_spec::refuses)");
    return fn(argument<P, s.args[I]>(c, r, d, rows)...);
  }
}

template <kernel K, class R, class... P>
FUSED_ALWAYS_INLINE int call_kernel(R (*fn)(P...), const call& c, const regions& r, const call_dims& d) {
  return call_kernel<K>(fn, c, r, d, std::index_sequence_for<P...>{});
}
}  // namespace detail

// The C function of each kernel; its arguments come from kernel_specs (calls.hpp). Returns 0, or
// nonzero when the kernel refused an input, writing nothing (spec_of(c.k).refuses says why).
FUSED_ALWAYS_INLINE int invoke(const call& c, const regions& r, const call_dims& d) {
  using detail::call_kernel;
  switch (c.k) {
    case kernel::embed: return call_kernel<kernel::embed>(&fk_embed, c, r, d);
    case kernel::rmsnorm: return call_kernel<kernel::rmsnorm>(&fk_rmsnorm, c, r, d);
    case kernel::rmsnorm_heads: return call_kernel<kernel::rmsnorm_heads>(&fk_rmsnorm_heads, c, r, d);
    case kernel::gemv: return call_kernel<kernel::gemv>(&fk_gemv_bf16, c, r, d);
    case kernel::gemm: return call_kernel<kernel::gemm>(&fk_gemm_bf16, c, r, d);
    case kernel::rope: return call_kernel<kernel::rope>(&fk_rope, c, r, d);
    case kernel::rope_llama3: return call_kernel<kernel::rope_llama3>(&fk_rope_llama3, c, r, d);
    case kernel::kv_store: return call_kernel<kernel::kv_store>(&fk_kv_store, c, r, d);
    case kernel::k_store: return call_kernel<kernel::k_store>(&fk_k_store, c, r, d);
    case kernel::attention_prefill: return call_kernel<kernel::attention_prefill>(&fk_attention_prefill, c, r, d);
    case kernel::attention_decode: return call_kernel<kernel::attention_decode>(&fk_attention_decode, c, r, d);
    case kernel::add: return call_kernel<kernel::add>(&fk_add, c, r, d);
    case kernel::swiglu: return call_kernel<kernel::swiglu>(&fk_swiglu, c, r, d);
    case kernel::copy_last_row: return call_kernel<kernel::copy_last_row>(&fk_copy_last_row, c, r, d);
    case kernel::argmax_rows: return call_kernel<kernel::argmax_rows>(&fk_argmax_rows, c, r, d);
    case kernel::not_in: return call_kernel<kernel::not_in>(&fk_not_in, c, r, d);
    case kernel::store_at: return call_kernel<kernel::store_at>(&fk_store_at, c, r, d);
    case kernel::increment: return call_kernel<kernel::increment>(&fk_increment_i32, c, r, d);
    case kernel::next_position: return call_kernel<kernel::next_position>(&fk_next_position, c, r, d);
    case kernel::fill_i32: return call_kernel<kernel::fill_i32>(&fk_fill_i32, c, r, d);
    case kernel::copy_bytes: return call_kernel<kernel::copy_bytes>(&fk_copy_bytes, c, r, d);
    case kernel::select_bytes: return call_kernel<kernel::select_bytes>(&fk_select_bytes, c, r, d);
    case kernel::unary_f32: return call_kernel<kernel::unary_f32>(&fk_unary_f32, c, r, d);
    case kernel::binary_f32: return call_kernel<kernel::binary_f32>(&fk_binary_f32, c, r, d);
    case kernel::fill_f32: return call_kernel<kernel::fill_f32>(&fk_fill_f32, c, r, d);
    case kernel::arange_f32: return call_kernel<kernel::arange_f32>(&fk_arange_f32, c, r, d);
    case kernel::embed_f32: return call_kernel<kernel::embed_f32>(&fk_embed_f32, c, r, d);
    case kernel::rmsnorm_f32: return call_kernel<kernel::rmsnorm_f32>(&fk_rmsnorm_f32, c, r, d);
    case kernel::linear_f32: return call_kernel<kernel::linear_f32>(&fk_linear_f32, c, r, d);
    case kernel::attention_causal: return call_kernel<kernel::attention_causal>(&fk_attention_causal_f32, c, r, d);
    case kernel::cross_entropy: return call_kernel<kernel::cross_entropy>(&fk_cross_entropy, c, r, d);
    case kernel::cross_entropy_backward: return call_kernel<kernel::cross_entropy_backward>(&fk_cross_entropy_backward, c, r, d);
    case kernel::linear_backward_input: return call_kernel<kernel::linear_backward_input>(&fk_linear_backward_input, c, r, d);
    case kernel::linear_backward_weight: return call_kernel<kernel::linear_backward_weight>(&fk_linear_backward_weight, c, r, d);
    case kernel::sum_rows: return call_kernel<kernel::sum_rows>(&fk_sum_rows, c, r, d);
    case kernel::rmsnorm_backward_input: return call_kernel<kernel::rmsnorm_backward_input>(&fk_rmsnorm_backward_input, c, r, d);
    case kernel::rmsnorm_backward_weight: return call_kernel<kernel::rmsnorm_backward_weight>(&fk_rmsnorm_backward_weight, c, r, d);
    case kernel::rope_backward: return call_kernel<kernel::rope_backward>(&fk_rope_backward, c, r, d);
    case kernel::rope_llama3_backward: return call_kernel<kernel::rope_llama3_backward>(&fk_rope_llama3_backward, c, r, d);
    case kernel::swiglu_backward: return call_kernel<kernel::swiglu_backward>(&fk_swiglu_backward, c, r, d);
    case kernel::attention_causal_backward: return call_kernel<kernel::attention_causal_backward>(&fk_attention_causal_backward, c, r, d);
    case kernel::take_columns: return call_kernel<kernel::take_columns>(&fk_take_columns, c, r, d);
    case kernel::embed_backward: return call_kernel<kernel::embed_backward>(&fk_embed_backward, c, r, d);
    case kernel::adam_first_moment: return call_kernel<kernel::adam_first_moment>(&fk_adam_first_moment, c, r, d);
    case kernel::adam_second_moment: return call_kernel<kernel::adam_second_moment>(&fk_adam_second_moment, c, r, d);
    case kernel::adamw_factors: return call_kernel<kernel::adamw_factors>(&fk_adamw_factors, c, r, d);
    case kernel::adamw_update: return call_kernel<kernel::adamw_update>(&fk_adamw_update, c, r, d);
    case kernel::sgd_momentum: return call_kernel<kernel::sgd_momentum>(&fk_sgd_momentum, c, r, d);
    case kernel::sgd_update: return call_kernel<kernel::sgd_update>(&fk_sgd_update, c, r, d);
    case kernel::sgd_momentum_update: return call_kernel<kernel::sgd_momentum_update>(&fk_sgd_momentum_update, c, r, d);
    case kernel::dropout: return call_kernel<kernel::dropout>(&fk_dropout_f32, c, r, d);
    case kernel::host:     // execute.hpp calls the op's host function; static models have none
    case kernel::unknown: return 0;
  }
  return 0;
}

}  // namespace fused::runtime
