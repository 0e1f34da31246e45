// The families the run time knows, by config.json's "model_type": one line a family.
#pragma once
#include <array>
#include <string_view>

#include "family.hpp"
#include "llama.hpp"
#include "mistral.hpp"
#include "qwen2.hpp"
#include "qwen3.hpp"

namespace fused::decoder {

inline constexpr std::array<family_entry, 4> families{{
    entry_of<qwen2::family>(),
    entry_of<qwen3::family>(),
    entry_of<llama::family>(),
    entry_of<mistral::family>(),
}};

// The family whose model_type (or, when `by_architecture`, whose architecture) is `name`; nullptr if none.
constexpr const family_entry* find_family(std::string_view name, bool by_architecture = false) {
  for (const family_entry& f : families)
    if ((by_architecture ? f.architecture : f.model_type) == name) return &f;
  return nullptr;
}

}  // namespace fused::decoder
