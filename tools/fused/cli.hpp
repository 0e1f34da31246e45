// The `fused` tool's subcommand registry. Each cmd_*.cpp registers its subcommands with a
// static `fused::cli::command` object, so adding a subcommand touches no shared file.
#pragma once
#include <cctype>
#include <cstdint>
#include <functional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <vector>

namespace fused::cli {

// argv after the subcommand's own words: for `fused bench kernels --threads 2`, args = {"--threads","2"}.
using handler = std::function<int(const std::vector<std::string>& args)>;

struct entry {
  std::string name;     // one or two words: "plan", "bench kernels"
  std::string summary;  // one line for `fused --help`
  handler run;
};

inline std::vector<entry>& registry() {
  static std::vector<entry> r;
  return r;
}

struct command {
  command(std::string name, std::string summary, handler run) {
    registry().push_back({std::move(name), std::move(summary), std::move(run)});
  }
};

// A user mistake on the command line: main prints "fused <cmd>: <what>" and exits with 2.
struct usage_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// Minimal flag reader shared by the subcommands: --name VALUE, --flag, positional words.
class args_reader {
 public:
  explicit args_reader(const std::vector<std::string>& a) : args_(a), used_(a.size(), false) {}

  bool flag(std::string_view name) {
    for (std::size_t i = 0; i < args_.size(); ++i)
      if (!used_[i] && args_[i] == name) { used_[i] = true; return true; }
    return false;
  }
  // Value of `--name V` or `--name=V`; empty optional-like (has=false) when absent.
  bool value(std::string_view name, std::string& out) {
    for (std::size_t i = 0; i < args_.size(); ++i) {
      if (used_[i]) continue;
      const std::string& s = args_[i];
      if (s == name) {
        if (i + 1 >= args_.size()) throw usage_error(std::string(name) + " needs a value");
        used_[i] = used_[i + 1] = true;
        out = args_[i + 1];
        return true;
      }
      if (s.size() > name.size() && s.compare(0, name.size(), name) == 0 && s[name.size()] == '=') {
        used_[i] = true;
        out = s.substr(name.size() + 1);
        return true;
      }
    }
    return false;
  }
  std::string value_or(std::string_view name, std::string def) {
    std::string v;
    return value(name, v) ? v : def;
  }
  long long int_or(std::string_view name, long long def, long long lo, long long hi) {
    std::string v;
    if (!value(name, v)) return def;
    std::size_t pos = 0;
    long long x = 0;
    try { x = std::stoll(v, &pos); } catch (...) { pos = 0; }
    if (pos != v.size() || v.empty()) throw usage_error(std::string(name) + ": '" + v + "' is not an integer");
    if (x < lo || x > hi)
      throw usage_error(std::string(name) + ": " + v + " is outside [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
    return x;
  }
  double double_or(std::string_view name, double def) {
    std::string v;
    if (!value(name, v)) return def;
    std::size_t pos = 0;
    double x = 0;
    try { x = std::stod(v, &pos); } catch (...) { pos = 0; }
    if (pos != v.size() || v.empty()) throw usage_error(std::string(name) + ": '" + v + "' is not a number");
    return x;
  }
  std::string required(std::string_view name) {
    std::string v;
    if (!value(name, v)) throw usage_error(std::string(name) + " is required");
    return v;
  }
  // Remaining positional words (not starting with "--"), in order; marks them used.
  std::vector<std::string> positionals() {
    std::vector<std::string> out;
    for (std::size_t i = 0; i < args_.size(); ++i)
      if (!used_[i] && (args_[i].rfind("--", 0) != 0 || args_[i] == "--")) { used_[i] = true; out.push_back(args_[i]); }
    return out;
  }
  // Call last: any flag nobody asked for is a mistake, reported by name.
  void finish() const {
    for (std::size_t i = 0; i < args_.size(); ++i)
      if (!used_[i]) throw usage_error("unknown argument '" + args_[i] + "'");
  }

 private:
  const std::vector<std::string>& args_;
  std::vector<bool> used_;
};

// "1,2,3", "1 2 3" and "[1, 2, 3]" (the output of tokenize) are all accepted.
inline std::vector<std::int32_t> parse_ids(const std::vector<std::string>& words) {
  std::vector<std::int32_t> ids;
  for (const std::string& w : words) {
    std::size_t i = 0;
    while (i < w.size()) {
      const char c = w[i];
      if (c == ',' || c == '[' || c == ']' || c == ' ' || c == '\t' || c == '\n') { ++i; continue; }
      std::size_t end = i;
      while (end < w.size() && (std::isdigit(static_cast<unsigned char>(w[end])) || (end == i && w[end] == '-'))) ++end;
      const std::string num = w.substr(i, end - i);
      long long v = 0;
      try {
        std::size_t used = 0;
        v = std::stoll(num, &used);
        if (used != num.size()) throw std::invalid_argument(num);
      } catch (const std::exception&) {
        throw usage_error("'" + w + "' is not a list of token ids like 1,2,3");
      }
      if (v < 0 || v > INT32_MAX) throw usage_error("token id " + num + " is out of range");
      ids.push_back(static_cast<std::int32_t>(v));
      i = end;
    }
  }
  return ids;
}

}  // namespace fused::cli
