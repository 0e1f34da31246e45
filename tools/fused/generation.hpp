// What `fused run`, `fused chat` and `fused serve` share: a loaded model (the static default model or
// the run-time model of any checkpoint) behind one interface, conversations that keep their KV cache
// between calls (slots), the sampler, and stop strings over streamed text.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <filesystem>
#include <memory>
#include <optional>
#include <random>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

#include <fused/io/chat_template.hpp>
#include <fused/io/tokenizer.hpp>
#include <fused/qwen2.hpp>

#include "cli.hpp"
#include "default_model.hpp"
#include "progress.hpp"

namespace fused::cli {

// The default model as a static model: prefill up to 512 tokens per call, its full 512 positions.
using default_static_model = fused::qwen2::static_model<fused::qwen2::presets::kjv_qwen2_4m, 512, 512>;
static_assert(default_static_model::capacity == fused::qwen2::presets::kjv_qwen2_4m::value.max_position_embeddings);

// A model that runs conversations: sessions over caller-owned KV caches, calls that take turns.
class session_model {
 public:
  virtual ~session_model() = default;
  virtual std::int64_t capacity() const = 0;    // KV-cache positions of a session
  virtual std::int64_t max_tokens() const = 0;  // most tokens one prefill call runs
  virtual std::int64_t vocab_size() const = 0;
  virtual std::int64_t state_bytes() const = 0;  // one session's KV cache
  virtual std::int64_t arena_bytes() const = 0;  // shared by every session
  virtual std::int64_t weights_bytes() const = 0;
  virtual runtime::session open_session(std::span<std::byte> state) const = 0;
  virtual std::span<const float> prefill(runtime::session& s, std::span<const std::int32_t> ids) const = 0;
  virtual std::span<const float> decode(runtime::session& s, std::int32_t id) const = 0;
  virtual const char* kind() const = 0;  // "static model" or "run-time model"
};

template <class Model>
class session_model_of final : public session_model {
 public:
  explicit session_model_of(std::unique_ptr<Model> m) : m_(std::move(m)) {}
  std::int64_t capacity() const override { return capacity_of(*m_); }
  std::int64_t max_tokens() const override {
    if constexpr (requires { Model::max_tokens; }) return Model::max_tokens;
    else return m_->max_tokens();
  }
  std::int64_t vocab_size() const override { return m_->vocab_size(); }
  std::int64_t state_bytes() const override {
    if constexpr (requires { Model::state_bytes; }) return Model::state_bytes;
    else return m_->state_bytes();
  }
  std::int64_t arena_bytes() const override {
    if constexpr (requires { Model::arena_bytes; }) return Model::arena_bytes;
    else return m_->arena_bytes();
  }
  std::int64_t weights_bytes() const override {
    if constexpr (requires { Model::weights_bytes; }) return Model::weights_bytes;
    else return m_->weights_bytes();
  }
  runtime::session open_session(std::span<std::byte> state) const override { return m_->open_session(state); }
  std::span<const float> prefill(runtime::session& s, std::span<const std::int32_t> ids) const override { return m_->prefill(s, ids); }
  std::span<const float> decode(runtime::session& s, std::int32_t id) const override { return m_->decode(s, id); }
  const char* kind() const override {
    if constexpr (requires { Model::capacity; }) return "static model";
    else return "run-time model";
  }

 private:
  static std::int64_t capacity_of(const Model& m) {
    if constexpr (requires { Model::capacity; }) return Model::capacity;
    else return m.capacity();
  }
  std::unique_ptr<Model> m_;
};

// A model directory loaded for conversations: its tokenizer, weights, model and stop tokens.
struct loaded_model {
  std::filesystem::path dir;
  std::string name;  // the directory's name: what /v1/models and the responses call it
  decoder::hf_model_info info;
  io::tokenizer tok;
  std::unique_ptr<runtime::weight_store> weights;
  std::unique_ptr<session_model> model;
  std::vector<int> eos;  // the model's end-of-sequence ids (config.json)
};

// A conversation's context unless --ctx says otherwise (a 32k-position model would give each
// session a KV cache of 32k positions; llama.cpp's default is 4096 too).
inline constexpr std::int64_t default_ctx = 4096;

// A model directory, checked, with what every command reads before the weights: its config and
// its tokenizer (which must fit the model's vocabulary).
struct model_files {
  std::filesystem::path dir;
  bool is_default = false;  // no -m: the default model
  decoder::hf_model_info info;
  io::tokenizer tok;
};

// `model_dir` empty: the default model.
inline model_files open_model_dir(const std::string& model_dir) {
  namespace fs = std::filesystem;
  const bool is_default = model_dir.empty();
  const fs::path dir = is_default ? default_model_dir() : fs::path(model_dir);
  std::error_code ec;
  if (!fs::is_directory(dir, ec)) throw std::invalid_argument(dir.string() + ": not a model directory");
  if (!fs::exists(dir / "config.json")) throw std::invalid_argument(dir.string() + ": no config.json (not a Hugging Face model directory)");
  if (!fs::exists(dir / "tokenizer.json")) throw std::invalid_argument(dir.string() + ": no tokenizer.json");
  decoder::hf_model_info info = decoder::load_hf_model_info(dir);
  io::tokenizer tok = io::tokenizer::from_file(dir / "tokenizer.json");
  if (static_cast<std::int64_t>(tok.vocab_size()) > info.arch.vocab_size)
    throw std::invalid_argument((dir / "tokenizer.json").string() + ": the tokenizer has " + std::to_string(tok.vocab_size()) +
                                " tokens but the model's vocab_size is " + std::to_string(info.arch.vocab_size) + " (not this model's tokenizer?)");
  return {.dir = dir, .is_default = is_default, .info = std::move(info), .tok = std::move(tok)};
}

// The weights a plan's tensors name, with a progress bar on a terminal.
template <class Tensors>
runtime::weight_store load_weights_shown(const model_files& f, const Tensors& tensors) {
  progress bar("loading weights", "MB", 0);
  return runtime::weight_store::load(f.dir, tensors, f.info.arch.tie_word_embeddings, weights_progress(bar));
}

// -s SEED, or a fresh one (which the commands print, so that a run can be repeated).
inline std::uint64_t seed_or_fresh(const std::optional<std::uint64_t>& given) {
  return given ? *given : static_cast<std::uint64_t>(std::random_device{}()) << 32 | std::random_device{}();
}

// Loads `model_dir` (empty: the default model, as the static model) with KV caches of `ctx`
// positions (0: max_position_embeddings up to default_ctx; the static model's is fixed).
inline loaded_model load_model(const std::string& model_dir, std::int64_t ctx) {
  model_files f = open_model_dir(model_dir);
  const std::filesystem::path full = std::filesystem::absolute(f.dir).lexically_normal();
  std::string name = full.filename().string();
  if (name.empty()) name = full.parent_path().filename().string();  // "models/x/"
  const bool is_default = f.is_default;
  loaded_model l{.dir = f.dir, .name = std::move(name), .info = f.info, .tok = std::move(f.tok), .weights = {}, .model = {}, .eos = f.info.eos_token_ids};
  const auto load_weights = [&](const auto& tensors) { return std::make_unique<runtime::weight_store>(load_weights_shown(f, tensors)); };
  if (is_default && decoder::is_model_of<qwen2::presets::kjv_qwen2_4m>(l.info)) {
    if (ctx && ctx != default_static_model::capacity)
      throw usage_error("--ctx " + std::to_string(ctx) + ": the default model runs as a static model, whose context is " +
                        std::to_string(default_static_model::capacity) + " positions");
    l.weights = load_weights(default_static_model::plans::prefill.tensors);
    l.model = std::make_unique<session_model_of<default_static_model>>(std::make_unique<default_static_model>(*l.weights));
  } else {
    const std::int64_t maxpos = l.info.arch.max_position_embeddings;
    if (ctx > maxpos) throw usage_error("--ctx " + std::to_string(ctx) + " exceeds max_position_embeddings " + std::to_string(maxpos));
    const std::int64_t positions = ctx ? ctx : std::min(maxpos, default_ctx);
    auto m = std::make_unique<decoder::model>(*l.info.family, l.info.arch, std::min<std::int64_t>(positions, 512), positions);
    l.weights = load_weights(m->tensors());
    m->bind(*l.weights);
    l.model = std::make_unique<session_model_of<decoder::model>>(std::move(m));
  }
  return l;
}

// Why a prompt of `prompt` tokens cannot run in a context of `capacity` positions: the token it
// generates needs one more. `whose`: what sized the context, if not the user (" (max_position_embeddings)").
inline std::string prompt_too_long(std::int64_t prompt, std::int64_t capacity, const std::string& whose = "") {
  const auto count = [](std::int64_t n, const char* what) { return std::to_string(n) + " " + what + (n == 1 ? "" : "s"); };
  return "the prompt is " + count(prompt, "token") + "; the context holds " + count(capacity, "position") + whose + ", the prompt at most " +
         std::to_string(capacity - 1) + " of them (one more is generated)";
}

// --chat-template's choices: the formats chat_template::named knows ("chatml|llama2|...").
inline CLI::Validator chat_template_choices() {
  std::vector<std::string> names;
  for (std::string_view rest = io::chat_template::format_names; !rest.empty();) {
    const std::size_t bar = rest.find('|');
    names.emplace_back(rest.substr(0, bar));
    rest = bar == std::string_view::npos ? std::string_view{} : rest.substr(bar + 1);
  }
  return one_of(std::move(names));
}

// A template whose control tokens the tokenizer lacks (--chat-template llama3 for a Qwen2 model)
// would fail every conversation: said once, before any (a usage error when --chat-template chose it,
// the model's load_error when its own does not fit its tokenizer).
inline io::chat_template renderable(io::chat_template t, const io::tokenizer& tok, const std::filesystem::path& dir, const std::string& flag) {
  try {
    const io::chat_message probe[] = {{"user", "hi"}, {"assistant", "hi"}, {"user", "hi"}};
    (void)t.encode(tok, probe);
  } catch (const std::invalid_argument& e) {
    if (!flag.empty()) throw usage_error("--chat-template " + flag + ": " + e.what());
    throw io::load_error(dir.string() + ": its chat template: " + e.what());
  }
  return t;
}

// The chat template: the model's, or the format named by --chat-template; either checked against
// the tokenizer.
inline io::chat_template chat_template_for(const std::filesystem::path& dir, const std::string& flag, const io::tokenizer& tok) {
  if (flag.empty()) return renderable(io::chat_template::from_model_dir(dir), tok, dir, flag);
  std::optional<io::chat_template> t = io::chat_template::named(flag);
  if (!t) throw usage_error("--chat-template " + flag + ": not one of " + std::string(io::chat_template::format_names));
  // The names of the BOS / EOS tokens are the tokenizer's where its config gives them.
  if (t->format != io::chat_format::chatml) {
    try {
      const io::chat_template model_own = io::chat_template::from_model_dir(dir);
      t->bos = model_own.bos;
      t->eos = model_own.eos;
    } catch (const io::load_error&) {  // no usable tokenizer_config.json: the format's defaults
    }
  }
  return renderable(*t, tok, dir, flag);
}

// One conversation's KV cache and the ids it holds.
class slot {
 public:
  slot() = default;
  explicit slot(runtime::session s) : s_(std::move(s)) {}

  // Makes the cache hold `ids` and returns the logits after the last one, bit for bit what an empty
  // cache would give (`reused` gets how many cached positions were kept). A linear layer computes a
  // row with one of a few arithmetics, chosen by how many rows its call has (fk_gemm_bf16_rows): a
  // decoded token's row, or a short call's, differs in its last bits from a long prefill's, and greedy
  // text drifts from there. So a cached position is kept only where its ids agree and it was computed
  // as a fresh prefill of `ids` would compute it, and only so far that the rest, run from there in
  // calls of at most max_tokens, gets a fresh prefill's arithmetic too. At least one token runs.
  std::span<const float> feed(const session_model& m, std::span<const std::int32_t> ids, std::size_t* reused = nullptr) {
    if (ids.empty()) throw std::invalid_argument("no tokens to run");
    const std::size_t keep = keepable(ids);
    s_.rewind(static_cast<std::int64_t>(keep));
    cached_.resize(keep);
    rows_.resize(keep);
    if (reused) *reused = keep;
    const std::span<const std::int32_t> rest = ids.subspan(keep);
    std::span<const float> logits = m.prefill(s_, rest);
    cached_.insert(cached_.end(), rest.begin(), rest.end());
    for (std::size_t j = keep; j < ids.size(); ++j) rows_.push_back(rows_of(ids.size(), keep, j));
    return logits;
  }
  // How many cached positions feed(ids) would keep (the engine gives a prompt the slot that keeps most).
  std::size_t keepable(std::span<const std::int32_t> ids) const {
    const auto rest_as_fresh = [&](std::size_t from) {
      for (std::size_t j = from; j < ids.size(); ++j)
        if (rows_of(ids.size(), from, j) != rows_of(ids.size(), 0, j)) return false;
      return true;
    };
    std::size_t keep = 0;
    while (keep < cached_.size() && keep + 1 < ids.size() && cached_[keep] == ids[keep] && rows_[keep] == rows_of(ids.size(), 0, keep)) ++keep;
    while (keep > 0 && !rest_as_fresh(keep)) --keep;
    return keep;
  }
  std::span<const float> decode(const session_model& m, std::int32_t id) {
    std::span<const float> logits = m.decode(s_, id);
    cached_.push_back(id);
    rows_.push_back(fk_gemm_bf16_rows(1));
    return logits;
  }
  void clear() {
    s_.reset();
    cached_.clear();
    rows_.clear();
  }
  std::int64_t position() const { return s_.position(); }
  std::int64_t capacity() const { return s_.capacity(); }

 private:
  runtime::session s_;
  std::vector<std::int32_t> cached_;
  std::vector<fk_gemm_rows> rows_;  // the arithmetic of each cached position's row (see feed)

  // The arithmetic of position j's row when positions [from, count) run from `from` in calls of at most max_tokens.
  fk_gemm_rows rows_of(std::size_t count, std::size_t from, std::size_t j) const {
    const auto chunk = static_cast<std::size_t>(s_.max_tokens());
    const std::size_t start = from + (j - from) / chunk * chunk;
    return fk_gemm_bf16_rows(std::min(chunk, count - start));
  }
};

struct sampling {
  double temp = 0.8, top_p = 0.95, min_p = 0.0, repeat_penalty = 1.0;
  long long top_k = 40, repeat_last_n = 64;
};

// The sampling flags of run, chat and serve (for serve, what a request that gives none gets).
inline void add_sampling_flags(CLI::App& app, sampling& how) {
  app.add_option("--temp", how.temp, "temperature; 0 = greedy")->check(finite_in(0, 100));
  app.add_option("--top-k", how.top_k, "keep the k most likely tokens; 0 = off")->transform(integer_in(0, 1 << 30));
  app.add_option("--top-p", how.top_p, "keep the most likely tokens up to this probability mass; 1 = off")->check(finite_in(0, 1));
  app.add_option("--min-p", how.min_p, "drop tokens less likely than min-p times the most likely one; 0 = off")->check(finite_in(0, 1));
  app.add_option("--repeat-penalty", how.repeat_penalty, "divide the logits of recent tokens by this (CTRL's penalty); 1 = off")
      ->check(finite_in(0.01, 100));
  app.add_option("--repeat-last-n", how.repeat_last_n, "how many recent tokens the repetition penalty looks at")->transform(integer_in(0, 1 << 20));
}

// Logits with a NaN or an infinity are refused, not sampled or written out (sampled, they pick token
// 0 or any other every time: text that looks like output): the error names the model's first
// weight that holds one, if any.
inline void require_finite_logits(std::span<const float> logits, const runtime::weight_store& weights) {
  const auto not_finite = static_cast<std::size_t>(std::count_if(logits.begin(), logits.end(), [](float x) { return !std::isfinite(x); }));
  if (!not_finite) return;
  const std::string weight = weights.first_non_finite();
  throw std::runtime_error("the model's logits are not finite (" + std::to_string(not_finite) + " of " + std::to_string(logits.size()) +
                           " values are NaN or infinite): " +
                           (weight.empty() ? std::string("every weight is finite, so an activation overflowed") : "its " + weight));
}

// Draws tokens with a seeded generator; the repetition penalty looks back on the ids it was given.
class sampler {
 public:
  sampler(const sampling& how, std::uint64_t seed, std::size_t vocab, const runtime::weight_store& weights)
      : how_{.temp = static_cast<float>(how.temp), .top_k = static_cast<std::size_t>(how.top_k), .top_p = static_cast<float>(how.top_p),
             .min_p = static_cast<float>(how.min_p)},
        repeat_penalty_(how.repeat_penalty),
        repeat_last_n_(static_cast<std::size_t>(how.repeat_last_n)),
        weights_(weights),
        scratch_(vocab) {
    fk_rng_seed(&rng_, seed);
  }
  // The next token after `logits` ([vocab]), given the ids so far (`history`, for the penalty).
  std::int32_t next(std::span<const float> logits, std::span<const std::int32_t> history) {
    require_finite_logits(logits, weights_);
    const float* scores = logits.data();
    if (repeat_penalty_ != 1.0) {
      penalized_.assign(logits.begin(), logits.end());
      const std::size_t window = std::min(history.size(), repeat_last_n_);
      fk_repeat_penalty(penalized_.data(), penalized_.size(), history.data() + (history.size() - window), window, static_cast<float>(repeat_penalty_));
      scores = penalized_.data();
    }
    return static_cast<std::int32_t>(fk_sample_with(scores, logits.size(), &how_, &rng_, scratch_.data()));
  }

 private:
  fk_sampler how_;
  double repeat_penalty_;
  std::size_t repeat_last_n_;
  const runtime::weight_store& weights_;
  fk_rng rng_{};
  std::vector<float> scratch_, penalized_;
};

// Streamed text cut at the first of some stop strings (each non-empty): push() returns what may be
// shown now (text that could still begin a stop string is held back), finish() the rest; after
// stopped(), the caller pushes no more.
class stop_strings {
 public:
  explicit stop_strings(std::vector<std::string> stops) : stops_(std::move(stops)) {}
  std::string push(std::string_view piece) {
    text_ += piece;
    std::size_t cut = std::string::npos;  // the earliest stop string in the text not yet shown
    for (const std::string& s : stops_) {
      const std::size_t from = text_.size() >= piece.size() + s.size() ? text_.size() - piece.size() - s.size() + 1 : 0;
      cut = std::min(cut, text_.find(s, std::max(from, shown_)));
    }
    if (cut != std::string::npos) {
      stopped_ = true;
      text_.resize(cut);
    }
    std::size_t safe = text_.size();
    if (!stopped_)
      for (const std::string& s : stops_)
        for (std::size_t k = std::min(s.size() - 1, text_.size()); k > 0; --k)
          if (text_.compare(text_.size() - k, k, s, 0, k) == 0) {
            safe = std::min(safe, text_.size() - k);
            break;
          }
    safe = std::max(safe, shown_);
    std::string out = text_.substr(shown_, safe - shown_);
    shown_ = safe;
    return out;
  }
  std::string finish() {
    std::string out = text_.substr(shown_);
    shown_ = text_.size();
    return out;
  }
  bool stopped() const { return stopped_; }
  const std::string& text() const { return text_; }

 private:
  std::vector<std::string> stops_;
  std::string text_;
  std::size_t shown_ = 0;
  bool stopped_ = false;
};

}  // namespace fused::cli
