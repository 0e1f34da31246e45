// Sessions as docs/RUNTIME.md states them: a model's further sessions (open_session over
// caller-owned KV caches) share its weights and arena, and interleaved calls on them give, bit for
// bit, what each conversation gives alone; rewind keeps a prefix of the cache and the calls after it
// give what a fresh prefill of the same ids gives.
#include <doctest/doctest.h>

#include <string>
#include <vector>

#include <fused/qwen2.hpp>

namespace {

std::vector<float> copy(std::span<const float> s) { return {s.begin(), s.end()}; }

struct tiny_a {
  std::string dir = std::string(FUSED_TEST_DATA) + "/reference/tiny_a";
  fused::decoder::hf_model_info info = fused::decoder::load_hf_config(dir + "/config.json");
  fused::qwen2::model m{info.arch, 16, 32};
  fused::runtime::weight_store w = fused::runtime::weight_store::load(dir, m.tensors(), info.arch.tie_word_embeddings);
  tiny_a() { m.bind(w); }
};

// Prefill then 6 greedy steps in a fresh conversation of the model's own session.
std::vector<std::vector<float>> alone(fused::qwen2::model& m, const std::vector<std::int32_t>& prompt) {
  m.reset();
  std::vector<std::vector<float>> out{copy(m.prefill(prompt))};
  for (int step = 0; step < 6; ++step) out.push_back(copy(m.decode(static_cast<std::int32_t>(fk_argmax(out.back().data(), out.back().size())))));
  return out;
}

}  // namespace

TEST_CASE("interleaved sessions give what each conversation gives alone") {
  tiny_a t;
  const std::vector<std::int32_t> a = {1, 5, 9, 2, 7}, b = {4, 4, 8, 3, 12, 6, 2};
  const auto want_a = alone(t.m, a), want_b = alone(t.m, b);
  fused::runtime::aligned_bytes state(static_cast<std::size_t>(t.m.state_bytes()) * 2);
  const auto each = static_cast<std::size_t>(t.m.state_bytes());
  fused::runtime::session sa = t.m.open_session({state.data(), each}), sb = t.m.open_session({state.data() + each, each});
  std::vector<std::vector<float>> got_a{copy(t.m.prefill(sa, a))}, got_b{copy(t.m.prefill(sb, b))};
  for (int step = 0; step < 6; ++step) {
    got_a.push_back(copy(t.m.decode(sa, static_cast<std::int32_t>(fk_argmax(got_a.back().data(), got_a.back().size())))));
    got_b.push_back(copy(t.m.decode(sb, static_cast<std::int32_t>(fk_argmax(got_b.back().data(), got_b.back().size())))));
  }
  CHECK(got_a == want_a);
  CHECK(got_b == want_b);
  CHECK(sa.position() == 5 + 6);
  CHECK_THROWS_WITH_AS(t.m.open_session({state.data() + 1, each}), "open_session: the state region must be 64-byte aligned", std::invalid_argument);
  CHECK_THROWS_AS(t.m.open_session({state.data(), each - 64}), std::invalid_argument);
}

TEST_CASE("rewind keeps a prefix of the cache: what follows equals a fresh prefill") {
  tiny_a t;
  const std::vector<std::int32_t> first = {1, 5, 9, 2, 7, 3}, second = {1, 5, 9, 8, 8, 10, 2};
  t.m.reset();
  t.m.prefill(first);
  t.m.decode(4);
  fused::runtime::aligned_bytes state(static_cast<std::size_t>(t.m.state_bytes()));
  fused::runtime::session s = t.m.open_session({state.data(), state.size()});
  t.m.prefill(s, first);
  s.rewind(3);  // keeps {1, 5, 9}
  const auto rest = copy(t.m.prefill(s, std::span(second).subspan(3)));
  t.m.reset();
  CHECK(rest == copy(t.m.prefill(second)));
  CHECK_THROWS_AS(s.rewind(s.position() + 1), std::out_of_range);
}
