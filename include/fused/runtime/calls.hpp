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
  embed,               // fk_embed(table, H, ids, rows, out)
  rmsnorm,             // fk_rmsnorm(x, w, rows, H, eps, out)
  rmsnorm_heads,       // fk_rmsnorm_heads(x, w, rows, heads, head_dim, eps, out)
  gemv,                // fk_gemv_bf16(x, K, W, N, bias, y)             rows == 1
  gemm,                // fk_gemm_bf16(x, rows, K, W, N, bias, y, work)
  rope,                // fk_rope(x, rows, heads, head_dim, pos0, theta)  in place
  rope_llama3,         // fk_rope_llama3(x, rows, heads, head_dim, pos0, theta, factor, low, high, original_max)
  kv_store,            // fk_kv_store(kv, rows, n_kv, head_dim, cache, capacity, pos0)
  attention_prefill,   // fk_attention_prefill(q, rows, heads, kc, vc, n_kv, head_dim, capacity, pos0, out)
  attention_decode,    // fk_attention_decode(q, heads, kc, vc, n_kv, head_dim, capacity, pos0, out)
  add,                 // fk_add(a, b, rows*cols, out)
  swiglu,              // fk_swiglu(gate, up, rows*cols, out)
  copy_last_row,       // out[0..cols) = x[(rows-1)*cols ..)
  unknown,
};

struct kernel_name {
  kernel k;
  std::string_view name;
};
inline constexpr std::array<kernel_name, 13> kernel_names{{
    {kernel::embed, "fk_embed"},
    {kernel::rmsnorm, "fk_rmsnorm"},
    {kernel::rmsnorm_heads, "fk_rmsnorm_heads"},
    {kernel::gemv, "fk_gemv_bf16"},
    {kernel::gemm, "fk_gemm_bf16"},
    {kernel::rope, "fk_rope"},
    {kernel::rope_llama3, "fk_rope_llama3"},
    {kernel::kv_store, "fk_kv_store"},
    {kernel::attention_prefill, "fk_attention_prefill"},
    {kernel::attention_decode, "fk_attention_decode"},
    {kernel::add, "fk_add"},
    {kernel::swiglu, "fk_swiglu"},
    {kernel::copy_last_row, "fk_copy_last_row"},
}};

constexpr kernel kernel_of(std::string_view name) {
  for (const auto& kn : kernel_names)
    if (kn.name == name) return kn.k;
  return kernel::unknown;
}
constexpr std::string_view name_of(kernel k) {
  for (const auto& kn : kernel_names)
    if (kn.k == k) return kn.name;
  return "unknown";
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
  // Sizes, by kernel: embed {H}; rmsnorm {H}; rmsnorm_heads {heads, head_dim}; gemv/gemm {K, N};
  // rope {heads, head_dim}; rope_llama3 {heads, head_dim, original_max}; kv_store {n_kv, head_dim,
  // capacity}; attention {heads, n_kv, head_dim, capacity}; add/swiglu {cols}; copy_last_row {cols}.
  std::array<std::int64_t, 4> size{};
  // Reals, by kernel: rmsnorm(_heads) {eps}; rope {theta}; rope_llama3 {theta, factor, low, high}.
  std::array<float, 4> real{};

  friend constexpr bool operator==(const call&, const call&) = default;
};

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
// program + memory_plan at run time, or a frozen static_plan's arrays); `b` is the mode's binding.
// Every symbol is resolved through `b` except `dynamic` (the tokens of one call), which stays in
// `rows` so that one plan serves any token count up to the planned one. On a step no kernel here
// implements, the result is empty and `err` says which.
template <class Tensors, class Steps, class Buffers, class Kernels>
constexpr std::vector<call> lower_calls(const Tensors& tensors, const Steps& steps, const Buffers& buffers,
                                        const Kernels& kernels, const binding& b, std::uint8_t dynamic,
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
    const shape& x = shp(s.inputs[0]);
    // Rows of the first input: all dims but the last (symbols kept symbolic).
    auto rows_of = [&](const dim& d) -> rows_t { return d.symbol == dynamic && d.symbol ? rows_t{d.n, d.symbol} : rows_t{b(d), 0}; };
    c.rows = {1, 0};
    for (int i = 0; i + 1 < x.rank; ++i) {
      const rows_t r = rows_of(x[i]);
      c.rows.n *= r.n;
      if (r.symbol) c.rows.symbol = r.symbol;
    }
    const std::int64_t cols = x.rank ? x.back().n : 1;
    switch (c.k) {
      case kernel::embed:
        c.rows = rows_of(x[0]);
        c.size = {shp(s.inputs[1])[1].n, 0, 0, 0};
        break;
      case kernel::rmsnorm: c.size = {cols, 0, 0, 0}; c.real[0] = static_cast<float>(s.at.f); break;
      case kernel::rmsnorm_heads:
        c.size = {s.at.i[0], cols / s.at.i[0], 0, 0};
        c.real[0] = static_cast<float>(s.at.f);
        break;
      case kernel::gemv: c.size = {cols, shp(s.inputs[1])[0].n, 0, 0}; break;
      case kernel::gemm:
        c.size = {cols, shp(s.inputs[1])[0].n, 0, 0};
        if (s.work >= 0) c.work = at(s.work);
        break;
      case kernel::rope: c.size = {s.at.i[0], s.at.i[1], 0, 0}; c.real[0] = static_cast<float>(s.at.f); break;
      case kernel::rope_llama3:
        c.size = {s.at.i[0], s.at.i[1], s.at.i[2], 0};
        c.real = {static_cast<float>(s.at.f), static_cast<float>(s.at.extra[0]), static_cast<float>(s.at.extra[1]),
                  static_cast<float>(s.at.extra[2])};
        break;
      case kernel::kv_store: {
        const shape& cache = shp(s.inputs[1]);
        c.size = {cache[0].n, cache[2].n, b(cache[1]), 0};
        break;
      }
      case kernel::attention_prefill:
      case kernel::attention_decode: {
        const shape& cache = shp(s.inputs[1]);
        c.size = {s.at.i[0], cache[0].n, cache[2].n, b(cache[1])};
        break;
      }
      case kernel::add:
      case kernel::swiglu:
      case kernel::copy_last_row: c.size = {cols, 0, 0, 0}; break;
      case kernel::unknown:
        if (err) *err = {s.id, "a step whose kernel no executor implements"};
        return {};
    }
    out.push_back(c);
  }
  return out;
}

}  // namespace fused::runtime
