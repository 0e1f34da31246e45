// Reading a stream whose end may never come (a device such as /dev/zero, `yes |` on a pipe): in
// chunks, up to a limit.
#pragma once
#include <cstddef>
#include <istream>
#include <optional>
#include <string>

namespace fused::io {

// All of `in`, or nullopt as soon as it holds more than `max_bytes`; the caller names the source.
inline std::optional<std::string> read_at_most(std::istream& in, std::size_t max_bytes) {
  std::string text;
  char chunk[1 << 16];
  while (in.read(chunk, sizeof chunk) || in.gcount() > 0) {
    if (text.size() + static_cast<std::size_t>(in.gcount()) > max_bytes) return std::nullopt;
    text.append(chunk, static_cast<std::size_t>(in.gcount()));
  }
  return text;
}

}  // namespace fused::io
