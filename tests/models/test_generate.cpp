// Generation as one program (models/decoder_generate.hpp): the program's ids equal the session's
// greedy loop (what `fused run --temp 0` runs) for every family's reference model, with and without
// a stop id met, for one token and for many; its plan is verified and its arena does not grow with
// the number of tokens.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstring>
#include <string>
#include <vector>

#include <fused/ir/plan.hpp>
#include <fused/models/decoder_generate.hpp>
#include <fused/models/decoder_model.hpp>
#include <fused/models/hf_config.hpp>
#include <fused/runtime/execute.hpp>
#include <fused/runtime/weights.hpp>

namespace {

namespace dec = fused::decoder;

struct loaded {
  std::string dir;
  dec::hf_model_info info;
  std::vector<std::int32_t> prompt;  // the reference's input_ids
};

loaded load_prompt(const std::string& name) {
  loaded l{std::string(FUSED_TEST_DATA) + "/reference/" + name, {}, {}};
  l.info = dec::load_hf_config(l.dir + "/config.json");
  const auto ref = fused::io::safetensors_file::open(l.dir + "/reference.safetensors");
  for (auto v : fused::io::to_i64_owned(*ref.find("input_ids"))) l.prompt.push_back(static_cast<std::int32_t>(v));
  return l;
}

constexpr std::int64_t ctx = 128;

// The session's greedy loop, as cmd_run.cpp runs it at --temp 0.
std::vector<std::int32_t> session_ids(const loaded& l, std::int64_t n, const std::vector<int>& stops) {
  dec::model m(*l.info.family, l.info.arch, static_cast<std::int64_t>(l.prompt.size()), ctx);
  const auto w = fused::runtime::weight_store::load(l.dir, m.tensors(), l.info.arch.tie_word_embeddings);
  m.bind(w);
  std::span<const float> logits = m.prefill(l.prompt);
  std::vector<std::int32_t> out;
  for (std::int64_t i = 0; i < n; ++i) {
    const auto next = static_cast<std::int32_t>(fk_argmax(logits.data(), logits.size()));
    if (std::find(stops.begin(), stops.end(), next) != stops.end()) break;
    out.push_back(next);
    if (i + 1 == n) break;
    logits = m.decode(next);
  }
  return out;
}

struct generated {
  std::vector<std::int32_t> ids;
  std::int64_t arena = 0;
  std::int32_t positions = 0;  // what the KV cache holds afterwards
};

generated program_ids(const loaded& l, std::int64_t n, const std::vector<int>& stops) {
  const dec::generation_program g = dec::generation(*l.info.family, l.info.arch, {.max_new_tokens = n, .stop_ids = stops});
  const fused::program& p = g.prog;
  fused::binding b{};
  b.value[dec::sym_tokens] = static_cast<std::int64_t>(l.prompt.size());
  b.value[dec::sym_ctx] = ctx;
  const fused::memory_plan mem = fused::ir::plan(p, b);  // verified
  const std::vector<fused::wire_state> wires(p.tensors.size(), fused::wire_state{.bound = true});
  const std::vector<fused::runtime::call> calls = fused::runtime::lower_all(p, mem, wires);
  const auto w = fused::runtime::weight_store::load(l.dir, p.tensors, l.info.arch.tie_word_embeddings);
  fused::runtime::aligned_bytes state(static_cast<std::size_t>(mem.region_bytes[static_cast<int>(fused::region::state)]));
  fused::runtime::aligned_bytes arena(static_cast<std::size_t>(mem.arena_bytes()));
  std::memset(state.data(), 0, state.size());
  const fused::runtime::regions r{w.table(), state.data(), arena.data()};
  auto bytes_of = [&](fused::tensor_id t) {
    const fused::buffer& f = mem.of(t);
    return (f.where == fused::region::state ? r.state : r.arena) + f.offset;
  };
  for (const fused::tensor_info& t : p.tensors)
    if (t.kind == fused::role::input) std::memcpy(bytes_of(t.id), l.prompt.data(), l.prompt.size() * sizeof(std::int32_t));
  fused::runtime::execute(p, mem, calls, r, b);
  const auto* ids = reinterpret_cast<const std::int32_t*>(bytes_of(p.output("generated")));
  const std::int32_t count = *reinterpret_cast<const std::int32_t*>(bytes_of(p.output("generated_count")));
  REQUIRE(count >= 0);
  REQUIRE(count <= n);
  for (std::int64_t i = count; i < n; ++i) CHECK(ids[i] == -1);  // the unused entries
  const std::int32_t positions = *reinterpret_cast<const std::int32_t*>(bytes_of(p.output("positions")));
  return {std::vector<std::int32_t>(ids, ids + count), mem.arena_bytes(), positions};
}

void check_family(const std::string& name) {
  const loaded l = load_prompt(name);
  const std::vector<int> eos = l.info.eos_token_ids;
  for (const std::int64_t n : {1, 2, 12}) {
    CAPTURE(n);
    const std::vector<std::int32_t> want = session_ids(l, n, eos);
    CHECK(program_ids(l, n, eos).ids == want);
  }
  // A stop id met: the third token of the free run stops it after two (ids before a stop repeat
  // only if the stop was met earlier, which the session's run tells).
  const std::vector<std::int32_t> free_run = session_ids(l, 8, {});
  REQUIRE(free_run.size() == 8);
  const std::vector<int> stop{free_run[2]};
  const std::vector<std::int32_t> want = session_ids(l, 8, stop);
  CHECK(want.size() < 3);
  const generated stopped = program_ids(l, 8, stop);
  CHECK(stopped.ids == want);
  // The KV cache then holds the prompt and every stored token (each was fed back); run to the end,
  // all but the last.
  const auto prompt = static_cast<std::int32_t>(l.prompt.size());
  CHECK(stopped.positions == prompt + static_cast<std::int32_t>(want.size()));
  CHECK(program_ids(l, 8, {}).positions == prompt + 7);
  // A stop met by the first token: nothing generated.
  CHECK(program_ids(l, 8, {free_run[0]}).ids.empty());
  // The arena holds one trip, whatever the number of trips: 40 tokens cost only their ids buffer
  // (i32 [40], 192 bytes once aligned) more than 2.
  CHECK(program_ids(l, 40, eos).arena <= program_ids(l, 2, eos).arena + 192);
}

}  // namespace

TEST_CASE("generation as one program: tiny_a (Qwen2) gives the session's greedy ids") { check_family("tiny_a"); }
TEST_CASE("generation as one program: tiny_llama (llama3 RoPE) gives the session's greedy ids") { check_family("tiny_llama"); }
TEST_CASE("generation as one program: tiny_qwen3 (q/k norm) gives the session's greedy ids") { check_family("tiny_qwen3"); }

TEST_CASE("generation as one program: bounds are refused with a sentence") {
  const loaded l = load_prompt("tiny_a");
  CHECK_THROWS_WITH_AS(dec::generation(*l.info.family, l.info.arch, {.max_new_tokens = 0, .stop_ids = {}}), doctest::Contains("1 .. 2^31-1"), fused::graph_error);
  CHECK_THROWS_WITH_AS(dec::generation(*l.info.family, l.info.arch, {.max_new_tokens = 4, .stop_ids = {1, 2, 3, 4, 5}}),
                       doctest::Contains("at most 4 stop ids"), fused::graph_error);
}
