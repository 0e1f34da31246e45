// Static walls of the spine: tiny hand-built programs, scheduled, lowered, planned and frozen in
// constant evaluation, with every level, lifetime, offset, byte count, arena and lower bound worked
// out by hand in the comments (TFLite Micro's habit: the planner is tested on plans a person can
// check). Compiling this file is most of the test; the doctest cases then break plans on purpose and
// check that the verifier rejects each with its sentence.
#include <doctest/doctest.h>

#include <fused/core/text_string.hpp>
#include <fused/graph/builder.hpp>
#include <fused/ops.hpp>
#include <fused/ops/graph_ops.hpp>
#include <fused/plan/planner.hpp>
#include <fused/plan/static_program.hpp>
#include <fused/plan/static_plan.hpp>
#include <fused/plan/verifier.hpp>

#include <string>
#include <utility>

namespace {

using namespace fused;
constexpr std::uint8_t T = 1;  // symbol: tokens
constexpr std::uint8_t C = 2;  // symbol: cache capacity

// Sections 1-3 work out the planner by hand on ops::linear without its workspace (a bf16 copy of x,
// at least 32 columns wide, that would dwarf these 8-column tensors); section 4 plans the real one.
constexpr op_def linear_no_work = [] {
  op_def d = ops::linear;
  d.has_work = false;
  return d;
}();

constexpr binding bind(std::int64_t tokens, std::int64_t ctx = 0) {
  binding b{};
  b.value[T] = tokens;
  b.value[C] = ctx;
  return b;
}

// ---- 1. A chain with an in-place add -------------------------------------------------------------
//   t0 ids  input  i32 [$1]                      t1 embed.weight bf16 [16, 8]
//   t2 x  = embed(ids, embed.weight)   step 0    t3 norm.weight  bf16 [8]
//   t4 h  = rms_norm(x, norm.weight)   step 1    t5 w            bf16 [8, 8]
//   t6 y  = linear(h, w)               step 2
//   t7 z  = add(x, y)                  step 3    output "z"
// add may write over its input 0 (x) when this add is x's last reader, which it is.
constexpr program chain() {
  graph_builder g;
  const auto ids = g.input({"ids"}, dtype::i32, shape(sym(T)));
  const auto x = g.apply(ops::embed, {ids, g.weight({"embed.weight"}, dtype::bf16, shape(16, 8))}, {}, {"x"});
  const auto h = g.apply(ops::rms_norm, {x, g.weight({"norm.weight"}, dtype::bf16, shape(8))}, {.f = 1e-6}, {"h"});
  const auto y = g.apply(linear_no_work, {h, g.weight({"w"}, dtype::bf16, shape(8, 8))}, {}, {"y"});
  const auto z = g.apply(ops::add, {x, y}, {}, {"z"});
  g.output("z", z);
  return std::move(g).finish();
}

// Levels: embed 1 (feeds only), rms_norm 2, linear 3, add max(1, 3) + 1 = 4; schedule = id order.
// Bytes at $1 = 4: ids 4*4 = 16; x, h, y, z 4*8*4 = 128 each.
// Weights in feed order, each rounded up to 64: embed.weight 16*8*2 = 256 at 0; norm.weight 16 at
// 256 (takes 64); w 8*8*2 = 128 at 320; region = 448.
// Lifetimes (schedule positions): ids [0,0]; x [0,3] (read by steps 1 and 3); h [1,2]; y [2,3];
// z [3,3] (an output: lives to the end), in x's group.
// Activation groups: ids 16 (64 aligned) [0,0]; x+z 128 [0,3]; h 128 [1,2]; y 128 [2,3].
// Greedy by size (x, h, y, ids): x 0; h collides with x -> 128; y with x, h -> 256; ids with x -> 128.
//   arena 384.
// Greedy by first use, best fit (x, ids, h, y): x 0; ids 128; h 128 (ids is dead); y 256. arena 384.
// A tie keeps greedy by size. Lower bound: position 0: 64 + 128; 1: 128 + 128; 2: x + h + y = 384;
// 3: x + y = 256 -> 384. The plan is optimal.
constexpr auto chain_plan = [] {
  const program p = chain();
  return freeze<8, 4>(p, plan_memory(p, bind(4)));
}();

static_assert(chain_plan.failure.empty());
static_assert(chain_plan.steps[0].level == 1 && chain_plan.steps[1].level == 2 && chain_plan.steps[2].level == 3 &&
              chain_plan.steps[3].level == 4);
static_assert(chain_plan.steps[0].id == 0 && chain_plan.steps[1].id == 1 && chain_plan.steps[2].id == 2 && chain_plan.steps[3].id == 3);
static_assert(chain_plan.weights_bytes() == 448 && chain_plan.state_bytes() == 0);
static_assert(chain_plan.of(1).offset == 0 && chain_plan.of(1).bytes == 256);    // embed.weight
static_assert(chain_plan.of(3).offset == 256 && chain_plan.of(3).bytes == 16);   // norm.weight
static_assert(chain_plan.of(5).offset == 320 && chain_plan.of(5).bytes == 128);  // w
static_assert(chain_plan.of(0).bytes == 16 && chain_plan.of(0).offset == 128);   // ids
static_assert(chain_plan.of(2).offset == 0 && chain_plan.of(4).offset == 128 && chain_plan.of(6).offset == 256);
static_assert(chain_plan.of(7).offset == 0 && chain_plan.of(7).group == 2);      // z sits on x
static_assert(chain_plan.of(2).first == 0 && chain_plan.of(2).last == 3);
static_assert(chain_plan.of(4).first == 1 && chain_plan.of(4).last == 2);
static_assert(chain_plan.of(6).first == 2 && chain_plan.of(6).last == 3);
static_assert(chain_plan.of(7).first == 3 && chain_plan.of(7).last == 3);
static_assert(chain_plan.arena_bytes() == 384 && chain_plan.lower_bound == 384);
static_assert(chain_plan.chosen == strategy::greedy_by_size);
static_assert(chain_plan.tensors[7].kind == role::output && chain_plan.tensors[2].kind == role::activation);
static_assert(chain_plan.offset_of("h") == 128 && chain_plan.offset_of("nothing") == -1);
static_assert(std::string_view(chain_plan.kernels[0]) == "fk_embed" && std::string_view(chain_plan.kernels[1]) == "fk_rmsnorm" &&
              std::string_view(chain_plan.kernels[2]) == "fk_gemm_bf16" && std::string_view(chain_plan.kernels[3]) == "fk_add");

// One token: every activation is 32 bytes or less and takes 64. x 0; h 64; y 128; ids 64 (alive only
// at position 0, with x); arena 192 = lower bound (x + h + y at position 2). linear becomes a GEMV.
constexpr auto chain_one = [] {
  const program p = chain();
  return freeze<8, 4>(p, plan_memory(p, bind(1)));
}();
static_assert(chain_one.failure.empty() && chain_one.arena_bytes() == 192 && chain_one.lower_bound == 192);
static_assert(chain_one.of(0).offset == 64 && chain_one.of(4).offset == 64 && chain_one.of(6).offset == 128);
static_assert(std::string_view(chain_one.kernels[2]) == "fk_gemv_bf16");
static_assert(chain_one.weights_bytes() == chain_plan.weights_bytes());

// ---- 2. A diamond whose schedule differs from the order of the ids ----------------------------------
//   t0 x  input f32 [$1, 8]           t1 norm.weight bf16 [8]
//   t2 a = rms_norm(x, norm.weight)   step 0, level 1
//   t3 w1 bf16 [16, 8]                t4 b = linear(a, w1)   step 1, level 2
//   t5 w2 bf16 [16, 8]                t6 c = linear(x, w2)   step 2, level 1
//   t7 d = add(b, c)                  step 3, level 3, in place over b; output "d"
// Schedule (level, id): step 0, step 2, step 1, step 3.
constexpr program diamond() {
  graph_builder g;
  const auto x = g.input({"x"}, dtype::f32, shape(sym(T), 8));
  const auto a = g.apply(ops::rms_norm, {x, g.weight({"norm.weight"}, dtype::bf16, shape(8))}, {.f = 1e-6}, {"a"});
  const auto b = g.apply(linear_no_work, {a, g.weight({"w1"}, dtype::bf16, shape(16, 8))}, {}, {"b"});
  const auto c = g.apply(linear_no_work, {x, g.weight({"w2"}, dtype::bf16, shape(16, 8))}, {}, {"c"});
  const auto d = g.apply(ops::add, {b, c}, {}, {"d"});
  g.output("d", d);
  return std::move(g).finish();
}

// $1 = 4: x, a 128 bytes; b, c, d 4*16*4 = 256.
// Weights: norm.weight 16 at 0 (64); w1 256 at 64; w2 256 at 320; region 576.
// Lifetimes: x [0,1] (read at positions 0 and 1); a [0,2]; c [1,3]; b [2,3]; d [3,3] in b's group.
// Greedy by size (c, b, x, a): c 0; b 256 (collides with c); x collides with c only -> 256 (b is not
//   live with x); a collides with c [0,256), x [256,384), b [256,512) -> 512. arena 640.
// Greedy by first use, best fit (x, a, c, b): x 0; a 128; c 256; b: the gap [0,128) is too small ->
//   512. arena 768.
// Greedy by size wins: 640. Lower bound: 0: x + a = 256; 1: + c = 512; 2: a + c + b = 640; 3: 512.
constexpr auto diamond_plan = [] {
  const program p = diamond();
  return freeze<8, 4>(p, plan_memory(p, bind(4)));
}();

static_assert(diamond_plan.failure.empty());
static_assert(diamond_plan.steps[0].id == 0 && diamond_plan.steps[1].id == 2 && diamond_plan.steps[2].id == 1 &&
              diamond_plan.steps[3].id == 3);
static_assert(diamond_plan.steps[0].level == 1 && diamond_plan.steps[1].level == 1 && diamond_plan.steps[2].level == 2 &&
              diamond_plan.steps[3].level == 3);
static_assert(diamond_plan.weights_bytes() == 576 && diamond_plan.of(1).offset == 0 && diamond_plan.of(3).offset == 64 &&
              diamond_plan.of(5).offset == 320);
static_assert(diamond_plan.of(0).first == 0 && diamond_plan.of(0).last == 1);
static_assert(diamond_plan.of(2).first == 0 && diamond_plan.of(2).last == 2);
static_assert(diamond_plan.of(4).first == 2 && diamond_plan.of(4).last == 3);
static_assert(diamond_plan.of(6).first == 1 && diamond_plan.of(6).last == 3);
static_assert(diamond_plan.of(6).offset == 0 && diamond_plan.of(4).offset == 256 && diamond_plan.of(0).offset == 256 &&
              diamond_plan.of(2).offset == 512);
static_assert(diamond_plan.of(7).offset == 256 && diamond_plan.of(7).group == 4 && diamond_plan.of(7).bytes == 256);
static_assert(diamond_plan.arena_bytes() == 640 && diamond_plan.lower_bound == 640);
static_assert(diamond_plan.chosen == strategy::greedy_by_size);

// The plan records what the strategies needed: greedy by size reached the lower bound, so greedy by
// first use (768 bytes, above) was not tried.
static_assert([] {
  const program p = diamond();
  const memory_plan m = plan_memory(p, bind(4));
  return m.arena_by_strategy[0] == 640 && m.arena_by_strategy[1] == -1;
}());

// ---- 2b. Greedy by first use wins ------------------------------------------------------------------
//   t0 x input f32 [$1, 32]   t2 a = linear(x, w1 [32, 32])   t4 b = linear(a, w2 [16, 32])
//   t6 c = linear(b, w3 [48, 16]), output "c".   Steps 0, 1, 2 in id order.
// $1 = 1: x 128 bytes, a 128, b 64, c 192. Lifetimes: x [0,0], a [0,1], b [1,2], c [2,2].
// Lower bound: position 0 x + a = 256; 1: a + b = 192; 2: b + c = 256 -> 256.
// Greedy by size (c, x, a, b): c 0; x 0 (not live with c); a 128 (after x); b collides with c
//   [0,192) and a [128,256) -> 256. arena 320, above the lower bound, so:
// Greedy by first use, best fit (x, a, b, c): x 0; a 128; b collides with a only: the gap [0,128)
//   holds it -> 0; c collides with b [0,64) -> 64. arena 256 = the lower bound: kept.
constexpr auto first_use_plan = [] {
  graph_builder g;
  const auto x = g.input({"x"}, dtype::f32, shape(sym(T), 32));
  const auto a = g.apply(linear_no_work, {x, g.weight({"w1"}, dtype::bf16, shape(32, 32))}, {}, {"a"});
  const auto b = g.apply(linear_no_work, {a, g.weight({"w2"}, dtype::bf16, shape(16, 32))}, {}, {"b"});
  g.output("c", g.apply(linear_no_work, {b, g.weight({"w3"}, dtype::bf16, shape(48, 16))}, {}, {"c"}));
  const program p = std::move(g).finish();
  const memory_plan m = plan_memory(p, bind(1));
  struct result {
    static_plan<7, 3> plan;
    std::array<std::int64_t, 2> arenas;
  };
  return result{freeze<7, 3>(p, m), m.arena_by_strategy};
}();
static_assert(first_use_plan.plan.failure.empty() && first_use_plan.plan.chosen == strategy::greedy_by_first_use);
static_assert(first_use_plan.arenas[0] == 320 && first_use_plan.arenas[1] == 256);
static_assert(first_use_plan.plan.arena_bytes() == 256 && first_use_plan.plan.lower_bound == 256);
static_assert(first_use_plan.plan.of(0).offset == 0 && first_use_plan.plan.of(2).offset == 128 && first_use_plan.plan.of(4).offset == 0 &&
              first_use_plan.plan.of(6).offset == 64);

// A step that reads a tensor declared ahead of the step writing it: the scheduler resolves the other
// steps in one pass in id order and leaves this one to wait for its input.
//   t0 x input f32 [$1, 8]            t1 late = declare f32 [$1, 8]
//   t2 a = add(x, x)                  step 0, level 1
//   t3 c = add(a, late)               step 1, level 2 (waits for late)
//   late = add(x, x) into t1          step 2, level 1;   t4 e = add(c, x)   step 3, level 3
// Schedule (level, id): step 0, step 2, step 1, step 3.
constexpr auto forward_plan = [] {
  graph_builder g;
  const auto x = g.input({"x"}, dtype::f32, shape(sym(T), 8));
  const auto late = g.declare({"late"}, dtype::f32, shape(sym(T), 8));
  const auto a = g.apply(ops::add, {x, x}, {}, {"a"});
  const auto c = g.apply(ops::add, {a, late}, {}, {"c"});
  g.apply(ops::add, {x, x}, {}, {}, late);
  g.output("e", g.apply(ops::add, {c, x}, {}, {"e"}));
  const program p = std::move(g).finish();
  return freeze<5, 4>(p, plan_memory(p, bind(4)));
}();
static_assert(forward_plan.failure.empty());
static_assert(forward_plan.steps[0].id == 0 && forward_plan.steps[1].id == 2 && forward_plan.steps[2].id == 1 &&
              forward_plan.steps[3].id == 3);
static_assert(forward_plan.steps[0].level == 1 && forward_plan.steps[1].level == 1 && forward_plan.steps[2].level == 2 &&
              forward_plan.steps[3].level == 3);

// One `lifetimes` serves every mode of a program: planning two bindings with a shared one gives the
// plans that planning each alone gives (nothing of one mode leaks into the other).
constexpr bool same_plan(const memory_plan& a, const memory_plan& b) {
  if (a.buffers.size() != b.buffers.size() || a.kernels.size() != b.kernels.size() || a.region_bytes != b.region_bytes ||
      a.lower_bound != b.lower_bound || a.chosen != b.chosen || a.arena_by_strategy != b.arena_by_strategy)
    return false;
  for (std::size_t i = 0; i < a.buffers.size(); ++i) {
    const buffer &x = a.buffers[i], &y = b.buffers[i];
    if (x.tensor != y.tensor || x.where != y.where || x.offset != y.offset || x.bytes != y.bytes || x.first != y.first ||
        x.last != y.last || x.group != y.group)
      return false;
  }
  for (std::size_t i = 0; i < a.kernels.size(); ++i)
    if (std::string_view(a.kernels[i]) != b.kernels[i]) return false;
  return true;
}
static_assert([] {
  const program p = diamond();
  const lifetimes lt = lifetimes_of(p);
  const memory_plan four = plan_memory(p, lt, bind(4)), one = plan_memory(p, lt, bind(1));
  return same_plan(four, plan_memory(p, bind(4))) && same_plan(one, plan_memory(p, bind(1))) && four.arena_bytes() == 640 &&
         one.arena_bytes() != 640;
}());

// ---- 3. State carried through kv_write ----------------------------------------------------------------
//   t0 x input f32 [$1, 8]            t1 cache state bf16 [1, $2, 8]     t2 wk bf16 [8, 8]
//   t3 k  = linear(x, wk)             step 0, level 1
//   t4 kn = kv_write(k, cache)        step 1, level 2: in place over the state feed, so it is state
//   t5 values state bf16 [1, $2, 8]
//   t6 vn = kv_write(k, values)       step 2, level 2 (the same rows as values)
//   t7 att = attention(x, kn, vn)     step 3, level 3 (1 head of 8 over 1 KV head); output "att"
//   carry_state(cache, kn), carry_state(values, vn)
// Attention reads kn as its key cache and vn as its value cache, so kv_write stores keys into one
// and values into the other (data_layout).
constexpr program stateful() {
  graph_builder g;
  const auto x = g.input({"x"}, dtype::f32, shape(sym(T), 8));
  const auto cache = g.state({"cache"}, dtype::bf16, shape(1, sym(C), 8));
  const auto k = g.apply(linear_no_work, {x, g.weight({"wk"}, dtype::bf16, shape(8, 8))}, {}, {"k"});
  const auto kn = g.apply(ops::kv_write, {k, cache}, {}, {"cache.next"});
  g.carry_state(cache, kn);
  const auto values = g.state({"values"}, dtype::bf16, shape(1, sym(C), 8));
  const auto vn = g.apply(ops::kv_write, {k, values}, {}, {"values.next"});
  g.carry_state(values, vn);
  const auto att = g.apply(ops::attention, {x, kn, vn}, {.i = {1, 0, 0, 0}}, {"att"});
  g.output("att", att);
  return std::move(g).finish();
}

// $1 = 4, $2 = 16: x, k, att 128 bytes; each cache and its next value 16*8*2 = 256.
// Weights: wk 128 at 0. State: cache 256 at 0, values 256 at 256; each next value is in its feed's
// group, so on its bytes; region 512.
// Activations: x [0,3]; k [0,2]; att [3,3]. Both strategies: x 0; k 128; att 128 (k is dead by then).
// Arena 256 = lower bound (two 128-byte buffers live at every position).
constexpr auto state_plan = [] {
  const program p = stateful();
  return freeze<8, 4>(p, plan_memory(p, bind(4, 16)));
}();
static_assert(state_plan.failure.empty());
static_assert(state_plan.tensors[4].kind == role::state && state_plan.of(4).where == region::state);
static_assert(state_plan.of(1).offset == 0 && state_plan.of(4).offset == 0 && state_plan.of(4).group == 1);
static_assert(state_plan.of(5).offset == 256 && state_plan.of(6).offset == 256 && state_plan.of(6).group == 5);
static_assert(state_plan.of(1).bytes == 256 && state_plan.state_bytes() == 512 && state_plan.weights_bytes() == 128);
static_assert(state_plan.of(0).offset == 0 && state_plan.of(3).offset == 128 && state_plan.of(7).offset == 128);
static_assert(state_plan.arena_bytes() == 256 && state_plan.lower_bound == 256);
static_assert(state_plan.steps[0].level == 1 && state_plan.steps[1].level == 2 && state_plan.steps[2].level == 2 &&
              state_plan.steps[3].level == 3);
static_assert(std::string_view(state_plan.kernels[1]) == "fk_k_store" && std::string_view(state_plan.kernels[2]) == "fk_kv_store" &&
              std::string_view(state_plan.kernels[3]) == "fk_attention_prefill");

// Decode ($1 = 1): activations of 32 bytes each take 64: x 0, k 64, att 64; arena 128. The state
// layout does not depend on the mode.
constexpr auto state_decode = [] {
  const program p = stateful();
  return freeze<8, 4>(p, plan_memory(p, bind(1, 16)));
}();
static_assert(state_decode.failure.empty() && state_decode.arena_bytes() == 128 && state_decode.lower_bound == 128);
static_assert(state_decode.of(3).offset == 64 && state_decode.of(7).offset == 64);
static_assert(state_decode.state_bytes() == state_plan.state_bytes() && state_decode.of(4).offset == state_plan.of(4).offset);
static_assert(std::string_view(state_decode.kernels[0]) == "fk_gemv_bf16" && std::string_view(state_decode.kernels[1]) == "fk_k_store" &&
              std::string_view(state_decode.kernels[3]) == "fk_attention_decode");

// ---- 4. static_program: the same pipeline, with its diagnostics, for a model type ------------------------
struct mlp {
  template <class B>
  static constexpr auto build() {
    B g;
    const auto x = g.input({"x"}, dtype::f32, shape(sym(T), 8));
    const auto y = g.apply(ops::linear, {x, g.weight({"w"}, dtype::bf16, shape(4, 8))}, {}, {"y"});
    g.output("y", y);
    return std::move(g).finish();
  }
};
// t0 x, t1 w, t2 y, t3 y.work: the linear's workspace, bf16 [$1, 32] (8 columns rounded up to 32),
// written by step 0 and read by none, so it lives at position 0 only.
// x 16*8*4 = 512, y 16*4*4 = 256 and y.work 16*32*2 = 1024 are all live at the only step; by size:
// y.work 0, x 1024, y 1536: arena 1792 = lower bound; w 4*8*2 = 64.
using mlp16 = static_program<mlp, bind(16)>;
static_assert(mlp16::size.tensors == 4 && mlp16::size.steps == 1);
static_assert(mlp16::plan.arena_bytes() == 1792 && mlp16::plan.lower_bound == 1792 && mlp16::plan.weights_bytes() == 64);
static_assert(mlp16::plan.steps[0].work == 3 && mlp16::plan.tensors[3].type == dtype::bf16 &&
              mlp16::plan.tensors[3].name.str().view() == "y.work" && mlp16::plan.tensors[3].producer == 0);
static_assert(mlp16::plan.of(3).offset == 0 && mlp16::plan.of(3).bytes == 1024 && mlp16::plan.of(3).first == 0 &&
              mlp16::plan.of(3).last == 0);
static_assert(mlp16::plan.of(0).offset == 1024 && mlp16::plan.of(2).offset == 1536);
// One token: a GEMV, which ignores the workspace ([1, 32] bf16 = 64 bytes, still planned): x 32,
// y 16, y.work 64, each taking 64 bytes: arena 192.
static_assert(static_program<mlp, bind(1)>::plan.arena_bytes() == 192 &&
              std::string_view(static_program<mlp, bind(1)>::plan.kernels[0]) == "fk_gemv_bf16");

// ---- Sentences the builder records (the compile-fail tests show them reaching the compiler) ------------
constexpr bool records(error_kind k, std::string_view sentence, program (*build)()) {
  const program p = build();
  return p.error == k && p.message.view() == sentence;
}
// A KV cache read as attention's keys and as its values: the two orders differ (data_layout).
static_assert(records(error_kind::bad_program,
                      "step 2 'attention' reads 'cache.next' as a value cache, but step 2 'attention' reads the same bytes as a "
                      "key cache, and one set of bytes holds one layout",
                      [] {
                        graph_builder g;
                        const auto x = g.input({"x"}, dtype::f32, shape(sym(T), 8));
                        const auto cache = g.state({"cache"}, dtype::bf16, shape(1, sym(C), 8));
                        const auto k = g.apply(linear_no_work, {x, g.weight({"wk"}, dtype::bf16, shape(8, 8))}, {}, {"k"});
                        const auto kn = g.apply(ops::kv_write, {k, cache}, {}, {"cache.next"});
                        g.carry_state(cache, kn);
                        g.output("att", g.apply(ops::attention, {x, kn, kn}, {.i = {1, 0, 0, 0}}, {"att"}));
                        return std::move(g).finish();
                      }));
// The same through the state's bytes: a second attention reads the cache feed itself as values.
static_assert(records(error_kind::bad_program,
                      "step 3 'attention' reads 'cache' as a value cache, but step 2 'attention' reads the same bytes as a "
                      "key cache, and one set of bytes holds one layout",
                      [] {
                        graph_builder g;
                        const auto x = g.input({"x"}, dtype::f32, shape(sym(T), 8));
                        const auto cache = g.state({"cache"}, dtype::bf16, shape(1, sym(C), 8));
                        const auto values = g.state({"values"}, dtype::bf16, shape(1, sym(C), 8));
                        const auto k = g.apply(linear_no_work, {x, g.weight({"wk"}, dtype::bf16, shape(8, 8))}, {}, {"k"});
                        const auto kn = g.apply(ops::kv_write, {k, cache}, {}, {"cache.next"});
                        g.carry_state(cache, kn);
                        g.output("a", g.apply(ops::attention, {x, kn, values}, {.i = {1, 0, 0, 0}}, {"a"}));
                        const auto other = g.state({"other"}, dtype::bf16, shape(1, sym(C), 8));
                        g.output("b", g.apply(ops::attention, {x, other, cache}, {.i = {1, 0, 0, 0}}, {"b"}));
                        return std::move(g).finish();
                      }));
static_assert(records(error_kind::shape_mismatch,
                      "step 1 'linear' (y) input 1 'w': weight bf16 [8, 16] has 16 input features but the input f32 [$1, 8] "
                      "has 8 [inputs: x, w]",
                      [] {
                        graph_builder g;
                        const auto x = g.input({"x"}, dtype::f32, shape(sym(T), 8));
                        const auto h = g.apply(ops::rms_norm, {x, g.weight({"n"}, dtype::bf16, shape(8))}, {.f = 1e-6}, {"h"});
                        (void)h;
                        g.apply(ops::linear, {x, g.weight({"w"}, dtype::bf16, shape(8, 16))}, {}, {"y"});
                        return std::move(g).finish();
                      }));
static_assert(records(error_kind::cycle, "the steps form a cycle (each waits for another's result): step 0 'add' -> a, step 1 'add' -> b",
                      [] {
                        graph_builder g;
                        const auto x = g.input({"x"}, dtype::f32, shape(4, 8));
                        const auto b = g.declare({"b"}, dtype::f32, shape(4, 8));
                        const auto a = g.apply(ops::add, {x, b}, {}, {"a"});
                        g.apply(ops::add, {a, x}, {}, {}, b);
                        g.output("b", b);
                        return std::move(g).finish();
                      }));
static_assert(records(error_kind::unbound_feed,
                      "tensor 'k' (id 1) was declared but no step produces it and it is not a feed", [] {
                        graph_builder g;
                        const auto x = g.input({"x"}, dtype::f32, shape(4, 8));
                        const auto k = g.declare({"k"}, dtype::f32, shape(4, 8));
                        g.output("y", g.apply(ops::add, {x, k}, {}, {"y"}));
                        return std::move(g).finish();
                      }));

}  // namespace

// ---- The verifier rejects hand-broken plans, each with its sentence -------------------------------------
TEST_CASE("verifier: the untouched chain plan passes") {
  const program p = chain();
  const memory_plan m = plan_memory(p, bind(4));
  const verdict v = verify(p, m);
  CHECK(v.ok);
  CHECK(v.what.empty());
}

TEST_CASE("verifier: a misaligned offset") {
  const program p = chain();
  memory_plan m = plan_memory(p, bind(4));
  m.buffers[4].offset = 96;  // h
  const verdict v = verify(p, m);
  CHECK_FALSE(v.ok);
  CHECK(to_string(v.what) == "tensor 'h' offset 96 is not 64-byte aligned");
}

TEST_CASE("verifier: two live buffers overlap") {
  const program p = chain();
  memory_plan m = plan_memory(p, bind(4));
  m.buffers[6].offset = 128;  // y onto h: both live at position 2
  const verdict v = verify(p, m);
  CHECK_FALSE(v.ok);
  CHECK(to_string(v.what) == "tensors 'h' and 'y' share bytes in the activation arena while both are live");
}

TEST_CASE("verifier: buffers that share bytes at different times are fine") {
  const program p = chain();
  memory_plan m = plan_memory(p, bind(4));
  m.buffers[0].offset = 256;  // ids onto y: ids dies at position 0, y is born at 2
  CHECK(verify(p, m).ok);
}

TEST_CASE("verifier: a step that reads before anything writes") {
  program p = chain();
  const memory_plan m = plan_memory(p, bind(4));
  std::swap(p.steps[1], p.steps[2]);  // linear now runs before the rms_norm that writes its input
  const verdict v = verify(p, m);
  CHECK_FALSE(v.ok);
  CHECK(to_string(v.what) == "step 2 'linear' reads 'h' before any step writes it");
}

TEST_CASE("verifier: the arena must be exactly the end of its last buffer") {
  const program p = chain();
  memory_plan m = plan_memory(p, bind(4));
  m.region_bytes[static_cast<std::size_t>(region::activations)] = 448;
  const verdict v = verify(p, m);
  CHECK_FALSE(v.ok);
  CHECK(to_string(v.what) == "region activations is 448 bytes but its buffers end at 384");
}

TEST_CASE("verifier: a buffer outside its region") {
  const program p = chain();
  memory_plan m = plan_memory(p, bind(4));
  m.buffers[6].offset = 384;  // y past the end of the 384-byte arena
  const verdict v = verify(p, m);
  CHECK_FALSE(v.ok);
  CHECK(to_string(v.what) == "tensor 'y' [384, 512) lies outside region activations");
}

TEST_CASE("verifier: weights that share bytes") {
  const program p = chain();
  memory_plan m = plan_memory(p, bind(4));
  m.buffers[3].offset = 192;  // norm.weight inside embed.weight [0, 256)
  const verdict v = verify(p, m);
  CHECK_FALSE(v.ok);
  CHECK(to_string(v.what) == "tensors 'embed.weight' and 'norm.weight' share bytes in region weights");
}

TEST_CASE("verifier: state updated in place must sit on its feed's bytes") {
  const program p = stateful();
  memory_plan m = plan_memory(p, bind(4, 16));
  m.buffers[4].offset = 512;  // cache.next away from cache, inside a state region grown to hold it
  m.region_bytes[static_cast<std::size_t>(region::state)] = 768;
  const verdict v = verify(p, m);
  CHECK_FALSE(v.ok);
  CHECK(to_string(v.what) == "tensor 'cache.next' updates state in place but does not sit on its bytes");
}

TEST_CASE("verifier: a lower bound above the arena is a lower-bound bug") {
  const program p = chain();
  memory_plan m = plan_memory(p, bind(4));
  m.lower_bound = 385;
  const verdict v = verify(p, m);
  CHECK_FALSE(v.ok);
  CHECK(to_string(v.what) == "the arena is smaller than the lower bound: the lower bound is wrong");
}

// The plan's own lifetimes, groups, sizes and regions are checked against the program, not believed:
// each mutation below leaves every buffer pair that the plan says is live together disjoint.
TEST_CASE("verifier: a lifetime cut short before the last reader") {
  const program p = chain();
  memory_plan m = plan_memory(p, bind(4));
  m.buffers[4].last = 1;      // h claims to die at position 1, but linear (position 2) reads it ...
  m.buffers[6].offset = 128;  // ... so y, written there, may not take h's bytes
  const verdict v = verify(p, m);
  CHECK_FALSE(v.ok);
  CHECK(to_string(v.what) == "tensor 'h' is read by step 2 'linear' at position 2, but its buffer is live only at positions 1..1");
}

TEST_CASE("verifier: a buffer born after the step that writes it") {
  const program p = chain();
  memory_plan m = plan_memory(p, bind(4));
  m.buffers[6].first = 3;  // y is written at position 2
  const verdict v = verify(p, m);
  CHECK_FALSE(v.ok);
  CHECK(to_string(v.what) == "tensor 'y' is written by step 2 'linear' at position 2, but its buffer is live only at positions 3..3");
}

TEST_CASE("verifier: a workspace must be live at its step") {
  graph_builder g;
  const auto x = g.input({"x"}, dtype::f32, shape(sym(T), 32));
  g.output("y", g.apply(ops::linear, {x, g.weight({"w"}, dtype::bf16, shape(8, 32))}, {}, {"y"}));
  const program p = std::move(g).finish();
  memory_plan m = plan_memory(p, bind(16));
  REQUIRE(verify(p, m).ok);
  REQUIRE(p.steps[0].work == 3);
  m.buffers[3].first = m.buffers[3].last = 1;  // past the only step
  const verdict v = verify(p, m);
  CHECK_FALSE(v.ok);
  CHECK(to_string(v.what) == "tensor 'y.work' is the workspace of step 0 'linear' at position 0, but its buffer is live only at positions 1..1");
}

TEST_CASE("verifier: a lifetime past the last step") {
  const program p = chain();
  memory_plan m = plan_memory(p, bind(4));
  m.buffers[6].last = 7;
  const verdict v = verify(p, m);
  CHECK_FALSE(v.ok);
  CHECK(to_string(v.what) == "tensor 'y' outlives the last step (position 7 of 4)");
}

// Two independent steps (both level 1): e = embed(ids, W) at position 0, s = add(extra, extra) at 1.
constexpr program two_outputs() {
  graph_builder g;
  const auto ids = g.input({"ids"}, dtype::i32, shape(sym(T)));
  g.output("e", g.apply(ops::embed, {ids, g.weight({"W"}, dtype::bf16, shape(16, 8))}, {}, {"e"}));
  const auto extra = g.input({"extra"}, dtype::f32, shape(sym(T), 8));
  g.output("s", g.apply(ops::add, {extra, extra}, {}, {"s"}));
  return std::move(g).finish();
}

// A lifetimes made for a program of another size is not used: the plan makes its own.
static_assert([] {
  const program p = chain();
  return two_outputs().tensors.size() != p.tensors.size() && same_plan(plan_memory(p, lifetimes_of(two_outputs()), bind(4)), plan_memory(p, bind(4)));
}());

TEST_CASE("verifier: inputs are live from the first position, outputs to the last") {
  const program p = two_outputs();
  const memory_plan planned = plan_memory(p, bind(4));
  REQUIRE(verify(p, planned).ok);
  memory_plan m = planned;
  m.buffers[3].first = 1;  // extra is first read at position 1, but the caller writes it before the call
  verdict v = verify(p, m);
  CHECK(to_string(v.what) == "input 'extra' must be live from position 0 (the caller writes it before the call), but its buffer is born at position 1");
  m = planned;
  m.buffers[2].last = 0;  // e is read by nobody after position 0, but the caller reads it after the call
  v = verify(p, m);
  CHECK(to_string(v.what) == "output 'e' must stay live to the last position 1 (the caller reads it after the call), but its buffer dies at position 0");
}

TEST_CASE("verifier: a buffer smaller than its tensor") {
  const program p = chain();
  memory_plan m = plan_memory(p, bind(4));
  m.buffers[4].bytes = 64;  // h is 4 x 8 f32
  const verdict v = verify(p, m);
  CHECK_FALSE(v.ok);
  CHECK(to_string(v.what) == "tensor 'h' takes 128 bytes under the plan's binding, but its buffer has 64");
}

TEST_CASE("verifier: a tensor placed in another role's region") {
  const program p = chain();
  memory_plan m = plan_memory(p, bind(4));
  m.buffers[3].where = region::activations;  // norm.weight
  const verdict v = verify(p, m);
  CHECK_FALSE(v.ok);
  CHECK(to_string(v.what) == "tensor 'norm.weight' (weight) is placed in region activations, not weights");
}

TEST_CASE("verifier: a buffer that belongs to another tensor") {
  const program p = chain();
  memory_plan m = plan_memory(p, bind(4));
  m.buffers[4].tensor = 6;
  const verdict v = verify(p, m);
  CHECK_FALSE(v.ok);
  CHECK(to_string(v.what) == "buffer 4 holds tensor 6, not tensor 'h'");
}

TEST_CASE("verifier: only an op's in-place input may hand its bytes over") {
  const program p = chain();
  memory_plan m = plan_memory(p, bind(4));
  // y onto h, labelled as one in-place group: h's last reader writes y, but linear is not in place.
  m.buffers[6].offset = m.buffers[4].offset;
  m.buffers[6].group = m.buffers[4].group;
  verdict v = verify(p, m);
  CHECK_FALSE(v.ok);
  CHECK(to_string(v.what) == "tensors 'h' and 'y' share bytes in the activation arena while both are live");
  // The add's real in-place pair (z over x) passes whatever the labels say.
  m = plan_memory(p, bind(4));
  REQUIRE(m.buffers[7].offset == m.buffers[2].offset);
  m.buffers[7].group = 7;
  CHECK(verify(p, m).ok);
}

TEST_CASE("verifier: a broken plan also fails in constant evaluation, with the same sentence") {
  constexpr bool rejected = [] {
    const program p = chain();
    memory_plan m = plan_memory(p, bind(4));
    m.buffers[4].offset = 96;
    return verify(p, m).what == "tensor 'h' offset 96 is not 64-byte aligned";
  }();
  static_assert(rejected);
  // freeze() runs the verifier and keeps its sentence as the plan's failure.
  constexpr auto frozen = [] {
    const program p = chain();
    memory_plan m = plan_memory(p, bind(4));
    m.buffers[6].offset = 128;
    return freeze<8, 4>(p, m);
  }();
  CHECK(frozen.failure.view() == "tensors 'h' and 'y' share bytes in the activation arena while both are live");
  constexpr auto miscounted = [] {
    const program p = chain();
    return freeze<9, 4>(p, plan_memory(p, bind(4)));
  }();
  CHECK(miscounted.failure.view() == "the program's size differs from the size it was counted at");
}

// Any other reader of a laid-out cache would take its elements for row-major ones (checked at run time
// only: graph files; graph_builder::resolve_layouts).
TEST_CASE("a KV cache given to an op other than attention is refused") {
  CHECK(records(error_kind::bad_program,
                      "step 4 'reshape' reads 'cache.next', which step 3 'attention' reads as a key cache: its elements are in "
                      "that reader's order, not row-major",
                      [] {
                        graph_builder g;
                        const auto x = g.input({"x"}, dtype::f32, shape(sym(T), 8));
                        const auto cache = g.state({"cache"}, dtype::bf16, shape(1, sym(C), 8));
                        const auto values = g.state({"values"}, dtype::bf16, shape(1, sym(C), 8));
                        const auto k = g.apply(linear_no_work, {x, g.weight({"wk"}, dtype::bf16, shape(8, 8))}, {}, {"k"});
                        const auto kn = g.apply(ops::kv_write, {k, cache}, {}, {"cache.next"});
                        const auto vn = g.apply(ops::kv_write, {k, values}, {}, {"values.next"});
                        g.output("a", g.apply(ops::attention, {x, kn, vn}, {.i = {1, 0, 0, 0}}, {"a"}));
                        g.output("r", g.apply(ops::reshape, {kn}, {.i = {0, 0, 0, no_value}}, {"r"}));
                        return std::move(g).finish();
                      }));
}
