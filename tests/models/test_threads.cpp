// Thread safety as docs/RUNTIME.md states it: models share nothing mutable, so two models (of the
// same checkpoint or of different ones) used from two threads at once give, bit for bit, the logits
// each gives alone. The kernels' own OpenMP teams nest under each calling thread.
#include <doctest/doctest.h>

#include <string>
#include <thread>
#include <vector>

#include <fused/qwen2.hpp>

namespace {

struct run_result {
  std::vector<float> logits;  // prefill's, then each decode step's, concatenated
};

// Prefill 9 tokens, then 12 greedy decode steps, from a fresh model; `rounds` times over (reset
// between), so that the two threads overlap for a while.
run_result run_rounds(const std::string& name, int rounds) {
  const std::string dir = std::string(FUSED_TEST_DATA) + "/reference/" + name;
  const auto info = fused::decoder::load_hf_config(dir + "/config.json");
  fused::qwen2::model m(info.arch, 16, 32);
  const auto w = fused::runtime::weight_store::load(dir, m.tensors(), info.arch.tie_word_embeddings);
  m.bind(w);
  run_result r;
  for (int round = 0; round < rounds; ++round) {
    m.reset();
    r.logits.clear();
    const std::vector<std::int32_t> prompt = {1, 5, 9, 2, 7, 3, 11, 4, 6};
    auto logits = m.prefill(prompt);
    r.logits.insert(r.logits.end(), logits.begin(), logits.end());
    for (int step = 0; step < 12; ++step) {
      const auto next = static_cast<std::int32_t>(fk_argmax(logits.data(), logits.size()));
      logits = m.decode(next);
      r.logits.insert(r.logits.end(), logits.begin(), logits.end());
    }
  }
  return r;
}

}  // namespace

TEST_CASE("two models used from two threads at once give the logits each gives alone") {
  const run_result alone_a = run_rounds("tiny_a", 1), alone_mha = run_rounds("tiny_mha", 1);
  SUBCASE("different checkpoints") {
    run_result a, mha;
    std::thread ta([&] { a = run_rounds("tiny_a", 20); });
    std::thread tb([&] { mha = run_rounds("tiny_mha", 20); });
    ta.join();
    tb.join();
    CHECK(a.logits == alone_a.logits);
    CHECK(mha.logits == alone_mha.logits);
  }
  SUBCASE("the same checkpoint, one model per thread") {
    run_result first, second;
    std::thread ta([&] { first = run_rounds("tiny_a", 20); });
    std::thread tb([&] { second = run_rounds("tiny_a", 20); });
    ta.join();
    tb.join();
    CHECK(first.logits == alone_a.logits);
    CHECK(second.logits == alone_a.logits);
  }
}
