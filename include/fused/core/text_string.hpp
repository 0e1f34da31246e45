// std::string from the constexpr text types, for run-time code (errors, JSON, reports). Apart from
// core/text.hpp so that what only plans at compile time does not parse <string>.
#pragma once
#include <string>

#include "text.hpp"

// For run-time code that builds a large text once per call: the C emitter, the plan's text, JSON
// and SVG, a graph file's JSON. Its time is nothing beside a model's, while its long chains of
// std::string expressions, optimized and inlined, are the largest functions the library compiles
// (figures: docs/COMPILE_TIME.md, "CI's time"). Never for code a model or a parser runs.
#if defined(__clang__)
#define FUSED_UNOPTIMIZED __attribute__((optnone, noinline))
#elif defined(__GNUC__)
#define FUSED_UNOPTIMIZED __attribute__((optimize("O0"), noinline))
#else
#define FUSED_UNOPTIMIZED
#endif

namespace fused {

inline std::string to_string(const text& t) { return std::string(t.view()); }
inline std::string to_string(const name_ref& n) { return to_string(n.str()); }

}  // namespace fused
