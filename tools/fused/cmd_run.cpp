// `fused run`: text in, text out. Streams the continuation of a prompt as it is generated and ends
// with a timing line (on stderr, as llama.cpp does), stopping at end-of-sequence, after -n tokens, or
// at Ctrl-C (the timing line is still printed; a second Ctrl-C ends the process at once).
//
// Without --model it runs the default model (kjv-qwen2-4m, installed with the tool) through the
// STATIC model: its plan, offsets and kernel calls are compile-time constants of this binary. With
// --model DIR it runs any Hugging Face Qwen2 checkpoint through the run-time model: the same
// pipeline, evaluated for the config.json found there.
#include <algorithm>
#include <atomic>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "cli.hpp"
#include "generation.hpp"

namespace fused::cli::cmd_run {

namespace fs = std::filesystem;
using clock_type = std::chrono::steady_clock;
using default_model = fused::cli::default_static_model;

struct options {
  std::string model_dir, prompt, prompt_file, chat_template;
  std::optional<std::string> system;  // given, even empty: the template then has no default one
  long long n = 128, ctx = 0, threads = 0;
  std::optional<std::uint64_t> seed;
  fused::cli::sampling how;
  bool chat = false;
};

struct timing {
  std::size_t prompt_tokens = 0, generated = 0, decode_calls = 0;
  double prefill_s = 0, decode_s = 0;
  bool interrupted = false;
};

double seconds_since(clock_type::time_point t) { return std::chrono::duration<double>(clock_type::now() - t).count(); }

// The generation loop, the same for the static and the run-time model.
template <class Model>
timing generate(Model& m, const fused::io::tokenizer& tok, const std::vector<std::int32_t>& prompt, const options& o, std::uint64_t seed,
                const std::vector<int>& stop_ids, std::int64_t capacity, std::int64_t chunk, const fused::runtime::weight_store& weights) {
  timing t;
  t.prompt_tokens = prompt.size();
  const auto V = static_cast<std::size_t>(m.vocab_size());
  fused::cli::sampler draw(o.how, seed, V, weights);
  std::vector<std::int32_t> history(prompt);  // what the repetition penalty looks back on
  fused::io::tokenizer::stream_decoder out(tok);
  interrupt_scope ctrl_c;  // Ctrl-C asks generation to stop; a second one ends the process
  if (o.how.temp > 0 && !o.seed) std::fprintf(stderr, "[fused] seed %llu\n", static_cast<unsigned long long>(seed));  // every check has passed

  auto start = clock_type::now();
  std::span<const float> logits;
  {
    // Chunk by chunk (as prefill itself would) so that a long prompt shows its progress.
    fused::cli::progress bar("prefill", "tokens", static_cast<double>(prompt.size()));
    for (std::size_t at = 0; at < prompt.size() && !interrupted; at += static_cast<std::size_t>(chunk)) {
      const std::size_t len = std::min(prompt.size() - at, static_cast<std::size_t>(chunk));
      logits = m.prefill(std::span(prompt).subspan(at, len));
      bar.update(static_cast<double>(at + len));
    }
  }
  t.prefill_s = seconds_since(start);
  start = clock_type::now();
  for (long long i = 0; i < o.n && !interrupted; ++i) {
    const std::int32_t next = draw.next(logits, history);
    if (std::find(stop_ids.begin(), stop_ids.end(), next) != stop_ids.end()) break;
    history.push_back(next);
    const std::string piece = out.push(next);
    std::fwrite(piece.data(), 1, piece.size(), stdout);
    std::fflush(stdout);
    ++t.generated;
    if (i + 1 == o.n) break;
    // `next` goes into the cache at position prompt + generated - 1: the last that fits is capacity - 1
    // (the rule of serve, chat and the generation program: a prompt of T and N tokens take T + N - 1).
    if (static_cast<std::int64_t>(prompt.size() + t.generated) > capacity) {
      std::fprintf(stderr, "\n[fused] stopped: the context of %lld positions is full\n", static_cast<long long>(capacity));
      break;
    }
    logits = m.decode(next);
    ++t.decode_calls;
  }
  t.decode_s = seconds_since(start);
  t.interrupted = interrupted != 0;
  const std::string rest = out.finish();
  std::fwrite(rest.data(), 1, rest.size(), stdout);
  std::fputc('\n', stdout);
  std::fflush(stdout);
  return t;
}

int run(options o) {
  if (!o.prompt_file.empty()) o.prompt = fused::cli::read_input_file(o.prompt_file, "the prompt file", std::size_t{64} << 20);
  if (o.threads > 0) fk_set_threads(static_cast<int>(o.threads));
  const std::uint64_t seed = fused::cli::seed_or_fresh(o.seed);
  const fused::cli::model_files files = fused::cli::open_model_dir(o.model_dir);
  const fs::path& dir = files.dir;
  const fused::decoder::hf_model_info& info = files.info;
  const fused::io::tokenizer& tok = files.tok;

  std::vector<int> stop = info.eos_token_ids;
  // As transformers' tokenizer(text) before generate(): the post-processor's leading special tokens
  // (Llama 3's <|begin_of_text|>), then the text; a chat prompt is the model's chat template's.
  std::vector<std::int32_t> prompt;
  if (o.chat) {
    const fused::io::chat_template tmpl = fused::cli::chat_template_for(dir, o.chat_template, tok);
    std::vector<fused::io::chat_message> messages;
    if (o.system) messages.push_back({"system", *o.system});
    messages.push_back({"user", o.prompt});
    prompt = tmpl.encode(tok, messages);
    for (const std::int32_t id : tmpl.end_of_turn_ids(tok)) stop.push_back(id);
  } else {
    prompt = tok.encode(o.prompt, false);
    if (!prompt.empty()) prompt.insert(prompt.begin(), tok.prompt_prefix().begin(), tok.prompt_prefix().end());
  }
  if (prompt.empty()) throw fused::cli::usage_error(std::string(o.prompt_file.empty() ? "--prompt" : "--file " + o.prompt_file) + ": the prompt encodes to no tokens");

  const auto P = static_cast<std::int64_t>(prompt.size());
  timing t;
  std::string how;
  const auto load_weights = [&](const auto& tensors) { return fused::cli::load_weights_shown(files, tensors); };
  if (files.is_default && fused::decoder::is_model_of<fused::qwen2::presets::kjv_qwen2_4m>(info)) {
    // The static model's cache holds its whole context; -c may only ask for less.
    if (o.ctx > default_model::capacity)
      throw fused::cli::usage_error("--ctx " + std::to_string(o.ctx) + " exceeds the default model's context of " +
                                    std::to_string(default_model::capacity) + " positions");
    const std::int64_t capacity = o.ctx ? o.ctx : default_model::capacity;
    if (P + 1 > capacity && o.ctx) throw fused::cli::usage_error("--ctx " + std::to_string(o.ctx) + ": " + fused::cli::prompt_too_long(P, capacity));
    if (P + 1 > capacity) throw std::invalid_argument(fused::cli::prompt_too_long(P, capacity));
    const auto w = load_weights(default_model::plans::prefill.tensors);
    auto m = std::make_unique<default_model>(w);
    how = "static model";
    t = generate(*m, tok, prompt, o, seed, stop, capacity, default_model::max_tokens, w);
  } else {
    const std::int64_t maxpos = info.arch.max_position_embeddings;
    const std::int64_t ctx = o.ctx ? o.ctx : std::min<std::int64_t>(maxpos, P + std::max<long long>(o.n, 1));
    if (ctx > maxpos) throw fused::cli::usage_error("--ctx " + std::to_string(ctx) + " exceeds max_position_embeddings " + std::to_string(maxpos));
    if (P + 1 > ctx && o.ctx) throw fused::cli::usage_error("--ctx " + std::to_string(o.ctx) + ": " + fused::cli::prompt_too_long(P, ctx));
    if (P + 1 > ctx) throw std::invalid_argument(fused::cli::prompt_too_long(P, ctx, " (max_position_embeddings)"));
    fused::decoder::model m(*info.family, info.arch, std::min<std::int64_t>(P, 512), ctx);
    const auto w = load_weights(m.tensors());
    m.bind(w);
    how = "run-time model";
    t = generate(m, tok, prompt, o, seed, stop, ctx, m.max_tokens(), w);
  }
  const double pre = t.prefill_s > 0 ? static_cast<double>(t.prompt_tokens) / t.prefill_s : 0;
  const double dec = t.decode_calls > 0 && t.decode_s > 0 ? static_cast<double>(t.decode_calls) / t.decode_s : 0;
  std::fprintf(stderr, "[fused] %sprompt %zu tokens, prefill %.1f tok/s | generated %zu tokens, decode %.1f tok/s | %s, %s, %d thread%s\n",
               t.interrupted ? "interrupted | " : "", t.prompt_tokens, pre, t.generated, dec, how.c_str(), fk_isa_name(fk_isa_active()),
               fk_get_threads(), fk_get_threads() == 1 ? "" : "s");
  return t.interrupted ? 130 : 0;  // 128 + SIGINT, as a shell reports a process Ctrl-C ended
}

const fused::cli::command run_cmd{
    "run", "generate text from a prompt (the default model, or --model DIR)", [](CLI::App& app) -> fused::cli::runner {
      auto o = std::make_shared<options>();
      using fused::cli::integer_in;
      app.add_option("-m,--model", o->model_dir, "Hugging Face model directory (config.json, tokenizer.json, *.safetensors); default: the default model (fused --version says where), run as a static model")->check(fused::cli::not_empty("give a model directory"))
          ;
      auto* prompt = app.add_option("-p,--prompt", o->prompt, "the prompt text");
      auto* file = app.add_option("-f,--file", o->prompt_file, "read the prompt from this file (- for standard input)")->check(fused::cli::not_empty("give a file, or - for standard input"));
      prompt->excludes(file);
      file->excludes(prompt);
      app.add_option("-n,--n-predict", o->n, "most tokens to generate")->transform(integer_in(0, 1 << 30));
      fused::cli::add_sampling_flags(app, o->how);
      app.add_option("-s,--seed", o->seed, "sampling seed; default: a fresh one, printed on stderr")
          ->default_str("random")
          ->transform(fused::cli::seed_range());
      app.add_option("-t,--threads", o->threads, "threads for the kernels; 0 = all cores")->transform(integer_in(0, 1024));
      app.add_option("-c,--ctx", o->ctx, "KV cache positions (run-time model); 0 = prompt + -n, up to max_position_embeddings")
          ->transform(integer_in(0, 1 << 30));
      auto* chat = app.add_flag("--chat", o->chat, "the prompt is a user message, in the model's chat template; stop at the end of the answer");
      app.add_option("--system", o->system, "the system message of --chat")->needs(chat);
      app.add_option("--chat-template", o->chat_template, "the chat format of --chat instead of the model's chat_template")
          ->check(fused::cli::chat_template_choices())
          ->needs(chat);
      return [o, prompt, file] {
        if (prompt->count() == 0 && file->count() == 0) throw fused::cli::usage_error("give the prompt: -p/--prompt TEXT or -f/--file PATH");
        return run(*o);
      };
    }};

}  // namespace fused::cli::cmd_run
