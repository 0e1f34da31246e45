// std::string from the constexpr text types, for run-time code (errors, JSON, reports). Apart from
// core/text.hpp so that what only plans at compile time does not parse <string>.
#pragma once
#include <string>

#include "text.hpp"

namespace fused {

inline std::string to_string(const text& t) { return std::string(t.view()); }
inline std::string to_string(const name_ref& n) { return to_string(n.str()); }

}  // namespace fused
