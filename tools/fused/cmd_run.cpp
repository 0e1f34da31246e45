// `fused run`: text in, text out. Streams the continuation of a prompt as it is generated and ends
// with a timing line (on stderr, as llama.cpp does), stopping at end-of-sequence or after -n tokens.
//
// Without --model it runs the embedded default model (examples/models/kjv-qwen2-4m) through the
// STATIC model: its plan, offsets and kernel calls are compile-time constants of this binary. With
// --model DIR it runs any Hugging Face Qwen2 checkpoint through the run-time model: the same
// pipeline, evaluated for the config.json found there.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <fused/io/tokenizer.hpp>
#include <fused/qwen2.hpp>

#include "cli.hpp"

#ifndef FUSED_DEFAULT_MODEL_DIR
#define FUSED_DEFAULT_MODEL_DIR "examples/models/kjv-qwen2-4m"
#endif

namespace {

namespace fs = std::filesystem;
using clock_type = std::chrono::steady_clock;

// The default model as a static model: prefill up to 512 tokens per call, its full 512 positions.
using default_model = fused::qwen2::static_model<fused::qwen2::presets::kjv_qwen2_4m, 512, 512>;
static_assert(default_model::capacity == fused::qwen2::presets::kjv_qwen2_4m::value.max_position_embeddings);

struct options {
  std::string prompt, system;
  long long n = 128;
  double temp = 0.8, top_p = 0.95;
  long long top_k = 40, seed = 0, ctx = 0;
  bool chat = false;
};

struct timing {
  std::size_t prompt_tokens = 0, generated = 0, decode_calls = 0;
  double prefill_s = 0, decode_s = 0;
};

double seconds_since(clock_type::time_point t) { return std::chrono::duration<double>(clock_type::now() - t).count(); }

// The generation loop, the same for the static and the run-time model.
template <class Model>
timing generate(Model& m, const fused::io::tokenizer& tok, const std::vector<std::int32_t>& prompt, const options& o,
                const std::vector<int>& stop_ids, std::int64_t capacity) {
  timing t;
  t.prompt_tokens = prompt.size();
  const auto V = static_cast<std::size_t>(m.vocab_size());
  std::vector<float> scratch(V);
  fk_rng rng;
  fk_rng_seed(&rng, static_cast<std::uint64_t>(o.seed));
  fused::io::tokenizer::stream_decoder out(tok);

  auto start = clock_type::now();
  std::span<const float> logits = m.prefill(prompt);
  t.prefill_s = seconds_since(start);
  start = clock_type::now();
  for (long long i = 0; i < o.n; ++i) {
    const auto next = static_cast<std::int32_t>(
        o.temp <= 0 ? fk_argmax(logits.data(), V)
                    : fk_sample(logits.data(), V, static_cast<float>(o.temp), static_cast<std::size_t>(o.top_k), static_cast<float>(o.top_p), &rng,
                                scratch.data()));
    if (std::find(stop_ids.begin(), stop_ids.end(), next) != stop_ids.end()) break;
    const std::string piece = out.push(next);
    std::fwrite(piece.data(), 1, piece.size(), stdout);
    std::fflush(stdout);
    ++t.generated;
    if (i + 1 == o.n) break;
    if (static_cast<std::int64_t>(prompt.size() + t.generated) >= capacity) {
      std::fprintf(stderr, "\n[fused] stopped: the context of %lld positions is full\n", static_cast<long long>(capacity));
      break;
    }
    logits = m.decode(next);
    ++t.decode_calls;
  }
  t.decode_s = seconds_since(start);
  const std::string rest = out.finish();
  std::fwrite(rest.data(), 1, rest.size(), stdout);
  std::fputc('\n', stdout);
  std::fflush(stdout);
  return t;
}

std::string chat_prompt(const options& o) {
  const std::string system = o.system.empty() ? "You are a helpful assistant." : o.system;
  return "<|im_start|>system\n" + system + "<|im_end|>\n<|im_start|>user\n" + o.prompt + "<|im_end|>\n<|im_start|>assistant\n";
}

const fused::cli::command run_cmd{
    "run", "generate text: [--model DIR] --prompt TEXT [-n N] [--temp T] [--top-k K] [--top-p P] [--seed S] [--threads N] [--chat] [--system TEXT]",
    [](const std::vector<std::string>& a) {
      fused::cli::args_reader args(a);
      options o;
      std::string model_dir;
      const bool custom = args.value("--model", model_dir);
      o.prompt = args.required("--prompt");
      o.n = args.int_or("-n", args.int_or("--n-predict", o.n, 0, 1 << 30), 0, 1 << 30);
      o.temp = args.double_or("--temp", o.temp);
      o.top_k = args.int_or("--top-k", o.top_k, 0, 1 << 30);
      o.top_p = args.double_or("--top-p", o.top_p);
      o.seed = args.int_or("--seed", o.seed, 0, INT64_MAX);
      o.ctx = args.int_or("--ctx", 0, 0, 1 << 30);
      const long long threads = args.int_or("--threads", 0, 0, 1024);
      o.chat = args.flag("--chat");
      const bool has_system = args.value("--system", o.system);
      args.finish();
      if (has_system && !o.chat) throw fused::cli::usage_error("--system needs --chat");
      if (o.temp < 0) throw fused::cli::usage_error("--temp must be >= 0");
      if (!(o.top_p > 0 && o.top_p <= 1)) throw fused::cli::usage_error("--top-p must be in (0, 1]");
      if (threads > 0) fk_set_threads(static_cast<int>(threads));

      const fs::path dir = custom ? fs::path(model_dir) : fs::path(FUSED_DEFAULT_MODEL_DIR);
      std::error_code ec;
      if (!fs::is_directory(dir, ec)) throw std::invalid_argument(dir.string() + ": not a model directory");
      if (!fs::exists(dir / "config.json")) throw std::invalid_argument(dir.string() + ": no config.json (not a Hugging Face model directory)");
      if (!fs::exists(dir / "tokenizer.json")) throw std::invalid_argument(dir.string() + ": no tokenizer.json");
      const fused::io::hf_model_info info = fused::io::load_hf_model_info(dir);
      const auto tok = fused::io::tokenizer::from_file(dir / "tokenizer.json");
      if (static_cast<std::int64_t>(tok.vocab_size()) > info.arch.vocab_size)
        throw std::invalid_argument((dir / "tokenizer.json").string() + ": the tokenizer has " + std::to_string(tok.vocab_size()) +
                                    " tokens but the model's vocab_size is " + std::to_string(info.arch.vocab_size) + " (not this model's tokenizer?)");

      std::vector<int> stop = info.eos_token_ids;
      if (o.chat) {
        const std::int32_t im_end = tok.token_id("<|im_end|>");
        if (im_end < 0) throw std::invalid_argument((dir / "tokenizer.json").string() + ": --chat needs the <|im_end|> token, which this tokenizer lacks");
        stop.push_back(im_end);
      }
      const std::vector<std::int32_t> prompt = o.chat ? tok.encode(chat_prompt(o), true) : tok.encode(o.prompt, false);
      if (prompt.empty()) throw fused::cli::usage_error("--prompt: the prompt encodes to no tokens");

      const auto P = static_cast<std::int64_t>(prompt.size());
      timing t;
      std::string how;
      if (!custom && fused::io::config_differences(default_model::cfg, info.arch).empty()) {
        if (P + 1 > default_model::capacity)
          throw std::invalid_argument("the prompt is " + std::to_string(P) + " tokens; the model's context holds " +
                                      std::to_string(default_model::capacity) + " (and one more to generate)");
        const auto w = fused::runtime::weight_store::load(dir, default_model::plans::prefill.tensors, info.arch.tie_word_embeddings);
        auto m = std::make_unique<default_model>(w);
        how = "static model";
        t = generate(*m, tok, prompt, o, stop, default_model::capacity);
      } else {
        const std::int64_t maxpos = info.arch.max_position_embeddings;
        std::int64_t ctx = o.ctx ? o.ctx : std::min<std::int64_t>(maxpos, P + std::max<long long>(o.n, 1));
        if (ctx > maxpos) throw fused::cli::usage_error("--ctx " + std::to_string(ctx) + " exceeds max_position_embeddings " + std::to_string(maxpos));
        if (P + 1 > ctx)
          throw std::invalid_argument("the prompt is " + std::to_string(P) + " tokens; the context holds " + std::to_string(ctx) +
                                      " (and one more to generate)" + (o.ctx ? "" : " = max_position_embeddings"));
        fused::qwen2::model m(info.arch, std::min<std::int64_t>(P, 512), ctx);
        const auto w = fused::runtime::weight_store::load(dir, m.tensors(), info.arch.tie_word_embeddings);
        m.bind(w);
        how = "run-time model";
        t = generate(m, tok, prompt, o, stop, ctx);
      }
      const double pre = t.prefill_s > 0 ? static_cast<double>(t.prompt_tokens) / t.prefill_s : 0;
      const double dec = t.decode_calls > 0 && t.decode_s > 0 ? static_cast<double>(t.decode_calls) / t.decode_s : 0;
      std::fprintf(stderr, "[fused] prompt %zu tokens, prefill %.1f tok/s | generated %zu tokens, decode %.1f tok/s | %s, %s, %d threads\n",
                   t.prompt_tokens, pre, t.generated, dec, how.c_str(), fk_isa_name(fk_isa_active()), fk_get_threads());
      return 0;
    }};

}  // namespace
