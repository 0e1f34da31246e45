// The Qwen2 configs the tests carry (tests/data/configs), each planned at run time (plan_for) for
// prefill 512 and decode over a KV capacity of 4096, for tests that check a property of every plan.
#pragma once
#include <doctest/doctest.h>

#include <fused/models/hf_config.hpp>
#include <fused/models/decoder_plan.hpp>
#include <fused/models/qwen2.hpp>

#include <string>

namespace fused_test {

inline fused::decoder::config config_named(const std::string& name) {
  return fused::decoder::load_hf_config(std::string(FUSED_TEST_DATA) + "/configs/" + name + ".json").arch;
}

// f(config, mode, planned) for every config x mode, with both named in any failure's report.
template <class F>
void for_each_config_plan(F&& f) {
  for (const std::string name : {"qwen2-0.5b", "qwen2.5-0.5b", "qwen2-1.5b", "qwen2-7b"}) {
    const fused::decoder::config c = config_named(name);
    for (const fused::decoder::mode m : {fused::decoder::mode::prefill(512, 4096), fused::decoder::mode::decode(4096)}) {
      CAPTURE(name);
      CAPTURE(m.tokens);
      f(c, m, fused::decoder::plan_for(fused::qwen2::entry, c, m));
    }
  }
}

}  // namespace fused_test
