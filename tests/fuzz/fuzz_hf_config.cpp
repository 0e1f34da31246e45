// libFuzzer harness: arbitrary bytes -> parse_hf_config, and the same bytes as a
// generation_config.json -> apply_generation_config. Every input must end in a result or a
// load_error; anything else escaping (another exception type, a crash, ASan/UBSan report) is a
// bug. An accepted config must satisfy the invariants the rest of the library relies on.
#include "fused/io/hf_config.hpp"

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace {

void check(bool ok) {
  if (!ok) __builtin_trap();
}

void check_token_ids(const fused::io::hf_model_info& info) {
  for (int id : info.eos_token_ids) check(id >= 0 && id < info.arch.vocab_size);
  check(!info.bos_token_id || (*info.bos_token_id >= 0 && *info.bos_token_id < info.arch.vocab_size));
}

void fuzz_config(std::string_view text) {
  using namespace fused::io;
  hf_model_info info;
  try {
    info = parse_hf_config(text, "fuzz/config.json");
  } catch (const load_error&) {
    return;
  }
  const fused::qwen2::config& c = info.arch;
  check(c.vocab_size > 0 && c.hidden_size > 0 && c.intermediate_size > 0 && c.num_hidden_layers > 0);
  check(c.num_attention_heads > 0 && c.num_key_value_heads > 0 && c.num_attention_heads % c.num_key_value_heads == 0);
  check(c.head_dim > 0 && c.head_dim % 2 == 0);
  check(c.max_position_embeddings > 0 && c.rms_norm_eps > 0 && c.rms_norm_eps < 1 && c.rope_theta > 0);
  check_token_ids(info);
  check(config_differences(c, c).empty());
  fused::qwen2::config other = c;
  other.rope_theta *= 2;
  check(config_differences(c, other).size() == 1);
}

void fuzz_generation_config(std::string_view text) {
  using namespace fused::io;
  hf_model_info info{.arch = {4096, 256, 768, 4, 8, 2, 32, 512, 1e-6, 1e4, true},
                     .eos_token_ids = {4093},
                     .bos_token_id = 4093,
                     .dtype = "bfloat16"};
  try {
    apply_generation_config(text, "fuzz/generation_config.json", info);
  } catch (const load_error&) {
    return;
  }
  check_token_ids(info);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  fuzz_config(text);
  fuzz_generation_config(text);
  return 0;
}
