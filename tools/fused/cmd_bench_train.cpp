// `fused bench-train`: training throughput of a model's train step (f32, AdamW, packed batch), in
// tokens per second, median over timed steps after one warm-up step, on 1 and on all threads in one
// run (docs/TRAINING.md, "Speed"). The tokens are seeded random ids: a step's work does not depend on them.
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include <fused/models/decoder_train.hpp>
#include <fused/models/hf_config.hpp>

#include "bench_util.hpp"
#include "cli.hpp"
#include "train_flags.hpp"

namespace fused::cli::cmd_bench_train {

struct options {
  std::string model_dir;
  long long sequence = 256, batch = 8, steps = 5, threads = 0;
};

int run_bench_train(const options& o) {
  const fused::decoder::hf_model_info info = fused::decoder::load_hf_model_info(o.model_dir);
  fused::cli::check_train_shape(info.arch, {.batch = o.batch, .micro_batches = 1, .tokens = o.sequence, .sequence = "--seq " + std::to_string(o.sequence)});
  fused::decoder::trainer t(*info.family, info.arch, {.sequences = o.batch, .tokens = o.sequence});
  t.load(fused::runtime::weight_store::load(o.model_dir, t.checkpoint_tensors(), info.arch.tie_word_embeddings));
  std::vector<std::int32_t> ids(static_cast<std::size_t>(o.batch * o.sequence));
  std::uint32_t s = 12345;
  for (auto& id : ids) id = static_cast<std::int32_t>(((s = s * 1664525u + 1013904223u) >> 8) % static_cast<std::uint32_t>(info.arch.vocab_size));
  const int all = o.threads > 0 ? static_cast<int>(o.threads) : fk_get_threads();
  std::printf("fused bench-train: %s, %lld x %lld tokens a step, f32 AdamW, %s path\n", o.model_dir.c_str(), o.batch, o.sequence,
              fk_isa_name(fk_isa_active()));
  double one = 0;
  for (const int n : all > 1 ? std::vector<int>{1, all} : std::vector<int>{1}) {
    fk_set_threads(n);
    t.step(ids, 1e-4f);  // warm-up: pages touched, caches filled
    std::vector<double> tok_s;
    for (long long k = 0; k < o.steps; ++k) {
      const double sec = fused::bench::seconds([&] { fused::bench::g_sink = t.step(ids, 1e-4f); });
      tok_s.push_back(static_cast<double>(ids.size()) / sec);
    }
    const double med = fused::bench::median(tok_s);
    if (n == 1) one = med;
    std::printf("threads %2d  median %8.0f tok/s  (min %.0f, max %.0f, %lld steps)%s\n", n, med, *std::min_element(tok_s.begin(), tok_s.end()),
                *std::max_element(tok_s.begin(), tok_s.end()), o.steps, n > 1 ? ("  x" + std::to_string(med / one).substr(0, 4) + " of 1 thread").c_str() : "");
  }
  return 0;
}

const fused::cli::command bench_train_cmd{
    "bench-train", "training throughput (tok/s) of a model's train step on 1 and on all threads", [](CLI::App& app) -> fused::cli::runner {
      auto o = std::make_shared<options>();
      app.add_option("-m,--model", o->model_dir, "a Hugging Face model directory")->check(fused::cli::not_empty("give a model directory"))->required();
      app.add_option("--seq", o->sequence, "tokens per sequence")->transform(fused::cli::integer_in(2, 1 << 16));
      app.add_option("--batch", o->batch, "sequences per step")->transform(fused::cli::integer_in(1, 4096));
      app.add_option("--steps", o->steps, "timed steps per thread count (after one warm-up step)")->transform(fused::cli::integer_in(1, 1000));
      app.add_option("-t,--threads", o->threads, "the larger thread count; 0 = all cores")->transform(fused::cli::integer_in(0, 1024));
      return [o] { return run_bench_train(*o); };
    }};

}  // namespace fused::cli::cmd_bench_train
