// The one exception type the loaders throw for a bad input file (config.json, safetensors).
// Its message always starts with the file, then names the field or tensor at fault, so a user can
// act on it without a debugger: `config.json: field "num_key_value_heads": 3 does not divide ...`.
// Callers (the CLI, the fuzz harnesses) catch exactly this type: anything else escaping a loader is
// a bug in the loader, not in the file.
#pragma once
#include <fmt/format.h>

#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>

namespace fused::io {

class load_error : public std::runtime_error {
 public:
  using std::runtime_error::runtime_error;
};

// Throws load_error("<file>: <formatted message>").
template <class... Args>
[[noreturn]] void throw_load_error(std::string_view file, fmt::format_string<Args...> format,
                                   Args&&... args) {
  throw load_error(fmt::format("{}: {}", file, fmt::format(format, std::forward<Args>(args)...)));
}

}  // namespace fused::io
