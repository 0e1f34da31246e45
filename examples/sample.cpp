// Generation with sampling on the run-time model: any Hugging Face Qwen2 directory, its config.json
// read at run time and planned by the same pipeline the static model uses at compile time.
//   example_sample DIR PROMPT [N] [TEMPERATURE] [SEED]
#include <cstdio>
#include <cstdlib>
#include <fused/io/tokenizer.hpp>
#include <fused/qwen2.hpp>

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: %s MODEL_DIR PROMPT [N] [TEMPERATURE] [SEED]\n", argv[0]);
    return 2;
  }
  const std::string dir = argv[1], prompt = argv[2];
  const int n = argc > 3 ? std::atoi(argv[3]) : 32;
  const float temp = argc > 4 ? std::strtof(argv[4], nullptr) : 0.8f;
  const auto seed = argc > 5 ? std::strtoull(argv[5], nullptr, 10) : 0ull;
  try {
    const auto info = fused::decoder::load_hf_model_info(dir);
    const auto tok = fused::io::tokenizer::from_file(dir + "/tokenizer.json");
    const auto ids = tok.encode(prompt);
    const auto ctx = std::min<std::int64_t>(info.arch.max_position_embeddings, static_cast<std::int64_t>(ids.size()) + n);
    fused::qwen2::model m(info.arch, static_cast<std::int64_t>(ids.size()), ctx);
    const auto weights = fused::runtime::weight_store::load(dir, m.tensors(), info.arch.tie_word_embeddings);
    m.bind(weights);

    fk_rng rng;
    fk_rng_seed(&rng, seed);
    std::vector<float> scratch(static_cast<std::size_t>(m.vocab_size()));
    fused::io::tokenizer::stream_decoder out(tok);
    std::printf("%s", prompt.c_str());
    auto logits = m.prefill(ids);
    for (int i = 0; i < n && m.position() < ctx; ++i) {
      const auto next = static_cast<std::int32_t>(fk_sample(logits.data(), logits.size(), temp, 40, 0.95f, &rng, scratch.data()));
      if (std::find(info.eos_token_ids.begin(), info.eos_token_ids.end(), next) != info.eos_token_ids.end()) break;
      std::printf("%s", out.push(next).c_str());
      logits = m.decode(next);
    }
    std::printf("%s\n", out.finish().c_str());
  } catch (const std::exception& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
}
