// Executes one kernel call (runtime/calls.hpp) on caller-owned regions. This is the only place that
// turns a call into an fk_ kernel invocation, so the static and the run-time model cannot differ:
// the static model passes each call as a `static constexpr` object and, the function being always
// inlined, the compiler folds the switch and the offsets into one direct kernel call.
#pragma once
#include <cstddef>
#include <cstdint>
#include <cstring>

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
// position of the first token.
struct call_dims {
  binding b{};
  std::int64_t pos0 = 0;
};

namespace detail {
FUSED_ALWAYS_INLINE const std::uint16_t* weight_ptr(const operand& o, const regions& r) {
  return r.weights[static_cast<std::size_t>(o.slot)];
}
template <class T>
FUSED_ALWAYS_INLINE T* data_ptr(const operand& o, const regions& r) {
  std::byte* base = o.where == region::state ? r.state : r.arena;
  return reinterpret_cast<T*>(base + o.offset);
}
FUSED_ALWAYS_INLINE const std::uint16_t* bf16_in(const operand& o, const regions& r) {
  return o.where == region::weights ? weight_ptr(o, r) : data_ptr<std::uint16_t>(o, r);
}
}  // namespace detail

FUSED_ALWAYS_INLINE void invoke(const call& c, const regions& r, const call_dims& d) {
  using detail::data_ptr;
  using std::size_t;
  const auto rows = static_cast<size_t>(c.rows.n * d.b.value[c.rows.symbol]);
  const auto pos0 = static_cast<size_t>(d.pos0);
  const auto s0 = static_cast<size_t>(c.size[0]), s1 = static_cast<size_t>(c.size[1]);
  const auto s2 = static_cast<size_t>(c.size[2]), s3 = static_cast<size_t>(c.size[3]);
  float* out = data_ptr<float>(c.out, r);
  switch (c.k) {
    case kernel::embed:
      fk_embed(detail::bf16_in(c.in[1], r), s0, data_ptr<const std::int32_t>(c.in[0], r), rows, out);
      return;
    case kernel::rmsnorm:
      fk_rmsnorm(data_ptr<const float>(c.in[0], r), detail::bf16_in(c.in[1], r), rows, s0, c.real[0], out);
      return;
    case kernel::rmsnorm_heads:
      fk_rmsnorm_heads(data_ptr<const float>(c.in[0], r), detail::bf16_in(c.in[1], r), rows, s0, s1, c.real[0], out);
      return;
    case kernel::gemv:
    case kernel::gemm: {
      const std::uint16_t* bias = c.n_in == 3 ? detail::bf16_in(c.in[2], r) : nullptr;
      if (c.k == kernel::gemv)
        fk_gemv_bf16(data_ptr<const float>(c.in[0], r), s0, detail::bf16_in(c.in[1], r), s1, bias, out);
      else
        fk_gemm_bf16(data_ptr<const float>(c.in[0], r), rows, s0, detail::bf16_in(c.in[1], r), s1, bias, out,
                     c.work.tensor >= 0 ? data_ptr<std::uint16_t>(c.work, r) : nullptr);
      return;
    }
    case kernel::rope:
    case kernel::rope_llama3: {
      const float* x = data_ptr<const float>(c.in[0], r);
      if (x != out) std::memcpy(out, x, rows * s0 * s1 * sizeof(float));
      if (c.k == kernel::rope) fk_rope(out, rows, s0, s1, pos0, c.real[0]);
      else fk_rope_llama3(out, rows, s0, s1, pos0, c.real[0], c.real[1], c.real[2], c.real[3], s2);
      return;
    }
    case kernel::kv_store: {
      auto* cache = data_ptr<std::uint16_t>(c.out, r);
      const std::uint16_t* prev = data_ptr<const std::uint16_t>(c.in[1], r);
      if (prev != cache) std::memcpy(cache, prev, s0 * s1 * s2 * sizeof(std::uint16_t));
      fk_kv_store(data_ptr<const float>(c.in[0], r), rows, s0, s1, cache, s2, pos0);
      return;
    }
    case kernel::attention_prefill:
      fk_attention_prefill(data_ptr<const float>(c.in[0], r), rows, s0, data_ptr<const std::uint16_t>(c.in[1], r),
                           data_ptr<const std::uint16_t>(c.in[2], r), s1, s2, s3, pos0, out);
      return;
    case kernel::attention_decode:
      fk_attention_decode(data_ptr<const float>(c.in[0], r), s0, data_ptr<const std::uint16_t>(c.in[1], r),
                          data_ptr<const std::uint16_t>(c.in[2], r), s1, s2, s3, pos0, out);
      return;
    case kernel::add:
      fk_add(data_ptr<const float>(c.in[0], r), data_ptr<const float>(c.in[1], r), rows * s0, out);
      return;
    case kernel::swiglu:
      fk_swiglu(data_ptr<const float>(c.in[0], r), data_ptr<const float>(c.in[1], r), rows * s0, out);
      return;
    case kernel::copy_last_row:
      std::memmove(out, data_ptr<const float>(c.in[0], r) + (rows - 1) * s0, s0 * sizeof(float));
      return;
    case kernel::unknown: return;
  }
}

}  // namespace fused::runtime
