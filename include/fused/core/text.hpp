// Small constexpr text helpers: names with a layer index, integer formatting, fixed strings.
// The same code formats diagnostics at compile time and at run time; run-time callers take a
// std::string through fused::to_string (core/text_string.hpp): no <string> here, the constexpr
// spine does not parse it.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string_view>
#include <vector>

namespace fused {

// Text built in constant evaluation. Not std::string: clang cannot evaluate libstdc++'s small-string
// union in a constant expression, and a plain vector of chars is also cheaper for g++'s evaluator.
class text {
 public:
  constexpr text() = default;
  constexpr text(const char* s) { append(std::string_view(s)); }  // NOLINT: implicit, like a string
  constexpr text(std::string_view s) { append(s); }                // NOLINT

  constexpr text& operator+=(std::string_view s) { append(s); return *this; }
  constexpr text& operator+=(const char* s) { append(std::string_view(s)); return *this; }
  constexpr text& operator+=(const text& t) { append(t.view()); return *this; }
  constexpr text& operator+=(char ch) { c_.push_back(ch); return *this; }
  friend constexpr text operator+(text a, const text& b) { a += b; return a; }
  friend constexpr text operator+(text a, const char* b) { a += b; return a; }
  friend constexpr text operator+(const char* a, const text& b) { text t(a); t += b; return t; }

  constexpr std::string_view view() const { return {c_.data(), c_.size()}; }
  constexpr bool empty() const { return c_.empty(); }
  constexpr std::size_t size() const { return c_.size(); }
  friend constexpr bool operator==(const text& a, const text& b) { return a.view() == b.view(); }
  friend constexpr bool operator==(const text& a, std::string_view b) { return a.view() == b; }
  friend constexpr bool operator==(const text& a, const char* b) { return a.view() == std::string_view(b); }  // not ambiguous

 private:
  // A loop, not vector::insert: g++ 12 at -O3 reports a false stringop-overflow for the range
  // insert of a short literal once it is inlined into a caller.
  constexpr void append(std::string_view s) {
    c_.reserve(c_.size() + s.size());
    for (const char ch : s) c_.push_back(ch);
  }
  std::vector<char> c_;
};

constexpr text to_text(std::int64_t v) {
  if (v == 0) return "0";
  const bool neg = v < 0;
  std::uint64_t u = neg ? static_cast<std::uint64_t>(-(v + 1)) + 1 : static_cast<std::uint64_t>(v);
  char buf[24]{};
  int n = 0;
  while (u) { buf[n++] = static_cast<char>('0' + u % 10); u /= 10; }
  text t;
  if (neg) t += '-';
  while (n) t += buf[--n];
  return t;
}

// A tensor name: a pattern with at most one "{}" replaced by an index, e.g.
// {"model.layers.{}.mlp.up_proj.weight", 3}. Patterns are string literals, so names cost nothing
// to store in a constexpr program and are formatted only when printed.
struct name_ref {
  const char* pattern = "";
  int index = -1;
  const char* suffix = "";  // appended: names derived from another ("layers.{}.q" + ".work")

  constexpr text str() const {
    std::string_view p(pattern);
    auto at = p.find("{}");
    // Without an index the pattern is the name itself (a graph file's names may hold "{}").
    if (index < 0 || at == std::string_view::npos) return text(p) + suffix;
    text out(p.substr(0, at));
    out += to_text(index);
    out += p.substr(at + 2);
    out += suffix;
    return out;
  }
  friend constexpr bool operator==(const name_ref& a, const name_ref& b) {
    return a.index == b.index && std::string_view(a.pattern) == std::string_view(b.pattern) &&
           std::string_view(a.suffix) == std::string_view(b.suffix);
  }
};

// A string usable as a template argument, so a compile-time diagnostic can carry its message into
// the name of a template the compiler prints (the CTRE habit: one readable sentence per mistake).
template <std::size_t N>
struct fixed_string {
  char text[N]{};
  constexpr fixed_string() = default;
  constexpr explicit fixed_string(std::string_view s) {
    for (std::size_t i = 0; i < s.size() && i + 1 < N; ++i) text[i] = s[i];
  }
  constexpr bool empty() const { return text[0] == '\0'; }
  constexpr std::string_view view() const {
    std::size_t n = 0;
    while (n < N && text[n]) ++n;
    return {text, n};
  }
};

}  // namespace fused
