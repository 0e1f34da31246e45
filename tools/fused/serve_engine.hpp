// The engine behind `fused serve`: N conversations (slots) over one model, each with its own KV cache
// in one state region of N x state_bytes allocated at start, and a bounded queue of requests waiting
// for a slot. One thread runs the model; the active requests take turns a token at a time (the plan
// runs one sequence per call, so sessions interleave rather than batch). A request's text reaches
// its HTTP handler through the request object (a mutex, a condition variable, the text not yet sent).
#pragma once
#include <atomic>
#include <chrono>
#include <cstdio>
#include <optional>
#include <condition_variable>
#include <cstdint>
#include <deque>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "generation.hpp"

namespace fused::cli {

struct request {
  // What to generate: set by the HTTP handler before submit().
  std::string id;  // "chatcmpl-7": for the log
  std::vector<std::int32_t> prompt;
  sampling how;
  std::uint64_t seed = 0;
  long long max_tokens = -1;  // -1: until the context is full
  std::vector<std::string> stops;
  std::vector<int> stop_ids;

  // Progress, guarded by m.
  enum class phase { queued, running, done, rejected };
  std::mutex m;
  std::condition_variable cv;
  phase at = phase::queued;
  std::string text;  // generated text not yet taken by the handler
  std::string finish_reason, error;
  std::size_t prompt_tokens = 0, completion_tokens = 0, reused = 0;
  std::atomic<bool> cancelled{false};  // the client went away

  // The handler's side: waits up to `wait` for text or the end; returns the text taken.
  template <class Duration>
  std::string take(Duration wait, bool* finished) {
    std::unique_lock lk(m);
    cv.wait_for(lk, wait, [&] { return !text.empty() || at == phase::done || at == phase::rejected; });
    *finished = at == phase::done || at == phase::rejected;
    return std::exchange(text, std::string());
  }
};

class engine {
 public:
  // log: a line on stderr for each request answered.
  engine(loaded_model& l, int parallel, std::size_t max_queue, bool log)
      : l_(l), max_queue_(max_queue), log_(log), state_(static_cast<std::size_t>(l.model->state_bytes()) * static_cast<std::size_t>(parallel)) {
    const auto each = static_cast<std::size_t>(l.model->state_bytes());
    for (int i = 0; i < parallel; ++i) slots_.push_back({slot(l.model->open_session({state_.data() + each * static_cast<std::size_t>(i), each})), {}});
    worker_ = std::thread([this] { loop(); });
  }
  ~engine() { shutdown(false); }
  engine(const engine&) = delete;
  engine& operator=(const engine&) = delete;

  std::size_t state_bytes() const { return state_.size(); }

  // Queues r; false when the queue is full or the engine is stopping (the caller answers 503).
  bool submit(std::shared_ptr<request> r) {
    {
      std::lock_guard lk(m_);
      // A request waits in the queue until the worker assigns it; the free sessions take as many.
      const std::size_t free_sessions = slots_.size() - static_cast<std::size_t>(busy_.load());
      if (stopping_ || queue_.size() >= max_queue_ + free_sessions) return false;
      queue_.push_back(std::move(r));
    }
    cv_.notify_all();
    return true;
  }

  // Stops taking requests, rejects the queued ones and, unless `finish`, cancels the running ones;
  // returns when the running ones have ended.
  void shutdown(bool finish) {
    {
      std::lock_guard lk(m_);
      stopping_ = true;
      cancel_running_ = !finish;
      for (const auto& r : queue_) end(*r, request::phase::rejected, "", "the server is shutting down");
      queue_.clear();
    }
    cv_.notify_all();
    if (worker_.joinable()) worker_.join();
  }
  void cancel_running() {
    cancel_running_ = true;
    cv_.notify_all();
  }

  bool stopping() const {
    std::lock_guard lk(m_);
    return stopping_;
  }
  int busy() const { return busy_.load(); }
  std::size_t queued() const {
    std::lock_guard lk(m_);
    return queue_.size();
  }

 private:
  struct active {
    std::shared_ptr<request> r;
    std::unique_ptr<sampler> draw;
    std::unique_ptr<io::tokenizer::stream_decoder> text;
    std::unique_ptr<stop_strings> stopper;
    std::vector<std::int32_t> history;  // prompt and reply: the repetition penalty's window
    std::int32_t last = -1;             // the token sampled last, not yet run
    std::chrono::steady_clock::time_point started = std::chrono::steady_clock::now();
  };
  struct slot_state {
    slot s;
    std::optional<active> job;
  };

  static void end(request& r, request::phase at, std::string reason, std::string error = {}) {
    {
      std::lock_guard lk(r.m);
      r.at = at;
      r.finish_reason = std::move(reason);
      r.error = std::move(error);
    }
    r.cv.notify_all();
  }
  static void emit(request& r, const std::string& text) {
    if (text.empty()) return;
    {
      std::lock_guard lk(r.m);
      r.text += text;
    }
    r.cv.notify_all();
  }

  void loop() {
    for (;;) {
      {
        std::unique_lock lk(m_);
        cv_.wait(lk, [&] { return stopping_ || !queue_.empty() || busy_ > 0; });
        if (stopping_ && busy_ == 0) return;
        assign();
      }
      for (slot_state& st : slots_)
        if (st.job) step(st);
    }
  }

  // Queued requests into free slots: each to the free slot whose cache keeps most of its prompt (slot::keepable).
  void assign() {
    while (!queue_.empty()) {
      slot_state* best = nullptr;
      std::size_t best_shared = 0;
      for (slot_state& st : slots_) {
        if (st.job) continue;
        const std::size_t shared = st.s.keepable(queue_.front()->prompt);
        if (!best || shared > best_shared) {
          best = &st;
          best_shared = shared;
        }
      }
      if (!best) return;
      std::shared_ptr<request> r = std::move(queue_.front());
      queue_.pop_front();
      active a{.r = r,
               .draw = std::make_unique<sampler>(r->how, r->seed, static_cast<std::size_t>(l_.model->vocab_size()), *l_.weights),
               .text = std::make_unique<io::tokenizer::stream_decoder>(l_.tok),
               .stopper = std::make_unique<stop_strings>(r->stops),
               .history = r->prompt};
      {
        std::lock_guard lk(r->m);
        r->at = request::phase::running;
        r->prompt_tokens = r->prompt.size();
      }
      r->cv.notify_all();
      best->job = std::move(a);
      ++busy_;
    }
  }

  void finish(slot_state& st, const std::string& reason) {
    active& a = *st.job;
    if (!a.stopper->stopped()) emit(*a.r, a.stopper->push(a.text->finish()));
    emit(*a.r, a.stopper->finish());
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - a.started).count();
    if (log_)
      std::fprintf(stderr, "[fused] %s: prompt %zu tokens (%zu reused from the cache), %zu generated in %.3f s, %s\n", a.r->id.c_str(),
                 a.r->prompt.size(), a.r->reused, a.r->completion_tokens, seconds,
                 reason == "cancelled" ? (cancel_running_ ? "cancelled by the shutdown" : "cancelled: the client went away") : reason.c_str());
    // The session is free before the client hears the end, so that its next request finds it free.
    const std::shared_ptr<request> r = std::move(a.r);
    st.job.reset();
    --busy_;
    end(*r, request::phase::done, reason);
  }

  // One model call for the request in `st`: its prompt, or the token it sampled last.
  void step(slot_state& st) {
    active& a = *st.job;
    request& r = *a.r;
    if (r.cancelled || cancel_running_) return finish(st, "cancelled");
    if (r.max_tokens == 0) return finish(st, "length");
    const std::int64_t capacity = st.s.capacity();
    try {
      std::span<const float> logits;
      if (a.last < 0) {
        std::size_t reused = 0;
        logits = st.s.feed(*l_.model, r.prompt, &reused);
        std::lock_guard lk(r.m);
        r.reused = reused;
      } else {
        logits = st.s.decode(*l_.model, a.last);
      }
      const std::int32_t next = a.draw->next(logits, a.history);
      if (std::find(r.stop_ids.begin(), r.stop_ids.end(), next) != r.stop_ids.end()) return finish(st, "stop");
      a.history.push_back(next);
      {
        std::lock_guard lk(r.m);
        ++r.completion_tokens;
      }
      if (r.completion_tokens == 1) r.cv.notify_all();  // the handler waits for the first token before its status
      emit(r, a.stopper->push(a.text->push(next)));
      if (a.stopper->stopped()) return finish(st, "stop");
      if (r.max_tokens >= 0 && static_cast<long long>(r.completion_tokens) >= r.max_tokens) return finish(st, "length");
      if (st.s.position() + 1 > capacity) return finish(st, "length");
      a.last = next;
    } catch (const std::exception& e) {
      if (log_) std::fprintf(stderr, "[fused] %s: failed after %zu generated tokens: %s\n", r.id.c_str(), r.completion_tokens, e.what());
      const std::shared_ptr<request> failed = std::move(a.r);
      st.s.clear();
      st.job.reset();
      --busy_;
      end(*failed, request::phase::done, "error", e.what());
    }
  }

  loaded_model& l_;
  std::size_t max_queue_;
  bool log_;
  runtime::aligned_bytes state_;  // every slot's KV cache, one region
  std::vector<slot_state> slots_;
  mutable std::mutex m_;
  std::condition_variable cv_;
  std::deque<std::shared_ptr<request>> queue_;
  bool stopping_ = false;
  std::atomic<bool> cancel_running_{false};
  std::atomic<int> busy_{0};
  std::thread worker_;
};

}  // namespace fused::cli
