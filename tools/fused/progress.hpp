// Progress of long work on a terminal: one line on stderr rewritten in place ("\r"), at most ten
// times a second, cleared when the work ends. Nothing at all when stderr is not a terminal, so logs,
// pipes and the tests see only the tool's real output.
#pragma once
#include <unistd.h>

#include <chrono>
#include <cstdint>
#include <cstdio>
#include <string>
#include <utility>

namespace fused::cli {

class progress {
 public:
  // `what`: the work ("loading weights", "prefill"); `unit`: what is counted ("MB", "tokens").
  progress(std::string what, std::string unit, double total)
      : what_(std::move(what)), unit_(std::move(unit)), total_(total), on_(isatty(fileno(stderr)) == 1), start_(clock::now()) {}
  progress(const progress&) = delete;
  progress& operator=(const progress&) = delete;
  ~progress() { finish(); }

  void set_total(double total) { total_ = total; }
  void update(double done) {
    if (!on_) return;
    const auto now = clock::now();
    if (shown_ && now - last_ < std::chrono::milliseconds(100) && done < total_) return;
    last_ = now;
    shown_ = true;
    const double s = std::chrono::duration<double>(now - start_).count();
    const double rate = s > 0 ? done / s : 0;
    std::fprintf(stderr, "\r\033[K[fused] %s: %.1f / %.1f %s (%.1f %s/s)", what_.c_str(), done, total_, unit_.c_str(), rate, unit_.c_str());
    std::fflush(stderr);
  }
  void finish() {
    if (!on_ || !shown_) return;
    std::fprintf(stderr, "\r\033[K");
    std::fflush(stderr);
    shown_ = false;
  }

 private:
  using clock = std::chrono::steady_clock;
  std::string what_, unit_;
  double total_;
  bool on_, shown_ = false;
  clock::time_point start_, last_{};
};

// A weight_store::load_progress that shows "loading weights: x / y MB (z MB/s)" on a terminal.
inline auto weights_progress(progress& bar) {
  return [&bar](std::int64_t done, std::int64_t total) {
    bar.set_total(static_cast<double>(total) / 1e6);
    bar.update(static_cast<double>(done) / 1e6);
  };
}

}  // namespace fused::cli
