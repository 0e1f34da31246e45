// Element types of tensors in a program, and their sizes.
#pragma once
#include <cstdint>

namespace fused {

enum class dtype : std::uint8_t { bf16, f16, f32, i32, i64, boolean };

constexpr std::int64_t size_of(dtype t) {
  switch (t) {
    case dtype::bf16: case dtype::f16: return 2;
    case dtype::f32: case dtype::i32: return 4;
    case dtype::i64: return 8;
    case dtype::boolean: return 1;
  }
  return 0;
}

constexpr const char* name_of(dtype t) {
  switch (t) {
    case dtype::bf16: return "bf16";
    case dtype::f16: return "f16";
    case dtype::f32: return "f32";
    case dtype::i32: return "i32";
    case dtype::i64: return "i64";
    case dtype::boolean: return "bool";
  }
  return "?";
}

}  // namespace fused
