// A static Qwen2 model: the plan, every offset and every kernel call are compile-time constants.
// Loads the default model's weights by Hugging Face name and continues a prompt greedily.
#include <cstdio>
#include <fused/io/tokenizer.hpp>
#include <fused/qwen2.hpp>

using model = fused::qwen2::static_model<fused::qwen2::presets::kjv_qwen2_4m, /*max tokens per prefill*/ 64, /*KV capacity*/ 512>;
static_assert(model::state_bytes == 4 * 2 * 2 * 512 * 32 * 2, "4 layers x (K,V) x 2 KV heads x 512 positions x 32 dims x bf16");

int main(int argc, char** argv) {
  const std::string dir = argc > 1 ? argv[1] : FUSED_DEFAULT_MODEL_DIR;
  const auto tok = fused::io::tokenizer::from_file(dir + "/tokenizer.json");
  const auto weights = fused::runtime::weight_store::load(dir, model::plans::prefill.tensors, model::cfg.tie_word_embeddings);
  model m(weights);  // allocates its state and arena once; prefill and decode allocate nothing

  const std::string prompt = "In the beginning";
  std::printf("%s", prompt.c_str());
  auto logits = m.prefill(tok.encode(prompt));
  for (int i = 0; i < 16; ++i) {
    const auto next = static_cast<std::int32_t>(fk_argmax(logits.data(), logits.size()));
    std::printf("%s", tok.decode(std::span(&next, 1)).c_str());
    logits = m.decode(next);
  }
  std::printf("\n");
}
