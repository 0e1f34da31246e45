// Run-time diagnostics of the spine: the cut-wire report (the step that cannot run, each input with
// its bound/missing status and expected vs actual shape, the producers of the inputs, the consumers
// of the result) and the errors of plan_for, the run-time pipeline for a config known only then.
#include <doctest/doctest.h>

#include <fused/graph/builder.hpp>
#include <fused/graph/cut_wire.hpp>
#include <fused/models/decoder_plan.hpp>
#include <fused/models/qwen2_presets.hpp>
#include <fused/ops.hpp>

#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

namespace {

using namespace fused;

// t0 ids [$1] -> t2 x = embed(ids, t1 embed.weight) -> t4 h = rms_norm(x, t3 norm.weight)
//   -> t6 y = linear(h, t5 w) (t7 y.work: its workspace) -> t8 z = add(x, y), the output.
program wired_chain() {
  graph_builder g;
  const auto ids = g.input({"ids"}, dtype::i32, shape(sym(1)));
  const auto x = g.apply(ops::embed, {ids, g.weight({"embed.weight"}, dtype::bf16, shape(16, 8))}, {}, {"x"});
  const auto h = g.apply(ops::rms_norm, {x, g.weight({"norm.weight"}, dtype::bf16, shape(8))}, {.f = 1e-6}, {"h"});
  const auto y = g.apply(ops::linear, {h, g.weight({"w"}, dtype::bf16, shape(8, 8))}, {}, {"y"});
  g.output("z", g.apply(ops::add, {x, y}, {}, {"z"}));
  return std::move(g).finish();
}

// Every feed bound, no actual shapes known.
std::vector<wire_state> all_bound(const program& p) {
  std::vector<wire_state> w(p.tensors.size());
  for (tensor_id t : p.feeds()) w[static_cast<std::size_t>(t)].bound = true;
  return w;
}

std::string error_of(const program& p, const std::vector<wire_state>& w) {
  try {
    check_wires(p, w);
  } catch (const graph_error& e) {
    return e.what();
  }
  return "";
}

}  // namespace

TEST_CASE("cut wire: a program with every feed bound runs") {
  const program p = wired_chain();
  REQUIRE(p.ok());
  CHECK_NOTHROW(check_wires(p, all_bound(p)));
}

TEST_CASE("cut wire: a missing weight names the step, both inputs, the producer and the consumers") {
  const program p = wired_chain();
  auto w = all_bound(p);
  w[5].bound = false;  // w
  CHECK(error_of(p, w) ==
        "cut wire at step 2 'linear' -> 'y' (schedule position 2, level 3)\n"
        "  input 0 #4 'h' (activation): computed, expected f32 [$1, 8]; produced by step 1 'rms_norm' -> 'h'\n"
        "  input 1 #5 'w' (weight): MISSING, expected bf16 [8, 8]; a feed\n"
        "  result consumed by: step 3 'add' -> 'z'");
}

TEST_CASE("cut wire: a weight of the wrong shape shows expected and actual") {
  const program p = wired_chain();
  auto w = all_bound(p);
  w[3].actual = shape(16);  // norm.weight
  CHECK(error_of(p, w) ==
        "cut wire at step 1 'rms_norm' -> 'h' (schedule position 1, level 2)\n"
        "  input 0 #2 'x' (activation): computed, expected f32 [$1, 8]; produced by step 0 'embed' -> 'x'\n"
        "  input 1 #3 'norm.weight' (weight): SHAPE MISMATCH, expected bf16 [8], actual [16]; a feed\n"
        "  result consumed by: step 2 'linear' -> 'y'");
}

TEST_CASE("cut wire: a missing input lists every consumer of the step's result") {
  const program p = wired_chain();
  auto w = all_bound(p);
  w[0].bound = false;       // ids
  w[1].actual = shape(16, 8);  // embed.weight: right shape, reported as bound
  CHECK(error_of(p, w) ==
        "cut wire at step 0 'embed' -> 'x' (schedule position 0, level 1)\n"
        "  input 0 #0 'ids' (input): MISSING, expected i32 [$1]; a feed\n"
        "  input 1 #1 'embed.weight' (weight): bound, expected bf16 [16, 8], actual [16, 8]; a feed\n"
        "  result consumed by: step 1 'rms_norm' -> 'h', step 3 'add' -> 'z'");
}

TEST_CASE("cut wire: the report of the last step says its result is a program output") {
  const program p = wired_chain();
  const auto w = all_bound(p);
  CHECK(cut_wire_report(p, 3, w) ==
        "cut wire at step 3 'add' -> 'z' (schedule position 3, level 4)\n"
        "  input 0 #2 'x' (activation): computed, expected f32 [$1, 8]; produced by step 0 'embed' -> 'x'\n"
        "  input 1 #6 'y' (activation): computed, expected f32 [$1, 8]; produced by step 2 'linear' -> 'y'\n"
        "  result consumed by: nothing (and a program output)");
}

TEST_CASE("cut wire: a runner that describes the wrong number of tensors") {
  const program p = wired_chain();
  const std::vector<wire_state> w(3);
  CHECK(error_of(p, w) == "cut wire: the runner describes 3 tensors, the program has 9");
}

TEST_CASE("cut wire: a missing weight deep inside Qwen2") {
  const program p = decoder::build_graph<fused::qwen2::family>(qwen2::presets::kjv_qwen2_4m::value);
  REQUIRE(p.ok());
  auto w = all_bound(p);
  tensor_id up = -1;
  for (const auto& t : p.tensors)
    if (t.name.str() == "model.layers.2.mlp.up_proj.weight") up = t.id;
  REQUIRE(up >= 0);
  w[static_cast<std::size_t>(up)].bound = false;
  const std::string r = error_of(p, w);
  CHECK(r.find("cut wire at step ") == 0);
  CHECK(r.find("'linear' -> 'layers.2.up'") != std::string::npos);
  CHECK(r.find("'layers.2.mlp_norm' (activation): computed, expected f32 [$1, 256]; produced by step ") != std::string::npos);
  CHECK(r.find("'model.layers.2.mlp.up_proj.weight' (weight): MISSING, expected bf16 [768, 256]; a feed") != std::string::npos);
  CHECK(r.find("result consumed by: step ") != std::string::npos);
  CHECK(r.find("'swiglu' -> 'layers.2.swiglu'") != std::string::npos);
}

TEST_CASE("plan_for: a mode the model cannot take is refused before planning") {
  const auto& c = qwen2::presets::kjv_qwen2_4m::value;  // max_position_embeddings 512
  CHECK_THROWS_WITH_AS(decoder::plan_for(fused::qwen2::entry, c, decoder::mode::prefill(32, 16)), "the KV capacity (16) must hold the prefill (32 tokens)",
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS(decoder::plan_for(fused::qwen2::entry, c, decoder::mode::decode(1024)), "the KV capacity 1024 exceeds max_position_embeddings 512",
                       std::invalid_argument);
  CHECK_THROWS_WITH_AS(decoder::plan_for(fused::qwen2::entry, c, decoder::mode::prefill(0, 16)), "a prefill must take at least one token",
                       std::invalid_argument);
  CHECK_NOTHROW(decoder::plan_for(fused::qwen2::entry, c, decoder::mode::prefill(512, 512)));
  CHECK_NOTHROW(decoder::plan_for(fused::qwen2::entry, c, decoder::mode::decode(512)));
}

TEST_CASE("plan_for: an invalid graph is a graph_error with the builder's sentence") {
  auto c = qwen2::presets::kjv_qwen2_4m::value;
  c.num_key_value_heads = 3;
  CHECK_THROWS_WITH_AS(decoder::plan_for(fused::qwen2::entry, c, decoder::mode::decode(64)),
                       "fused: shape mismatch: step 9 'attention' (layers.0.attn) input 1 'cache.layers.0.key.next': 8 query heads "
                       "cannot share 3 KV heads evenly [inputs: layers.0.q_rope, cache.layers.0.key.next, cache.layers.0.value.next]",
                       graph_error);
}

TEST_CASE("plan_for: the run-time plan is verified and matches the static one") {
  using plans = decoder::static_plans<qwen2::presets::kjv_qwen2_4m, 64, 256>;
  const auto r = decoder::plan_for(fused::qwen2::entry, qwen2::presets::kjv_qwen2_4m::value, decoder::mode::prefill(64, 256));
  CHECK(verify(r.prog, r.mem).ok);
  CHECK(r.mem.arena_bytes() == plans::prefill.arena_bytes());
  CHECK(r.mem.lower_bound == plans::prefill.lower_bound);
  REQUIRE(r.mem.buffers.size() == plans::prefill.buffers.size());
  for (std::size_t i = 0; i < r.mem.buffers.size(); ++i) CHECK(r.mem.buffers[i].offset == plans::prefill.buffers[i].offset);
}
