// Compile-time diagnostics: a recorded mistake becomes one readable static_assert sentence, and the
// template's argument carries the details (op, tensors, shapes), which every compiler prints:
//   error: static assertion failed: fused: shape mismatch: an op's inputs do not fit its shape rule
//          (the op, the tensors and the shapes are in the message argument of fused::compile_error)
#pragma once
#include <cstddef>
#include <string_view>

#include "../core/text.hpp"
#include "program.hpp"

namespace fused {

inline constexpr std::size_t diagnostic_chars = 384;
using diagnostic = fixed_string<diagnostic_chars>;

template <error_kind Kind, diagnostic Message>
struct compile_error {
  static_assert(Kind != error_kind::shape_mismatch,
                "fused: shape mismatch: an op's inputs do not fit its shape rule (the op, the tensors and the shapes are in "
                "this template's Message)");
  static_assert(Kind != error_kind::unbound_feed,
                "fused: unbound feed: a step reads a tensor that is neither a feed nor produced by a step (see Message)");
  static_assert(Kind != error_kind::cycle, "fused: cycle: the steps named in Message wait for each other's results");
  static_assert(Kind != error_kind::bad_program, "fused: invalid program (see Message)");
  static constexpr bool ok = true;
};

template <diagnostic Message>
struct invalid_memory_plan {
  static_assert(Message.empty(), "fused: the memory plan failed verification (see Message): a planner bug, please report it");
  static constexpr bool ok = true;
};

}  // namespace fused
