// `fused score`: logits of a Hugging Face checkpoint (any family) for given token ids, written as
// safetensors — the interface the reference comparisons (and the generated C scorer) share.
//   prefill_logits [T, V]: every position of the prompt;
//   decode_logits  [N, V]: row 0 is the last prefill position, row k the logits after feeding
//                          continue ids 0..k-1 through decode (teacher forcing).
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <memory>
#include <stdexcept>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include <fused/qwen2.hpp>

#include "cli.hpp"
#include "generation.hpp"

namespace fused::cli::cmd_score {

std::span<const std::byte> bytes_of(const std::vector<float>& v) { return std::as_bytes(std::span(v)); }

struct options {
  std::string model_dir, input_ids, continue_ids, out;
  long long threads = 0;
};

int run_score(const options& o) {
  const std::string& dir = o.model_dir;
  const std::vector<std::int32_t> input = fused::cli::parse_ids({o.input_ids}, "--input-ids");
  const std::vector<std::int32_t> cont = fused::cli::parse_ids({o.continue_ids}, "--continue-ids");
  const std::string& out = o.out;
  const long long threads = o.threads;
  if (input.empty()) throw fused::cli::usage_error("--input-ids: at least one token id is needed");
  fused::cli::require_out_elsewhere("--out", out, "the logits", {{.path = dir, .owner = "the model's"}});
  if (threads > 0) fk_set_threads(static_cast<int>(threads));

  const fused::decoder::hf_model_info info = fused::decoder::load_hf_model_info(dir);
  // The last continue id is never run (only its logits are asked for): checked here or not at all.
  fused::cli::require_in_vocabulary(input, "--input-ids", info.arch.vocab_size);
  fused::cli::require_in_vocabulary(cont, "--continue-ids", info.arch.vocab_size);
  const auto T = static_cast<std::int64_t>(input.size()), N = static_cast<std::int64_t>(cont.size());
  const std::int64_t positions = T + std::max<std::int64_t>(N - 1, 0);
  if (positions > info.arch.max_position_embeddings)
    throw std::invalid_argument(std::to_string(T) + " input and " + std::to_string(N) + " continue ids need " + std::to_string(positions) +
                                " positions; the model has max_position_embeddings " + std::to_string(info.arch.max_position_embeddings));
  fused::decoder::graph_options graph;
  graph.logits = fused::decoder::logits_rows::all;
  fused::decoder::model m(*info.family, info.arch, T, std::max<std::int64_t>(positions, 1), graph);
  const auto weights = fused::runtime::weight_store::load(dir, m.tensors(), info.arch.tie_word_embeddings);
  m.bind(weights);

  const auto V = static_cast<std::size_t>(info.arch.vocab_size);
  const auto p = m.prefill(input);
  fused::cli::require_finite_logits(p, weights);
  std::vector<float> prefill(p.begin(), p.end());
  std::vector<float> decode;
  if (N > 0) {
    decode.assign(prefill.end() - static_cast<std::ptrdiff_t>(V), prefill.end());
    for (std::int64_t k = 0; k + 1 < N; ++k) {
      const auto d = m.decode(cont[static_cast<std::size_t>(k)]);
      fused::cli::require_finite_logits(d, weights);
      decode.insert(decode.end(), d.begin(), d.end());
    }
  }
  std::vector<fused::io::tensor_data> tensors;
  tensors.push_back({"prefill_logits", fused::io::dtype::F32, {T, info.arch.vocab_size}, bytes_of(prefill)});
  if (N > 0) tensors.push_back({"decode_logits", fused::io::dtype::F32, {N, info.arch.vocab_size}, bytes_of(decode)});
  fused::io::write_safetensors(out, tensors);
  std::fprintf(stderr, "fused score: %lld prompt + %lld continue ids -> %s\n", static_cast<long long>(T), static_cast<long long>(N), out.c_str());
  return 0;
}

const fused::cli::command score_cmd{
    "score", "logits of a model for given token ids, written as safetensors", [](CLI::App& app) -> fused::cli::runner {
      auto o = std::make_shared<options>();
      app.add_option("-m,--model", o->model_dir, "a Hugging Face model directory")->check(fused::cli::not_empty("give a model directory"))->required();
      app.add_option("--input-ids", o->input_ids, "the prompt's token ids: 1,2,3")->required();
      app.add_option("--continue-ids", o->continue_ids, "ids fed one by one through decode after the prompt (teacher forcing)");
      app.add_option("--out", o->out, "the safetensors file to write (prefill_logits [T,V], decode_logits [N,V])")->required()->check(fused::cli::not_empty("give a file name"));
      app.add_option("-t,--threads", o->threads, "threads; 0 = all cores")->transform(fused::cli::integer_in(0, 1024));
      return [o] { return run_score(*o); };
    }};


}  // namespace fused::cli::cmd_score
