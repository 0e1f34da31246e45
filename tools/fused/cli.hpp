// The `fused` tool's subcommand registry, on CLI11. Each cmd_*.cpp registers its subcommands with a
// static `fused::cli::command` object, so adding a subcommand touches no shared file: the object's
// setup function declares the flags on the CLI11 subcommand it is given (which makes `--help`, the
// defaults shown there, unknown-flag and missing-value errors CLI11's business) and returns the
// function that runs the command once the command line has parsed.
#pragma once
#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <CLI/CLI.hpp>

#include <algorithm>
#include <atomic>
#include <cctype>
#include <cerrno>
#include <cfloat>
#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <iterator>
#include <functional>
#include <map>
#include <optional>
#include <stdexcept>
#include <span>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include <fused/io/read_bounded.hpp>
#include <fused/runtime/session.hpp>

namespace fused::cli {

// The machine's physical memory in bytes (0 where the system does not say): a run that plans past it
// is named before it allocates (its pages would be zeroed, and the OOM killer would end it).
using fused::runtime::physical_memory_bytes;

// Refuses, before they are allocated, buffers of `bytes` that exceed the machine's memory: `what` names
// them ("x.json: its state and activation arena"). Their pages would be zeroed as they are touched, and
// the OOM killer would end the run partway through.
inline void require_memory(const std::string& what, double bytes) {
  const double memory = physical_memory_bytes();
  if (memory <= 0 || bytes <= memory) return;
  char figures[96];
  std::snprintf(figures, sizeof figures, " take %.1f GiB; this machine has %.1f GiB of memory", bytes / (1 << 30), memory / (1 << 30));
  throw std::runtime_error(what + figures);
}

using runner = std::function<int()>;
using setup_fn = std::function<runner(CLI::App& sub)>;

struct entry {
  std::string name;     // one or two words: "plan", "bench kernels"
  std::string summary;  // one line for `fused --help`
  setup_fn setup;
};

inline std::vector<entry>& registry() {
  static std::vector<entry> r;
  return r;
}

struct command {
  command(std::string name, std::string summary, setup_fn setup) {
    registry().push_back({std::move(name), std::move(summary), std::move(setup)});
  }
};

// A user mistake on the command line found after parsing (two flags that exclude each other, a value
// the model cannot take): main prints "fused <cmd>: <what>" and exits with 2, as for a parse error.
struct usage_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// A decimal number (digits, a point, an exponent; from_chars), finite and representable: strtod, which
// CLI11 reads with, also takes hex (0x10 = 16) and turns 1e-400 into 0 silently.
inline std::optional<double> finite_number(std::string_view text) {
  if (text.size() > 1 && text[0] == '+') text.remove_prefix(1);
  double x = 0;
  const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), x, std::chars_format::general);
  if (ec != std::errc() || end != text.data() + text.size() || !std::isfinite(x)) return std::nullopt;
  return x;
}

// A number in [lo, hi], or [lo, hi) with `hi_excluded`; NaN and infinities are refused (CLI::Range
// lets NaN through: every comparison with NaN is false), and so is a value f32 holds as 0 or a
// denormal (a learning rate of 1e-320 would train with 0).
inline CLI::Validator finite_in(double lo, double hi, bool hi_excluded = false) {
  const std::string range = "[" + CLI::detail::to_string(lo) + ", " + CLI::detail::to_string(hi) + (hi_excluded ? ")" : "]");
  return CLI::Validator(
      [lo, hi, hi_excluded, range](std::string& text) -> std::string {
        const std::optional<double> x = finite_number(text);
        if (!x) return "'" + text + "' is not a finite decimal number";
        if (*x < lo || (hi_excluded ? *x >= hi : *x > hi)) return text + " is outside " + range;
        // The kernels compute in f32: a value below its smallest normal number would be 0 or lose its digits.
        if (*x != 0 && std::fabs(*x) < FLT_MIN) return text + " is below f32's smallest normal number, " + CLI::detail::to_string(FLT_MIN);
        return {};
      },
      range, "finite_in");
}

// A finite number in [lo, hi): a momentum or an AdamW beta, which 1 would make no average.
inline CLI::Validator finite_below(double lo, double hi) { return finite_in(lo, hi, true); }

// What is wrong with `text` as a decimal integer in [lo, hi] (from_chars: CLI11's lexical_cast, strtoll
// in base 0, reads 010 as 8, 0x10 as 16 and a number past 2^63 as 2^63 - 1), empty when nothing is; the
// value into `value`. A leading + is taken; for an unsigned type a leading - is a number outside the
// range, not text (CLI11 would read -5 into one as 2^64 - 5).
template <class Int>
std::string integer_problem(std::string_view text, Int lo, Int hi, Int& value) {
  const bool plus = text.size() > 1 && text[0] == '+', minus = std::is_unsigned_v<Int> && text.size() > 1 && text[0] == '-';
  if (plus && text[1] == '-') return "'" + std::string(text) + "' is not an integer";
  const char* first = text.data() + (plus || minus ? 1 : 0);
  const auto [end, ec] = std::from_chars(first, text.data() + text.size(), value);
  if (ec == std::errc::invalid_argument || end != text.data() + text.size() || text.empty()) return "'" + std::string(text) + "' is not an integer";
  if (minus || ec == std::errc::result_out_of_range || value < lo || value > hi)
    return std::string(text) + " is outside [" + std::to_string(lo) + ", " + std::to_string(hi) + "]";
  return {};
}

// An integer in [lo, hi], with the range in the message. Attach it with ->transform(): it hands CLI11
// the canonical digits, and ->check() would hand it a copy (non-modifying), so 010 would reach
// CLI11's base-0 reading and become 8.
inline CLI::Validator integer_in(long long lo, long long hi) {
  const std::string range = "[" + std::to_string(lo) + ", " + std::to_string(hi) + "]";
  return CLI::Validator(
      [lo, hi](std::string& text) -> std::string {
        long long x = 0;
        std::string problem = integer_problem(text, lo, hi, x);
        if (problem.empty()) text = std::to_string(x);
        return problem;
      },
      range, "integer_in");
}

// A 64-bit seed, 0 .. 2^64 - 1, attached with ->transform() as integer_in.
inline CLI::Validator seed_range() {
  return CLI::Validator(
      [](std::string& text) -> std::string {
        std::uint64_t x = 0;
        std::string problem = integer_problem<std::uint64_t>(text, 0, UINT64_MAX, x);
        if (problem.empty()) text = std::to_string(x);
        return problem;
      },
      "[0, " + std::to_string(UINT64_MAX) + "]", "seed_range");
}

// A non-empty text: `hint` says what to give instead (an empty --host would listen on every interface).
inline CLI::Validator not_empty(std::string hint) {
  return CLI::Validator([hint](std::string& text) -> std::string { return text.empty() ? "is empty: " + hint : std::string{}; }, "TEXT",
                        "not_empty");
}

// One of the given words.
inline CLI::Validator one_of(std::vector<std::string> words) {
  std::string list;
  for (const auto& w : words) list += (list.empty() ? "" : "|") + w;
  return CLI::Validator(
      [words, list](std::string& text) -> std::string {
        for (const auto& w : words)
          if (text == w) return {};
        return "'" + text + "' is not one of " + list;
      },
      list, "one_of");
}

// Text from a file or a terminal as an error may quote it: control bytes (NUL first: it would end the
// message) and bytes that are not UTF-8 as \xHH, the rest as it is.
inline std::string printable(std::string_view text) {
  std::string out;
  const auto hex = [&out](unsigned char b) {
    static constexpr char digits[] = "0123456789ABCDEF";
    out += "\\x";
    out += digits[b >> 4];
    out += digits[b & 15];
  };
  for (std::size_t i = 0; i < text.size();) {
    const auto b = static_cast<unsigned char>(text[i]);
    if (b < 0x80) {
      if (b < 0x20 || b == 0x7F) hex(b);
      else out += static_cast<char>(b);
      ++i;
      continue;
    }
    // a well-formed UTF-8 sequence (no overlong form, surrogate or code point past U+10FFFF) is kept
    const std::size_t n = b >= 0xF0 ? 4 : b >= 0xE0 ? 3 : b >= 0xC2 ? 2 : 0;
    bool ok = n > 0 && b <= 0xF4 && i + n <= text.size();
    for (std::size_t k = 1; ok && k < n; ++k) ok = (static_cast<unsigned char>(text[i + k]) & 0xC0) == 0x80;
    if (ok && n >= 3) {
      const auto second = static_cast<unsigned char>(text[i + 1]);
      ok = !(b == 0xE0 && second < 0xA0) && !(b == 0xED && second >= 0xA0) && !(b == 0xF0 && second < 0x90) && !(b == 0xF4 && second >= 0x90);
    }
    if (!ok) {
      hex(b);
      ++i;
      continue;
    }
    out.append(text.substr(i, n));
    i += n;
  }
  return out;
}

// "1,2,3", "1 2 3" and "[1, 2, 3]" (the output of tokenize) are all accepted; an empty id ("1,,2",
// ",1", "1,2,") is an error, not an id less. `flag` names the option (or argument) they came from,
// for the error; the word an error quotes is printable().
inline std::vector<std::int32_t> parse_ids(const std::vector<std::string>& words, std::string_view flag) {
  std::vector<std::int32_t> ids;
  bool comma_since_id = false;
  bool opened = false, closed = false;  // one [ ... ] around the whole list, or none
  for (const std::string& w : words) {
    std::size_t i = 0;
    while (i < w.size()) {
      const char c = w[i];
      if (c == ',') {
        if (ids.empty() || comma_since_id) throw usage_error(std::string(flag) + ": '" + printable(w) + "' has an empty token id (two commas, or one first)");
        comma_since_id = true;
        ++i;
        continue;
      }
      if (c == '[' && (opened || !ids.empty())) throw usage_error(std::string(flag) + ": '" + printable(w) + "' has a '[' that does not open the list");
      if (c == ']' && (!opened || closed)) throw usage_error(std::string(flag) + ": '" + printable(w) + "' has a ']' that closes no '['");
      if (closed && c != ' ' && c != '\t' && c != '\n') throw usage_error(std::string(flag) + ": '" + printable(w) + "' goes on after the list's ']'");
      if (c == '[' || c == ']') {
        (c == '[' ? opened : closed) = true;
        ++i;
        continue;
      }
      if (c == ' ' || c == '\t' || c == '\n') { ++i; continue; }
      std::size_t end = i;
      while (end < w.size() && (std::isdigit(static_cast<unsigned char>(w[end])) || (end == i && w[end] == '-'))) ++end;
      const std::string num = w.substr(i, end - i);
      long long v = 0;
      const auto [num_end, error] = std::from_chars(num.data(), num.data() + num.size(), v);
      if (num.empty() || (error != std::errc() && error != std::errc::result_out_of_range) || num_end != num.data() + num.size())
        throw usage_error(std::string(flag) + ": '" + printable(w) + "' is not a list of token ids like 1,2,3");
      if (error == std::errc::result_out_of_range || v < 0 || v > INT32_MAX) throw usage_error(std::string(flag) + ": token id " + num + " is outside [0, " + std::to_string(INT32_MAX) + "]");
      ids.push_back(static_cast<std::int32_t>(v));
      comma_since_id = false;
      i = end;
    }
  }
  // about the whole list: quoted whole (its last word alone, "2" of "[1, 2", points at nothing)
  std::string whole;
  for (const std::string& w : words) whole += (whole.empty() ? "" : " ") + w;
  if (whole.size() > 80) whole = "..." + whole.substr(whole.size() - 77);
  if (opened && !closed) throw usage_error(std::string(flag) + ": '" + printable(whole) + "' has a '[' without its ']'");
  if (comma_since_id) throw usage_error(std::string(flag) + ": '" + printable(whole) + "' ends with a comma (an empty token id)");
  return ids;
}

// --stop-ids as given (parse_ids's forms; CLI11's delimiter would drop an empty id, "1,,2" read as
// 1,2): at most 4 ids, none when the flag is absent.
inline std::vector<int> stop_ids(const std::vector<std::string>& words) {
  const std::vector<std::int32_t> ids = parse_ids(words, "--stop-ids");
  if (ids.size() > 4) throw usage_error("--stop-ids: at most 4 ids, got " + std::to_string(ids.size()));
  if (ids.empty() && !words.empty()) throw usage_error("--stop-ids: give at least one token id");
  return {ids.begin(), ids.end()};
}

// A list option's word with an empty item ("1,,4", "[1,2,]"), said one way wherever it is found.
inline std::string empty_item(std::string_view flag, const std::string& word) {
  return std::string(flag) + ": '" + printable(word) + "' has an empty item (two commas, or one at an end)";
}

// A list option's integers, each in [lo, hi], from its words ("1,2,4" or "1 2 4"): CLI11's delimiter
// would drop an empty item ("1,,4" read as 1,4), so the option keeps its words and this reads them.
inline std::vector<long long> integer_list(const std::vector<std::string>& words, std::string_view flag, long long lo, long long hi) {
  std::vector<long long> values;
  for (const std::string& word : words)
    for (std::size_t begin = 0;;) {
      const std::size_t comma = std::min(word.find(',', begin), word.size());
      long long x = 0;
      if (comma == begin) throw usage_error(empty_item(flag, word));
      if (std::string problem = integer_problem(std::string_view(word).substr(begin, comma - begin), lo, hi, x); !problem.empty())
        throw usage_error(std::string(flag) + ": " + printable(problem));
      values.push_back(x);
      if (comma == word.size()) break;
      begin = comma + 1;
    }
  return values;
}

// Every id `flag` gave is inside the vocabulary, checked before any work: a run that stopped at the
// first bad one would count its index from that call, not from the flag.
inline void require_in_vocabulary(std::span<const std::int32_t> ids, std::string_view flag, std::int64_t vocab_size) {
  for (std::size_t i = 0; i < ids.size(); ++i)
    if (ids[i] < 0 || ids[i] >= vocab_size)
      throw std::invalid_argument(std::string(flag) + ": token id " + std::to_string(ids[i]) + " (at index " + std::to_string(i) +
                                  ") is outside the vocabulary [0, " + std::to_string(vocab_size) + ")");
}

// --bind NAME=VALUE: a symbol of a graph file and its value.
inline std::pair<std::string, std::int64_t> parse_bind(const std::string& word) {
  const auto eq = word.find('=');
  std::int64_t v = 0;
  std::size_t used = 0;
  try {
    if (eq == std::string::npos) throw std::invalid_argument(word);
    v = std::stoll(word.substr(eq + 1), &used);
  } catch (const std::exception&) {
    throw usage_error("--bind " + word + ": expected NAME=INTEGER");
  }
  if (used != word.size() - eq - 1) throw usage_error("--bind " + word + ": expected NAME=INTEGER");
  if (v < 1) throw usage_error("--bind " + word + ": a symbol is a dim, which must be positive");  // before it meets a shape
  return {word.substr(0, eq), v};
}

// Every --bind word as symbol -> value; a symbol bound twice is refused (which value was meant?).
inline std::map<std::string, std::int64_t> parse_binds(const std::vector<std::string>& words) {
  std::map<std::string, std::int64_t> values;
  for (const std::string& word : words) {
    const auto [name, v] = parse_bind(word);
    if (const auto [it, fresh] = values.try_emplace(name, v); !fresh)
      throw usage_error("--bind binds " + name + " twice (" + name + "=" + std::to_string(it->second) + " and " + word + ")");
  }
  return values;
}

// The bytes of a file named on the command line, "-" for standard input; `what` says what the file is
// for, in errors ("the prompt file"). A directory is named as one, not read as an empty stream; more
// than `max_bytes` is refused as soon as it is read past (/dev/zero, `yes |` would fill the memory); a
// read error is one (standard input a directory: EISDIR), not an end.
inline std::string read_input_file(const std::string& path, const std::string& what, std::size_t max_bytes = std::size_t{1} << 30) {
  const std::string source = path == "-" ? "standard input (" + what + ")" : path;
  std::error_code ec;
  if (path != "-" && std::filesystem::is_directory(path, ec)) throw std::runtime_error(path + ": is a directory, not " + what);
  if (path == "-" && ::fcntl(0, F_GETFD) == -1) throw std::runtime_error(source + ": it is closed");
  io::read_result r = path == "-" ? io::read_fd_at_most(0, max_bytes) : io::read_file_at_most(path, max_bytes);
  if (r.too_large)
    throw std::runtime_error(source + ": " + (path == "-" ? std::string("it") : what) + " is larger than " + std::to_string(max_bytes >> 20) +
                             " MiB, the most this command reads");
  if (const std::string why = path == "-" ? io::failure(r) : io::failure(r, what); !why.empty()) throw std::runtime_error(source + ": " + why);
  return std::move(r.bytes);
}

// A path a command reads, for require_out_elsewhere, and whose it is ("the model's", "the --inputs"):
// a directory stands for its regular files, each named as the owner's "weight file" or "file".
struct read_path {
  std::string path, owner;
};

// The file --out names must not be one the command reads: writing it would destroy that input (and a
// weight file stays mapped while the command runs). The same file by identity: links, ./ and ../
// alike. `result` says what --out holds, for the advice ("the logits").
inline void require_out_elsewhere(std::string_view flag, const std::string& out, std::string_view result,
                                  std::initializer_list<read_path> reads) {
  std::error_code ec;
  if (out.empty() || !std::filesystem::exists(out, ec)) return;
  const auto refuse = [&](const std::string& what) {
    throw usage_error(std::string(flag) + ": " + out + " is " + what + "; write " + std::string(result) + " elsewhere");
  };
  for (const read_path& r : reads) {
    if (r.path.empty()) continue;
    if (std::filesystem::is_directory(r.path, ec)) {
      for (const auto& entry : std::filesystem::directory_iterator(r.path, ec))
        if (entry.is_regular_file(ec) && std::filesystem::equivalent(out, entry.path(), ec))
          refuse(r.owner + (entry.path().extension() == ".safetensors" ? " weight file " : " file ") + entry.path().string());
    } else if (std::filesystem::equivalent(out, r.path, ec)) {
      refuse(r.owner + " file " + r.path);
    }
  }
}

// ---- Ctrl-C ----
// While an interrupt_scope lives, SIGINT (and SIGTERM where asked) sets `interrupted` to the signal's
// number instead of ending the process: the command stops where it chooses (run after a token, chat
// at the end of a reply, train after a step). An atomic, not a volatile sig_atomic_t: the signal may
// land on any thread (OpenMP's workers too).
inline std::atomic<int> interrupted{0};
static_assert(std::atomic<int>::is_always_lock_free, "a signal handler may only touch lock-free atomics");
extern "C" inline void on_interrupt_signal(int signal) { interrupted.store(signal, std::memory_order_relaxed); }

struct interrupt_options {
  bool sigterm_too = false;   // SIGTERM stops the command as SIGINT does
  bool second_ends = true;    // the handler resets itself: a second signal ends the process
  bool restart_reads = true;  // SA_RESTART: a blocking read or write goes on (false: it fails with EINTR, as chat's line reader wants)
};
class interrupt_scope {
 public:
  explicit interrupt_scope(interrupt_options o = {}) : sigterm_too_(o.sigterm_too) {
    interrupted = 0;
    struct sigaction sa {};
    sa.sa_handler = on_interrupt_signal;
    sa.sa_flags = (o.second_ends ? SA_RESETHAND : 0) | (o.restart_reads ? SA_RESTART : 0);
    sigemptyset(&sa.sa_mask);
    sigaction(SIGINT, &sa, &old_int_);
    if (sigterm_too_) sigaction(SIGTERM, &sa, &old_term_);
  }
  ~interrupt_scope() {
    sigaction(SIGINT, &old_int_, nullptr);
    if (sigterm_too_) sigaction(SIGTERM, &old_term_, nullptr);
  }
  interrupt_scope(const interrupt_scope&) = delete;
  interrupt_scope& operator=(const interrupt_scope&) = delete;

 private:
  bool sigterm_too_;
  struct sigaction old_int_ {}, old_term_ {};
};

}  // namespace fused::cli
