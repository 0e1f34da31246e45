// `fused bench (--config FILE --synthetic | --model DIR) [--prompt 512] [--gen 64] [--threads N] [--reps 3]
//              [--format text|json|md]`
//
// Times prefill of --prompt tokens and decode of --gen tokens after it, on the run-time model and —
// when the config is one this binary holds a static model of (Qwen2-0.5B) — on the static model too,
// repetitions interleaved so both see the same machine. The weights are a real checkpoint (--model)
// or deterministic synthetic ones of the config's shape (--synthetic: one blob laid out as the plan's
// weights region). Each figure is reported as min / median / max over the repetitions.
//
// The decode ceiling: decode must read every weight once per token (the tied embedding as the lm head)
// plus the KV cache so far, so ceiling tok/s = read bandwidth / those bytes. The read bandwidth is a
// streaming SIMD sum over a buffer the size of the weights (bigger than the LLC for real models; the
// synthetic blob itself), measured between the repetitions with the same threads.
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include <fused/qwen2.hpp>
#include <fused/version.hpp>

#include "bench_util.hpp"
#include "cli.hpp"
#include "progress.hpp"

namespace fused::cli::cmd_bench {

using namespace fused::bench;

#ifndef FUSED_NO_STATIC_BENCH  // (the sanitizer build of CI leaves it out: the tool's longest compile there)
using static_0_5b = fused::qwen2::static_model<fused::qwen2::presets::qwen2_0_5b, 512, 4096>;
#endif

struct figures {
  std::vector<double> prefill, decode;  // tok/s per repetition
};

struct spread {
  double min, median, max;
};
spread spread_of(const std::vector<double>& v) {
  return {*std::min_element(v.begin(), v.end()), median(v), *std::max_element(v.begin(), v.end())};
}

// One repetition: reset, prefill the prompt, then decode `gen` tokens greedily.
template <class Model>
void one_rep(Model& m, const std::vector<std::int32_t>& prompt, long long gen, figures& f) {
  m.reset();
  double t = seconds([&] { (void)m.prefill(prompt); });
  f.prefill.push_back(static_cast<double>(prompt.size()) / t);
  std::int32_t next = prompt.back();  // any id of the vocabulary (a config may have one token)
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

struct options {
  std::string config, model_dir, format = "text";
  bool synthetic = false, no_static = false;
  long long prompt = 512, gen = 64, reps = 3, threads = 0;
  bool prompt_given = false, gen_given = false;  // on the command line, not the defaults
};

nlohmann::ordered_json spread_json(const spread& s) { return {{"min", s.min}, {"median", s.median}, {"max", s.max}}; }

int run_bench(const options& o) {
  if (o.model_dir.empty() == o.config.empty()) throw fused::cli::usage_error("give one of --model DIR or --config FILE --synthetic");
  if (!o.config.empty() && !o.synthetic)
    throw fused::cli::usage_error("--config needs --synthetic (weights of the config's shape); to time a checkpoint, use --model DIR");
  if (!o.model_dir.empty() && o.synthetic) throw fused::cli::usage_error("--synthetic goes with --config, not with --model (which has its weights)");
  const int threads = o.threads > 0 ? static_cast<int>(o.threads) : fk_get_threads();
  fk_set_threads(threads);
  long long P = o.prompt, G = o.gen;
  const int reps = static_cast<int>(o.reps);

  const std::string source = o.model_dir.empty() ? o.config : o.model_dir;
  const fused::decoder::hf_model_info info = o.model_dir.empty() ? fused::decoder::load_hf_config(o.config) : fused::decoder::load_hf_model_info(o.model_dir);
  const fused::decoder::config& cfg = info.arch;
  // A default the model's context cannot hold gives way (the default model's is 512 positions); a
  // length the user gave does not.
  const long long maxpos = cfg.max_position_embeddings;
  if (P + G > maxpos && !o.prompt_given && maxpos - G >= 1) P = maxpos - G;
  if (P + G > maxpos && !o.gen_given && maxpos - P >= 1) G = maxpos - P;
  if (P + G != o.prompt + o.gen)
    std::fprintf(stderr, "fused bench: a prompt of %lld tokens and %lld decoded (%lld + %lld exceed max_position_embeddings %lld of %s)\n", P,
                 G, o.prompt, o.gen, maxpos, source.c_str());
  const long long ctx = P + G;
  if (ctx > maxpos)
    throw fused::cli::usage_error("--prompt + --gen = " + std::to_string(P) + " + " + std::to_string(G) + " exceeds max_position_embeddings " +
                                  std::to_string(maxpos) + " of " + source);
  fused::decoder::model rt(*info.family, cfg, std::min<long long>(P, 512), ctx);
  const auto& plan = rt.prefill_plan();
  // Synthetic weights are made in memory: a config that needs more than the machine has is named,
  // not answered with std::bad_alloc (or the OOM killer) partway through.
  if (o.synthetic) fused::cli::require_memory(source + ": its bf16 weights", static_cast<double>(rt.weights_bytes()));
  fused::cli::progress load_bar("loading weights", "MB", 0);
  const auto weights = o.synthetic ? fused::runtime::weight_store::synthetic(plan.prog.tensors, plan.mem.buffers, rt.weights_bytes(), 1)
                                   : fused::runtime::weight_store::load(o.model_dir, rt.tensors(), cfg.tie_word_embeddings,
                                                                        fused::cli::weights_progress(load_bar));
  load_bar.finish();
  rt.bind(weights);

#ifndef FUSED_NO_STATIC_BENCH
  std::unique_ptr<static_0_5b> st;
  const bool use_static = !o.no_static && fused::decoder::is_model_of<fused::qwen2::presets::qwen2_0_5b>(info) && ctx <= static_0_5b::capacity;
  if (use_static) st = std::make_unique<static_0_5b>(weights);
#else
  std::unique_ptr<fused::decoder::model> st;  // never set: this build has no static model
#endif

  std::vector<std::int32_t> prompt(static_cast<std::size_t>(P));
  std::uint64_t s = 12345;
  for (auto& id : prompt) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    id = static_cast<std::int32_t>((s >> 33) % static_cast<std::uint64_t>(cfg.vocab_size));
  }

  // The synthetic blob doubles as the bandwidth buffer; a checkpoint's tensors are mapped file pages
  // in no one block, so a buffer of the same size stands in for them.
  fused::runtime::aligned_bytes own;
  std::span<const std::byte> buffer = weights.blob();
  if (buffer.empty()) {
    own = fused::runtime::aligned_bytes(static_cast<std::size_t>(std::max<std::int64_t>(rt.weights_bytes(), std::int64_t{64} << 20)) & ~std::size_t{63});
    std::fill(own.data(), own.data() + own.size(), std::byte{0x3f});
    buffer = {own.data(), own.size()};
  }
  const auto* blob = reinterpret_cast<const float*>(buffer.data());
  const auto blob_floats = buffer.size() / 4;
  read_bandwidth(blob, blob_floats, threads);  // warm-up
  figures fs, fr;
  std::vector<double> bw;
  one_rep(rt, prompt, std::min<long long>(G, 4), fr);  // warm-up (page faults, thread pool)
  fr = {};
  {
    fused::cli::progress bar("bench", "repetitions", reps);
    for (int r = 0; r < reps; ++r) {
      bw.push_back(read_bandwidth(blob, blob_floats, threads));
      if (st) one_rep(*st, prompt, G, fs);
      one_rep(rt, prompt, G, fr);
      bar.update(r + 1);
    }
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
  const spread pre = spread_of(main.prefill), dec = spread_of(main.decode);
  const spread rt_pre = spread_of(fr.prefill), rt_dec = spread_of(fr.decode);
  const long rss = peak_rss_bytes();
  const char* isa = fk_isa_name(fk_isa_active());
  const std::string weights_kind = o.synthetic ? "synthetic" : "checkpoint";

  if (o.format == "json") {
    nlohmann::ordered_json j;
    j["prefill_tok_s"] = pre.median;  // the headline figures: medians of the static model where there is one
    j["decode_tok_s"] = dec.median;
    j["decode_ceiling_tok_s"] = ceiling;
    j["decode_over_ceiling"] = dec.median / ceiling;
    j["prefill"] = spread_json(pre);
    j["decode"] = spread_json(dec);
    j["bandwidth_gb_s"] = bandwidth;
    j["peak_rss_bytes"] = rss;
    j["model"] = source;
    j["weights"] = weights_kind;
    j["weights_bytes"] = rt.weights_bytes();
    j["threads"] = threads;
    j["path"] = st ? "static" : "runtime";
    j["isa"] = isa;
    j["prompt"] = P;
    j["gen"] = G;
    j["reps"] = reps;
    j["fused_version"] = FUSED_VERSION_STRING;
    j["runtime"] = {{"prefill_tok_s", rt_pre.median}, {"decode_tok_s", rt_dec.median}, {"prefill", spread_json(rt_pre)}, {"decode", spread_json(rt_dec)}};
    if (st) j["static"] = {{"prefill_tok_s", pre.median}, {"decode_tok_s", dec.median}, {"prefill", spread_json(pre)}, {"decode", spread_json(dec)}};
    std::printf("%s\n", fused::json_text::dump(j, 2).c_str());
    return 0;
  }
  if (o.format == "md") {  // as llama-bench -o md: one row per model and test
    // "dir/" names the directory too: lexically_normal keeps a trailing separator, so strip it
    std::filesystem::path where = std::filesystem::path(source).lexically_normal();
    if (where.filename().empty()) where = where.parent_path();
    const std::string name = where.filename().string();
    std::printf("| model | weights | isa | threads | test | tok/s (median) | min | max | / ceiling |\n");
    std::printf("|---|---|---|--:|---|--:|--:|--:|--:|\n");
    const auto row = [&](const char* model, const char* test, const spread& sp, double over) {
      std::printf("| %s %s | %s | %s | %d | %s | %.2f | %.2f | %.2f | %s |\n", name.c_str(), model,
                  weights_kind.c_str(), isa, threads, test, sp.median, sp.min, sp.max, over > 0 ? fmt::format("{:.2f}", over).c_str() : "");
    };
    const std::string pp = "pp" + std::to_string(P), tg = "tg" + std::to_string(G);
    if (st) {
      row("static", pp.c_str(), pre, 0);
      row("static", tg.c_str(), dec, dec.median / ceiling);
    }
    row("run-time", pp.c_str(), rt_pre, 0);
    row("run-time", tg.c_str(), rt_dec, rt_dec.median / ceiling);
    std::printf("\nread bandwidth %.2f GB/s, decode ceiling %.2f tok/s; %d reps; fused %s\n", bandwidth, ceiling, reps, FUSED_VERSION_STRING);
    return 0;
  }
  std::printf("fused bench: %s (%d layers, hidden %lld, vocab %lld), %s bf16 weights %.1f MB, %s, %d thread%s, %d reps\n", source.c_str(),
              cfg.num_hidden_layers, static_cast<long long>(cfg.hidden_size), static_cast<long long>(cfg.vocab_size), weights_kind.c_str(),
              static_cast<double>(rt.weights_bytes()) / 1e6, isa, threads, threads == 1 ? "" : "s", reps);
  std::printf("%-10s %28s %28s %18s\n", "model", "prefill tok/s (min med max)", "decode tok/s (min med max)", "decode / ceiling");
  const auto line = [&](const char* model, const spread& p, const spread& d) {
    std::printf("%-10s %8.1f %9.1f %9.1f %8.2f %9.2f %9.2f %18.2f\n", model, p.min, p.median, p.max, d.min, d.median, d.max, d.median / ceiling);
  };
  if (st) line("static", pre, dec);
  line("run-time", rt_pre, rt_dec);
  if (st) std::printf("static / run-time (medians): prefill %.3f, decode %.3f\n", pre.median / rt_pre.median, dec.median / rt_dec.median);
  std::printf("prompt %lld tokens, then %lld decoded; read bandwidth %.2f GB/s -> decode ceiling %.2f tok/s (%.1f MB per token)\n", P, G,
              bandwidth, ceiling, bytes_per_token / 1e6);
  std::printf("peak RSS %.1f MB\n", static_cast<double>(rss) / 1e6);
  return 0;
}

const fused::cli::command bench_cmd{
    "bench", "prefill and decode speed of a model against this machine's decode ceiling", [](CLI::App& app) -> fused::cli::runner {
      auto o = std::make_shared<options>();
      using fused::cli::integer_in;
      app.add_option("--config", o->config, "a config.json (or a model directory's) to time with --synthetic weights");
      app.add_flag("--synthetic", o->synthetic, "deterministic synthetic bf16 weights of the config's shape");
      app.add_option("-m,--model", o->model_dir, "a Hugging Face model directory: time its real weights")->check(fused::cli::not_empty("give a model directory"));
      auto* prompt = app.add_option("-p,--prompt", o->prompt, "prompt tokens to prefill (default 512, fewer where the model's context needs)")
                         ->transform(integer_in(1, 1 << 20));
      auto* gen = app.add_option("-n,--gen", o->gen, "tokens to decode after the prompt")->transform(integer_in(1, 1 << 20));
      app.add_option("-r,--reps", o->reps, "repetitions (min, median and max are reported)")->transform(integer_in(1, 1000));
      app.add_option("-t,--threads", o->threads, "threads; 0 = all cores")->transform(integer_in(0, 1024));
      app.add_option("-o,--format", o->format, "text, json, or md (a markdown table, as llama-bench -o md)")->check(fused::cli::one_of({"text", "json", "md"}));
      app.add_flag("--no-static", o->no_static, "time the run-time model only, even for a config this binary has a static model of");
      return [o, prompt, gen] {
        o->prompt_given = prompt->count() > 0;
        o->gen_given = gen->count() > 0;
        return run_bench(*o);
      };
    }};

}  // namespace fused::cli::cmd_bench
