// Uses fused as an installed or vendored library would be used: the version macros, the tokenizer
// (PCRE2 + utf8proc), the run-time planner and model on a Hugging Face directory, and the kernels.
//   consumer MODEL_DIR   -> prints the version, the prompt's ids and the greedy next token
#include <cstdio>
#include <string>

#include <fused/io/tokenizer.hpp>
#include <fused/qwen2.hpp>
#include <fused/version.hpp>

static_assert(FUSED_VERSION_MAJOR >= 0 && FUSED_VERSION == FUSED_VERSION_MAJOR * 10000 + FUSED_VERSION_MINOR * 100 + FUSED_VERSION_PATCH);

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: consumer MODEL_DIR\n");
    return 2;
  }
  const std::string dir = argv[1];
  const auto info = fused::decoder::load_hf_model_info(dir);
  const auto tok = fused::io::tokenizer::from_file(dir + "/tokenizer.json");
  const auto ids = tok.encode("In the beginning", false);
  fused::qwen2::model m(info.arch, 16, 32);
  const auto weights = fused::runtime::weight_store::load(dir, m.tensors(), info.arch.tie_word_embeddings);
  m.bind(weights);
  const auto logits = m.prefill(ids);
  const auto next = static_cast<std::int32_t>(fk_argmax(logits.data(), logits.size()));
  std::printf("fused %s: %zu ids, next token '%s'\n", FUSED_VERSION_STRING, ids.size(), tok.decode(std::span(&next, 1)).c_str());
  return 0;
}
