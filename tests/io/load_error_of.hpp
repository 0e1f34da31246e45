// Shared by the loader tests (safetensors, weights index): the message a load fails with.
#pragma once
#include <fused/io/load_error.hpp>

#include <functional>
#include <string>

namespace fused_test {

// The message of the load_error `f` throws, or "no error".
inline std::string load_error_of(const std::function<void()>& f) {
  try {
    f();
  } catch (const fused::io::load_error& e) {
    return e.what();
  }
  return "no error";
}

}  // namespace fused_test
