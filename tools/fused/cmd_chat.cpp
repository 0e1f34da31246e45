// `fused chat`: a conversation in the terminal. The KV cache is kept between turns, so each turn runs
// only its own tokens (the whole conversation is rendered with the model's chat template and what the
// cache already holds is reused). /reset starts again, /exit or Ctrl-D ends, Ctrl-C stops the reply
// being written (not the program). With standard input not a terminal, each line is a message. Exit
// status 1 when a message could not be answered (it did not fit in the context).
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "cli.hpp"
#include "generation.hpp"

namespace fused::cli::cmd_chat {

using clock_type = std::chrono::steady_clock;

struct options {
  std::string model_dir, chat_template;
  std::optional<std::string> system;  // given, even empty: the template then has no default one
  long long n = -1, ctx = 0, threads = 0;
  std::optional<std::uint64_t> seed;
  fused::cli::sampling how;
  bool context_shift = false;
};

// Standard input's lines. A line longer than max_line_bytes (no newline in /dev/zero) and a read error
// (a directory, a closed descriptor) end the chat with an error, not with the silence of an end.
class line_reader {
 public:
  static constexpr std::size_t max_line_bytes = std::size_t{64} << 20;

  // The next line without its newline; nullopt at end of input. On a terminal, Ctrl-C drops the line
  // typed so far and shows the prompt again.
  std::optional<std::string> next(bool terminal) {
    for (;;) {
      if (const std::size_t newline = pending_.find('\n', scanned_); newline != std::string::npos) {
        std::string line = pending_.substr(0, newline);
        pending_.erase(0, newline + 1);
        scanned_ = 0;
        return line;
      }
      scanned_ = pending_.size();
      if (pending_.size() > max_line_bytes)
        throw std::runtime_error("standard input: a line longer than " + std::to_string(max_line_bytes >> 20) + " MiB, the most a chat message may be");
      char chunk[1 << 16];
      const ssize_t got = ::read(STDIN_FILENO, chunk, sizeof chunk);
      if (got > 0) {
        pending_.append(chunk, static_cast<std::size_t>(got));
        continue;
      }
      if (got == 0) {  // the end, or on a terminal Ctrl-D: the line typed so far, and reading goes on
        if (pending_.empty()) return std::nullopt;
        scanned_ = 0;
        return std::exchange(pending_, std::string());
      }
      if (errno == EBADF) throw std::runtime_error("standard input: it is closed");
      if (errno != EINTR) throw std::runtime_error(std::string("standard input: cannot read: ") + std::strerror(errno));
      if (interrupted.exchange(0) && terminal) {
        pending_.clear();
        scanned_ = 0;
        std::fputs("\n> ", stdout);
        std::fflush(stdout);
      }
    }
  }

 private:
  std::string pending_;      // read, not yet returned
  std::size_t scanned_ = 0;  // pending_'s bytes known to hold no newline
};

double seconds_since(clock_type::time_point t) { return std::chrono::duration<double>(clock_type::now() - t).count(); }

class conversation {
 public:
  conversation(fused::cli::loaded_model& l, fused::io::chat_template tmpl, const options& o, std::uint64_t seed)
      : l_(l),
        tmpl_(std::move(tmpl)),
        o_(o),
        state_(static_cast<std::size_t>(l.model->state_bytes())),
        slot_(l.model->open_session({state_.data(), state_.size()})),
        sampler_(o.how, seed, static_cast<std::size_t>(l.model->vocab_size()), *l.weights) {
    stop_ = l.eos;
    for (const std::int32_t id : tmpl_.end_of_turn_ids(l.tok)) stop_.push_back(id);
    reset();
    // A system message that leaves no room for a turn would fail every one of them, each blaming its message.
    if (o.system) {
      const std::vector<fused::io::chat_message> shortest = {{"system", *o.system}, {"user", ""}};
      if (const std::size_t needs = tmpl_.encode(l.tok, shortest).size() + 1; static_cast<std::int64_t>(needs) > slot_.capacity())
        throw std::runtime_error("--system: the system message and an empty turn take " + std::to_string(needs) + " positions; the context holds " +
                                 std::to_string(slot_.capacity()) + " (-c/--ctx)");
    }
  }

  void reset() {
    messages_.clear();
    if (o_.system) messages_.push_back({"system", *o_.system});
    slot_.clear();
    turn_ = 0;
  }

  // Answers one user message, streaming the reply to stdout; the reply joins the conversation. False:
  // the message does not fit in the context, and nothing was answered.
  bool answer(const std::string& text) {
    ++turn_;
    messages_.push_back({"user", text});
    std::vector<std::int32_t> ids = tmpl_.encode(l_.tok, messages_);
    const std::int64_t capacity = slot_.capacity();
    while (static_cast<std::int64_t>(ids.size()) + 1 > capacity) {
      if (!o_.context_shift || !drop_oldest_turn()) {
        std::fprintf(stderr, "[fused] this turn needs %zu positions (the conversation so far and the message); the context holds %lld: %s\n",
                     ids.size() + 1, static_cast<long long>(capacity),
                     o_.context_shift ? "the message alone does not fit" : "/reset to start again, or run with --context-shift");
        messages_.pop_back();
        return false;
      }
      ids = tmpl_.encode(l_.tok, messages_);
    }
    interrupted = 0;
    auto start = clock_type::now();
    std::size_t reused = 0;
    std::span<const float> logits = slot_.feed(*l_.model, ids, &reused);
    const double prefill_s = seconds_since(start);
    const std::size_t prefilled = ids.size() - reused;

    start = clock_type::now();
    std::vector<std::int32_t> reply;
    fused::io::tokenizer::stream_decoder out(l_.tok);
    std::size_t decode_calls = 0, prefilled_again = 0;
    const char* ended = nullptr;
    std::vector<std::int32_t> history(ids);  // the prompt, then the reply: the repetition penalty's window
    while (!interrupted && o_.n != 0) {
      const std::int32_t next = sampler_.next(logits, history);
      if (std::find(stop_.begin(), stop_.end(), next) != stop_.end()) break;
      reply.push_back(next);
      history.push_back(next);
      const std::string piece = out.push(next);
      std::fwrite(piece.data(), 1, piece.size(), stdout);
      std::fflush(stdout);
      if (o_.n >= 0 && static_cast<long long>(reply.size()) >= o_.n) break;
      if (slot_.position() + 1 > capacity) {
        // The cache is full: drop the oldest turns and run what remains, this reply included.
        if (!o_.context_shift || !drop_oldest_turn()) {
          ended = o_.context_shift ? "the context is full and no older turn is left to drop" : "the context is full: /reset to start again, or run with --context-shift";
          break;
        }
        ids = tmpl_.encode(l_.tok, messages_);
        std::vector<std::int32_t> all(ids);
        all.insert(all.end(), reply.begin(), reply.end());
        if (static_cast<std::int64_t>(all.size()) + 1 > capacity) {
          ended = "the context is full and this reply alone fills it";
          break;
        }
        std::size_t kept = 0;
        logits = slot_.feed(*l_.model, all, &kept);
        prefilled_again += all.size() - kept;
        continue;
      }
      logits = slot_.decode(*l_.model, next);
      ++decode_calls;
    }
    const double decode_s = seconds_since(start);
    const std::string rest = out.finish();
    std::fwrite(rest.data(), 1, rest.size(), stdout);
    std::fputc('\n', stdout);
    std::fflush(stdout);
    messages_.push_back({"assistant", l_.tok.decode(reply)});
    if (ended) std::fprintf(stderr, "[fused] reply stopped: %s\n", ended);
    std::fprintf(stderr, "[fused] turn %d: %sprefill %zu tokens (%zu reused from the cache), %.1f tok/s | generated %zu tokens, %.1f tok/s%s | context %lld of %lld\n",
                 turn_, interrupted ? "interrupted | " : "", prefilled, reused, prefill_s > 0 ? static_cast<double>(prefilled) / prefill_s : 0.0,
                 reply.size(), decode_calls && decode_s > 0 ? static_cast<double>(decode_calls) / decode_s : 0.0,
                 prefilled_again ? (" | context shifted, " + std::to_string(prefilled_again) + " tokens run again").c_str() : "",
                 static_cast<long long>(slot_.position()), static_cast<long long>(capacity));
    interrupted = 0;
    return true;
  }

 private:
  // Drops the oldest user turn and its answer (never the system message or the last message).
  bool drop_oldest_turn() {
    const std::size_t first = !messages_.empty() && messages_.front().role == "system" ? 1 : 0;
    if (messages_.size() < first + 2) return false;
    std::size_t n = 1;  // the user message, and the answer that follows it unless it is the last
    if (first + 1 < messages_.size() - 1 && messages_[first + 1].role == "assistant") n = 2;
    if (first + n >= messages_.size()) return false;
    messages_.erase(messages_.begin() + static_cast<std::ptrdiff_t>(first), messages_.begin() + static_cast<std::ptrdiff_t>(first + n));
    return true;
  }

  fused::cli::loaded_model& l_;
  fused::io::chat_template tmpl_;
  const options& o_;
  fused::runtime::aligned_bytes state_;
  fused::cli::slot slot_;
  fused::cli::sampler sampler_;
  std::vector<int> stop_;
  std::vector<fused::io::chat_message> messages_;
  int turn_ = 0;
};

int chat(const options& o) {
  if (o.threads > 0) fk_set_threads(static_cast<int>(o.threads));
  const std::uint64_t seed = fused::cli::seed_or_fresh(o.seed);
  fused::cli::loaded_model l = fused::cli::load_model(o.model_dir, o.ctx);
  fused::io::chat_template tmpl = fused::cli::chat_template_for(l.dir, o.chat_template, l.tok);
  const bool terminal = isatty(STDIN_FILENO) == 1;
  std::fprintf(stderr, "[fused] chat with %s (%s, %lld positions, %s, %d threads)%s\n", l.name.c_str(), l.model->kind(),
               static_cast<long long>(l.model->capacity()), fk_isa_name(fk_isa_active()), fk_get_threads(),
               o.how.temp > 0 ? (", seed " + std::to_string(seed)).c_str() : "");
  if (terminal) std::fprintf(stderr, "[fused] /reset starts again, /exit or Ctrl-D ends, Ctrl-C stops a reply\n");
  conversation c(l, std::move(tmpl), o, seed);
  // Ctrl-C sets the flag and interrupts a blocking read (no SA_RESTART): the reply loop stops at the
  // next token, the line reader starts a new line. The process is never ended by it.
  interrupt_scope ctrl_c({.second_ends = false, .restart_reads = false});
  int unanswered = 0;
  line_reader input;
  for (;;) {
    if (terminal) {
      std::fputs("> ", stdout);
      std::fflush(stdout);
    }
    interrupted = 0;
    std::optional<std::string> line = input.next(terminal);
    if (!line) break;
    if (!line->empty() && line->back() == '\r') line->pop_back();  // CRLF input: the line, not its '\r'
    // A command with spaces around it is still the command, not a message to the model.
    const std::size_t first = line->find_first_not_of(" \t"), last = line->find_last_not_of(" \t");
    const std::string_view word = first == std::string::npos ? std::string_view() : std::string_view(*line).substr(first, last - first + 1);
    if (word == "/exit") break;
    if (word == "/reset") {
      c.reset();
      std::fprintf(stderr, "[fused] the conversation starts again\n");
      continue;
    }
    if (word.empty()) continue;  // a blank line (spaces and tabs too) asks nothing, as llama.cpp's chat skips it
    if (!c.answer(*line)) ++unanswered;
  }
  if (terminal) std::fputc('\n', stdout);
  if (unanswered > 0) {
    std::fprintf(stderr, "fused chat: error: %d message(s) could not be answered (they did not fit in the context)\n", unanswered);
    return 1;
  }
  return 0;
}

const fused::cli::command chat_cmd{
    "chat", "talk with a model: a conversation that keeps its KV cache between turns", [](CLI::App& app) -> fused::cli::runner {
      auto o = std::make_shared<options>();
      using fused::cli::integer_in;
      app.add_option("-m,--model", o->model_dir, "Hugging Face model directory; default: the default model, run as a static model")->check(fused::cli::not_empty("give a model directory"));
      app.add_option("--system", o->system, "the system message");
      app.add_option("--chat-template", o->chat_template, "the chat format instead of the model's chat_template")
          ->check(fused::cli::chat_template_choices());
      app.add_option("-n,--n-predict", o->n, "most tokens in one reply; -1 = until the model ends it or the context is full")
          ->transform(integer_in(-1, 1 << 30));
      app.add_option("-c,--ctx", o->ctx, "KV cache positions; 0 = max_position_embeddings, at most 4096 (the default model: its 512)")
          ->transform(integer_in(0, 1 << 30));
      app.add_flag("--context-shift", o->context_shift, "when the context is full, drop the oldest turns and go on");
      fused::cli::add_sampling_flags(app, o->how);
      app.add_option("-s,--seed", o->seed, "sampling seed; default: a fresh one, printed on stderr")
          ->default_str("random")
          ->transform(fused::cli::seed_range());
      app.add_option("-t,--threads", o->threads, "threads for the kernels; 0 = all cores")->transform(integer_in(0, 1024));
      return [o] { return chat(*o); };
    }};

}  // namespace fused::cli::cmd_chat
