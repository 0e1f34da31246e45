// libFuzzer harness: arbitrary bytes -> parse_hf_config, and the same bytes as a
// generation_config.json -> apply_generation_config. Every input must end in a result or a
// load_error; anything else escaping (another exception type, a crash, ASan/UBSan report) is a
// bug. An accepted config must satisfy the invariants the rest of the library relies on, and must
// plan: prefill and decode at a small length through plan_for (the run-time planner `fused plan
// --config` uses), without an exception, with a plan the verifier accepts. plan_for checks the
// whole config's sizes (qwen2_limits.hpp); the harness then builds at most max_fuzz_layers layers,
// since every layer has the same shapes: more would cost time, not coverage.
#include "fused/models/hf_config.hpp"
#include "fused/models/decoder_plan.hpp"

#include <algorithm>

#include <cstddef>
#include <cstdint>
#include <string_view>

#include "harness.hpp"

namespace fuzz::hf_config {

namespace {

void check_token_ids(const fused::decoder::hf_model_info& info) {
  for (int id : info.eos_token_ids) check(id >= 0 && id < info.arch.vocab_size);
  check(!info.bos_token_id || (*info.bos_token_id >= 0 && *info.bos_token_id < info.arch.vocab_size));
}

constexpr int max_fuzz_layers = 3;

void check_plan(const fused::decoder::family_entry& f, const fused::decoder::config& c, const fused::decoder::mode& m) {
  fused::decoder::graph_options o{};
  o.layers = std::min(c.num_hidden_layers, max_fuzz_layers);
  for (const auto rows : {fused::decoder::logits_rows::last, fused::decoder::logits_rows::all}) {
    o.logits = rows;
    const fused::decoder::planned p = fused::decoder::plan_for(f, c, m, o);  // throws on a plan the verifier rejects
    check(p.mem.buffers.size() == p.prog.tensors.size());
    for (const std::int64_t bytes : p.mem.region_bytes) check(bytes >= 0 && bytes <= 3 * fused::max_region_bytes);
    check(p.mem.arena_bytes() >= p.mem.lower_bound);
  }
}

void fuzz_config(std::string_view text) {
  using namespace fused::decoder;
  hf_model_info info;
  try {
    info = parse_hf_config(text, "fuzz/config.json");
  } catch (const fused::io::load_error&) {
    return;
  }
  const fused::decoder::config& c = info.arch;
  check(c.vocab_size > 0 && c.hidden_size > 0 && c.intermediate_size > 0 && c.num_hidden_layers > 0);
  check(c.num_attention_heads > 0 && c.num_key_value_heads > 0 && c.num_attention_heads % c.num_key_value_heads == 0);
  check(c.head_dim > 0 && c.head_dim % 2 == 0);
  check(c.max_position_embeddings > 0 && c.rms_norm_eps > 0 && c.rms_norm_eps < 1 && c.rope_theta > 0);
  check_token_ids(info);
  check(config_differences(c, c).empty());
  fused::decoder::config other = c;
  other.rope_theta *= 2;
  check(config_differences(c, other).size() == 1);

  const std::int64_t ctx = std::min(c.max_position_embeddings, 16);
  // Mistral refuses a KV capacity past its sliding window, with a sentence: not a fuzz failure.
  if (c.sliding_window != 0 && ctx > c.sliding_window) return;
  check(info.family != nullptr);
  check_plan(*info.family, c, fused::decoder::mode::prefill(std::min<std::int64_t>(ctx, 7), ctx));
  check_plan(*info.family, c, fused::decoder::mode::decode(ctx));
}

void fuzz_generation_config(std::string_view text) {
  using namespace fused::decoder;
  hf_model_info info{.family = &fused::qwen2::entry, .arch = {4096, 256, 768, 4, 8, 2, 32, 512, 1e-6, 1e4, true},
                     .eos_token_ids = {4093},
                     .bos_token_id = 4093,
                     .dtype = "bfloat16"};
  try {
    apply_generation_config(text, "fuzz/generation_config.json", info);
  } catch (const fused::io::load_error&) {
    return;
  }
  check_token_ids(info);
}

}  // namespace

int one_input(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  fuzz_config(text);
  fuzz_generation_config(text);
  return 0;
}

}  // namespace fuzz::hf_config
