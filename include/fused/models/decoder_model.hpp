// Decoder models that run, of any family: the static one, whose plan, offsets and kernel calls are compile-time
// constants, and the run-time one, which evaluates the same pipeline for a config known only then.
// Both lower their plans with runtime::lower_calls and execute every call through runtime::invoke,
// so for one config their logits are bitwise equal.
//
//   using model = fused::decoder::static_model<fused::qwen2::presets::qwen2_0_5b, 512, 4096>;
//   static_assert(model::arena_bytes <= 24 << 20);
//   auto weights = fused::runtime::weight_store::load("Qwen2-0.5B", model::plans::prefill.tensors, true);
//   model m(weights);                       // or model m(weights, caller_state, caller_arena)
//   auto logits = m.prefill(ids);           // [V] for the last position
//   logits = m.decode(next_id);
#pragma once
#include <algorithm>
#include <array>
#include <cstdint>
#include <span>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "../runtime/calls.hpp"
#include "../runtime/invoke.hpp"
#include "../runtime/session.hpp"
#include "../runtime/weights.hpp"
#include "decoder_plan.hpp"

// The graph files' shape rules (ops/common.hpp) hold RoPE and attention to the kernels' limit.
static_assert(fused::ops::max_head_dim == FK_MAX_HEAD_DIM, "ops/common.hpp and kernels/fk_common.h disagree on the largest head_dim");

namespace fused::decoder {

namespace detail {
inline void check_kernel_limits(const config& c) {
  if (c.head_dim > FK_MAX_HEAD_DIM)
    throw std::invalid_argument("head_dim " + std::to_string(c.head_dim) + " exceeds the kernels' limit of " + std::to_string(FK_MAX_HEAD_DIM));
}

inline std::byte* checked_state(std::span<std::byte> state, std::int64_t bytes) {
  if (state.size() < static_cast<std::size_t>(bytes))
    throw std::invalid_argument("open_session: the state region needs " + std::to_string(bytes) + " bytes, " + std::to_string(state.size()) + " given");
  if (reinterpret_cast<std::uintptr_t>(state.data()) % mem_align) throw std::invalid_argument("open_session: the state region must be 64-byte aligned");
  return state.data();
}
}  // namespace detail

// A static model of Preset's family and config: prefill of up to MaxTokens tokens per call (longer prompts run in chunks),
// decode of one token, over a KV cache of Ctx positions. Every shape, offset and kernel call is a
// compile-time constant; prefill and decode allocate nothing.
template <class Preset, std::int64_t MaxTokens, std::int64_t Ctx, graph_options Options = graph_options{}>
class static_model {
 public:
  using plans = static_plans<Preset, MaxTokens, Ctx, Options>;
  static constexpr config cfg = Preset::value;
  static_assert(cfg.head_dim <= FK_MAX_HEAD_DIM, "fused: head_dim exceeds the attention kernels' limit (FK_MAX_HEAD_DIM)");
  static constexpr std::size_t step_count = plans::size.steps;
  static constexpr std::array<runtime::call, step_count> prefill_calls = runtime::freeze_calls<step_count>(plans::prefill, sym_tokens);
  static constexpr std::array<runtime::call, step_count> decode_calls = runtime::freeze_calls<step_count>(plans::decode, sym_tokens);
  static_assert(runtime::lowers_to_kernels(prefill_calls) && runtime::lowers_to_kernels(decode_calls),
                "fused: a step of this plan has no kernel an executor implements");
  static constexpr std::size_t weight_count = runtime::weight_count(plans::prefill.tensors);
  // Region sizes: one arena serves both modes (they never run at the same time).
  static constexpr std::int64_t weights_bytes = plans::prefill.weights_bytes();
  static constexpr std::int64_t state_bytes = plans::prefill.state_bytes();
  static constexpr std::int64_t arena_bytes = std::max(plans::prefill.arena_bytes(), plans::decode.arena_bytes());
  static constexpr std::int64_t max_tokens = MaxTokens;
  static constexpr std::int64_t capacity = Ctx;

  // Owns its state and arena (allocated here, once).
  explicit static_model(const runtime::weight_store& w)
      : state_(static_cast<std::size_t>(state_bytes)), arena_(static_cast<std::size_t>(arena_bytes)) {
    init(w.table(), w.count(), state_.data(), arena_.data());
  }
  // Caller-owned regions: `state` of state_bytes and `arena` of arena_bytes, both 64-byte aligned.
  static_model(const runtime::weight_store& w, std::span<std::byte> state, std::span<std::byte> arena) {
    if (state.size() < static_cast<std::size_t>(state_bytes) || arena.size() < static_cast<std::size_t>(arena_bytes))
      throw std::invalid_argument("static_model: the state region needs " + std::to_string(state_bytes) + " bytes and the arena " +
                                  std::to_string(arena_bytes));
    init(w.table(), w.count(), state.data(), arena.data());
  }
  static_model(const static_model&) = delete;
  static_model& operator=(const static_model&) = delete;

  std::span<const float> prefill(std::span<const std::int32_t> ids) { return s_.prefill(ids, exec); }
  std::span<const float> decode(std::int32_t id) { return s_.decode(id, exec); }
  void reset() { s_.reset(); }
  std::int64_t position() const { return s_.position(); }
  std::int64_t vocab_size() const { return s_.vocab_size(); }

  // Further conversations on the same weights and arena, each with its own KV cache: `state` is
  // state_bytes, 64-byte aligned, caller-owned. Calls on different sessions take turns (one arena).
  runtime::session open_session(std::span<std::byte> state) const { return s_.with_state(detail::checked_state(state, state_bytes)); }
  std::span<const float> prefill(runtime::session& s, std::span<const std::int32_t> ids) const { return s.prefill(ids, exec); }
  std::span<const float> decode(runtime::session& s, std::int32_t id) const { return s.decode(id, exec); }

 private:
  // One invoke per step, in order. A braced list, not a comma fold: clang nests a fold's operands and
  // refuses more than 256 of them (-fbracket-depth), and Qwen2-0.5B has 412 steps; the elements of a
  // braced list are evaluated in order ([dcl.init.list]/4) and have no such limit.
  template <const auto& Calls, std::size_t... I>
  static void run(const runtime::regions& r, const runtime::call_dims& d, std::index_sequence<I...>) {
    [[maybe_unused]] const int in_order[] = {(runtime::invoke(Calls[I], r, d), 0)...};
  }
  static void exec(bool decode, const runtime::regions& r, const runtime::call_dims& d) {
    if (decode) run<decode_calls>(r, d, std::make_index_sequence<step_count>{});
    else run<prefill_calls>(r, d, std::make_index_sequence<step_count>{});
  }
  void init(const std::uint16_t* const* weights, std::size_t n, std::byte* state, std::byte* arena) {
    if (n != weight_count)
      throw std::invalid_argument("static_model: " + std::to_string(n) + " weights bound, the plan has " + std::to_string(weight_count));
    if ((reinterpret_cast<std::uintptr_t>(state) | reinterpret_cast<std::uintptr_t>(arena)) % mem_align)
      throw std::invalid_argument("static_model: regions must be 64-byte aligned");
    constexpr auto& pp = plans::prefill;
    constexpr auto& dp = plans::decode;
    s_ = runtime::session({MaxTokens, Ctx, cfg.vocab_size, sym_tokens},
                          runtime::find_io(pp.tensors, pp.buffers, plans::logits, pp.bind, sym_tokens),
                          runtime::find_io(dp.tensors, dp.buffers, plans::logits, dp.bind, sym_tokens), {weights, state, arena});
  }

  runtime::aligned_bytes state_, arena_;
  runtime::session s_;
};

// The run-time model: the same pipeline for a config read from a file.
class model {
 public:
  model(const family_entry& f, const config& c, std::int64_t max_tokens, std::int64_t ctx, graph_options o = {})
      : family_(f),
        cfg_(c),
        prefill_(plan_for(f, c, mode::prefill(max_tokens, ctx), o)),
        decode_(plan_for(f, c, mode::decode(ctx), o)) {
    detail::check_kernel_limits(c);
    prefill_calls_ = lower(prefill_);
    decode_calls_ = lower(decode_);
  }
  model(const model&) = delete;
  model& operator=(const model&) = delete;

  const family_entry& family() const { return family_; }
  const config& cfg() const { return cfg_; }
  const planned& prefill_plan() const { return prefill_; }
  const planned& decode_plan() const { return decode_; }
  const std::vector<runtime::call>& prefill_calls() const { return prefill_calls_; }
  const std::vector<runtime::call>& decode_calls() const { return decode_calls_; }
  std::int64_t weights_bytes() const { return prefill_.mem.region_bytes[static_cast<int>(region::weights)]; }
  std::int64_t state_bytes() const { return prefill_.mem.region_bytes[static_cast<int>(region::state)]; }
  std::int64_t arena_bytes() const { return std::max(prefill_.mem.arena_bytes(), decode_.mem.arena_bytes()); }
  const std::vector<tensor_info>& tensors() const { return prefill_.prog.tensors; }

  // Binds weights (the store must outlive the model) and allocates state and arena, once.
  void bind(const runtime::weight_store& w) {
    if (w.count() != runtime::weight_count(tensors()))
      throw std::invalid_argument("model: " + std::to_string(w.count()) + " weights bound, the plan has " +
                                  std::to_string(runtime::weight_count(tensors())));
    state_ = runtime::aligned_bytes(static_cast<std::size_t>(state_bytes()));
    arena_ = runtime::aligned_bytes(static_cast<std::size_t>(arena_bytes()));
    s_ = runtime::session({prefill_.mem.bind.value[sym_tokens], prefill_.mem.bind.value[sym_ctx], cfg_.vocab_size, sym_tokens},
                          io(prefill_), io(decode_), {w.table(), state_.data(), arena_.data()});
  }

  std::span<const float> prefill(std::span<const std::int32_t> ids) { return s_.prefill(ids, executor{this}); }
  // The same, calling `observe(const tensor_info& result, std::span<const float> data)` after every
  // step whose result is f32, while its bytes are still live: for debugging against a reference.
  template <class Observer>
  std::span<const float> prefill_observed(std::span<const std::int32_t> ids, Observer&& observe) {
    return s_.prefill(ids, [&](bool decode, const runtime::regions& r, const runtime::call_dims& d) {
      for (const runtime::call& c : decode ? decode_calls_ : prefill_calls_) {
        runtime::invoke(c, r, d);
        const tensor_info& t = tensors()[static_cast<std::size_t>(c.out.tensor)];
        if (t.type != dtype::f32) continue;
        binding b = d.b;
        b.value[sym_ctx] = prefill_.mem.bind.value[sym_ctx];
        const auto n = static_cast<std::size_t>(t.shp.elements(b));
        observe(t, std::span<const float>(reinterpret_cast<const float*>(r.arena + c.out.offset), n));
      }
    });
  }
  std::span<const float> decode(std::int32_t id) { return s_.decode(id, executor{this}); }
  void reset() { s_.reset(); }
  std::int64_t position() const { return s_.position(); }
  std::int64_t capacity() const { return s_.capacity(); }
  std::int64_t max_tokens() const { return s_.max_tokens(); }
  std::int64_t vocab_size() const { return cfg_.vocab_size; }

  // As static_model's: further sessions over caller-owned state regions (after bind).
  runtime::session open_session(std::span<std::byte> state) const { return s_.with_state(detail::checked_state(state, state_bytes())); }
  std::span<const float> prefill(runtime::session& s, std::span<const std::int32_t> ids) const { return s.prefill(ids, executor{this}); }
  std::span<const float> decode(runtime::session& s, std::int32_t id) const { return s.decode(id, executor{this}); }

 private:
  static std::vector<runtime::call> lower(const planned& p) {
    runtime::lowering_error e{};
    std::vector<runtime::call> c = runtime::lower_calls(p.prog.tensors, p.prog.steps, p.mem.buffers, p.mem.kernels, p.mem.bind, p.prog.training, sym_tokens, &e);
    if (c.size() != p.prog.steps.size())
      throw graph_error("step " + std::to_string(e.step) + ": " + std::string(e.what));
    for (const runtime::call& k : c)
      if (k.k == runtime::kernel::host) throw graph_error("step " + std::to_string(k.step) + ": a decoder runs C kernels only, not an op's host function");
    return c;
  }
  static runtime::io_layout io(const planned& p) {
    return runtime::find_io(p.prog.tensors, p.mem.buffers, p.prog.output("logits"), p.mem.bind, sym_tokens);
  }
  struct executor {
    const model* m;
    void operator()(bool decode, const runtime::regions& r, const runtime::call_dims& d) const {
      for (const runtime::call& c : decode ? m->decode_calls_ : m->prefill_calls_) runtime::invoke(c, r, d);
    }
  };

  family_entry family_;
  config cfg_;
  planned prefill_, decode_;
  std::vector<runtime::call> prefill_calls_, decode_calls_;
  runtime::aligned_bytes state_, arena_;
  runtime::session s_;
};

}  // namespace fused::decoder
