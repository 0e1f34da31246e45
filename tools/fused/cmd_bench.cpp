// `fused bench --config FILE --synthetic [--prompt 512] [--gen 64] [--threads N] [--reps 3] [--format text|json]`
//
// Builds deterministic synthetic weights of the config's shape (one blob laid out as the plan's
// weights region) and times prefill of --prompt tokens and decode of --gen tokens after it, on the
// run-time model and — when the config is one this binary holds a static model of (Qwen2-0.5B) — on
// the static model too, repetitions interleaved so both see the same machine. Figures are medians.
//
// The decode ceiling: decode must read every weight once per token (the tied embedding as the lm head)
// plus the KV cache so far, so ceiling tok/s = read bandwidth / those bytes. The read bandwidth is a
// streaming SIMD sum over the weights blob itself (bigger than the LLC for real models), measured
// between the repetitions with the same threads.
#include <sys/resource.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <fused/qwen2.hpp>

#include "bench_util.hpp"
#include "cli.hpp"

namespace {

using namespace fused::bench;

using static_0_5b = fused::qwen2::static_model<fused::qwen2::presets::qwen2_0_5b, 512, 4096>;

struct figures {
  std::vector<double> prefill, decode;  // tok/s per repetition
};

// One repetition: reset, prefill the prompt, then decode `gen` tokens greedily.
template <class Model>
void one_rep(Model& m, const std::vector<std::int32_t>& prompt, long long gen, figures& f) {
  m.reset();
  double t = seconds([&] { (void)m.prefill(prompt); });
  f.prefill.push_back(static_cast<double>(prompt.size()) / t);
  std::int32_t next = 1;
  t = seconds([&] {
    for (long long i = 0; i < gen; ++i) {
      const auto logits = m.decode(next);
      next = static_cast<std::int32_t>(fk_argmax(logits.data(), logits.size()));
    }
  });
  f.decode.push_back(static_cast<double>(gen) / t);
}

long peak_rss_bytes() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return u.ru_maxrss * 1024L;
}

const fused::cli::command bench_cmd{
    "bench", "model speed: --config FILE --synthetic [--prompt 512] [--gen 64] [--threads N] [--reps 3] [--format text|json]",
    [](const std::vector<std::string>& a) {
      fused::cli::args_reader args(a);
      const std::string config_path = args.required("--config");
      if (!args.flag("--synthetic")) throw fused::cli::usage_error("--synthetic is required (benchmarks run on synthetic weights of the config's shape)");
      const long long P = args.int_or("--prompt", 512, 1, 1 << 20);
      const long long G = args.int_or("--gen", 64, 1, 1 << 20);
      const int reps = static_cast<int>(args.int_or("--reps", 3, 1, 1000));
      const int threads = static_cast<int>(args.int_or("--threads", fk_get_threads(), 1, 1024));
      const std::string format = args.value_or("--format", "text");
      const bool no_static = args.flag("--no-static");
      args.finish();
      if (format != "text" && format != "json") throw fused::cli::usage_error("--format must be text or json");
      fk_set_threads(threads);

      const fused::qwen2::config cfg = fused::io::load_hf_config(config_path).arch;
      const long long ctx = P + G;
      if (ctx > cfg.max_position_embeddings)
        throw fused::cli::usage_error("--prompt + --gen = " + std::to_string(ctx) + " exceeds max_position_embeddings " +
                                      std::to_string(cfg.max_position_embeddings));
      fused::qwen2::model rt(cfg, std::min<long long>(P, 512), ctx);
      const auto& plan = rt.prefill_plan();
      const auto weights = fused::runtime::weight_store::synthetic(plan.prog.tensors, plan.mem.buffers, rt.weights_bytes(), 1);
      rt.bind(weights);

      std::unique_ptr<static_0_5b> st;
      const bool use_static = !no_static && fused::io::config_differences(static_0_5b::cfg, cfg).empty() && ctx <= static_0_5b::capacity;
      if (use_static) st = std::make_unique<static_0_5b>(weights);

      std::vector<std::int32_t> prompt(static_cast<std::size_t>(P));
      std::uint64_t s = 12345;
      for (auto& id : prompt) {
        s = s * 6364136223846793005ull + 1442695040888963407ull;
        id = static_cast<std::int32_t>((s >> 33) % static_cast<std::uint64_t>(cfg.vocab_size));
      }

      // The weights blob doubles as the bandwidth buffer.
      const auto* blob = reinterpret_cast<const float*>(weights.blob().data());
      const auto blob_floats = weights.blob().size() / 4;
      read_bandwidth(blob, blob_floats, threads);  // warm-up
      figures fs, fr;
      std::vector<double> bw;
      one_rep(rt, prompt, std::min<long long>(G, 4), fr);  // warm-up (page faults, thread pool)
      fr = {};
      for (int r = 0; r < reps; ++r) {
        bw.push_back(read_bandwidth(blob, blob_floats, threads));
        if (st) one_rep(*st, prompt, G, fs);
        one_rep(rt, prompt, G, fr);
      }
      const double bandwidth = median(bw);
      // Bytes decode reads per token: all weights but the embedding gather (one row) — with tied
      // embeddings the table is read once as the lm head — plus the KV cache at the mean position.
      const double kv_per_pos = 2.0 * cfg.num_hidden_layers * cfg.num_key_value_heads * cfg.head_dim * 2;
      const double bytes_per_token = static_cast<double>(rt.weights_bytes()) -
                                     (cfg.tie_word_embeddings ? 0.0 : static_cast<double>(cfg.vocab_size * cfg.hidden_size * 2)) +
                                     kv_per_pos * (static_cast<double>(P) + static_cast<double>(G) / 2);
      const double ceiling = bandwidth * 1e9 / bytes_per_token;
      const figures& main = st ? fs : fr;
      const double pre = median(main.prefill), dec = median(main.decode);
      const long rss = peak_rss_bytes();

      if (format == "json") {
        std::printf("{\"prefill_tok_s\":%.4g,\"decode_tok_s\":%.4g,\"peak_rss_bytes\":%ld,\"bandwidth_gb_s\":%.4g,\"decode_ceiling_tok_s\":%.4g,"
                    "\"threads\":%d,\"path\":\"%s\",\"isa\":\"%s\",\"prompt\":%lld,\"gen\":%lld,\"reps\":%d,\"weights_bytes\":%lld,"
                    "\"runtime\":{\"prefill_tok_s\":%.4g,\"decode_tok_s\":%.4g}",
                    pre, dec, rss, bandwidth, ceiling, threads, st ? "static" : "runtime", fk_isa_name(fk_isa_active()), P, G, reps,
                    static_cast<long long>(rt.weights_bytes()), median(fr.prefill), median(fr.decode));
        if (st) std::printf(",\"static\":{\"prefill_tok_s\":%.4g,\"decode_tok_s\":%.4g}", median(fs.prefill), median(fs.decode));
        std::printf("}\n");
        return 0;
      }
      std::printf("fused bench: %s (%d layers, hidden %lld, vocab %lld), synthetic bf16 weights %.1f MB, %s, %d thread%s, %d reps\n",
                  config_path.c_str(), cfg.num_hidden_layers, static_cast<long long>(cfg.hidden_size), static_cast<long long>(cfg.vocab_size),
                  static_cast<double>(rt.weights_bytes()) / 1e6, fk_isa_name(fk_isa_active()), threads, threads == 1 ? "" : "s", reps);
      std::printf("%-10s %16s %16s %18s\n", "model", "prefill tok/s", "decode tok/s", "decode / ceiling");
      if (st) std::printf("%-10s %16.1f %16.2f %18.2f\n", "static", median(fs.prefill), median(fs.decode), median(fs.decode) / ceiling);
      std::printf("%-10s %16.1f %16.2f %18.2f\n", "run-time", median(fr.prefill), median(fr.decode), median(fr.decode) / ceiling);
      if (st)
        std::printf("static / run-time: prefill %.3f, decode %.3f\n", median(fs.prefill) / median(fr.prefill), median(fs.decode) / median(fr.decode));
      std::printf("prompt %lld tokens, then %lld decoded; read bandwidth %.2f GB/s -> decode ceiling %.2f tok/s (%.1f MB per token)\n", P, G,
                  bandwidth, ceiling, bytes_per_token / 1e6);
      std::printf("peak RSS %.1f MB\n", static_cast<double>(rss) / 1e6);
      return 0;
    }};

}  // namespace
