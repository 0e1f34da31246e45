// `fused train-step`: one AdamW step of a Hugging Face checkpoint on one sequence, everything f32,
// written as safetensors: loss [1] (mean next-token cross-entropy over positions 0..T-2), grad.<name>
// (d loss / d each parameter), after.<name> (each parameter after the step) and loss_after [1] (the
// loss with the updated parameters) — the definitions of a torch autograd + torch.optim.AdamW
// reference (docs/TRAINING.md).
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include <fused/models/decoder_train.hpp>
#include <fused/models/hf_config.hpp>

#include "cli.hpp"

namespace {

struct options {
  std::string model_dir, tokens, out;
  double lr = 1e-3, eps = 1e-8, weight_decay = 0.01;
  std::vector<double> betas{0.9, 0.999};
  long long threads = 0;
};

int run_train_step(const options& o) {
  if (o.threads > 0) fk_set_threads(static_cast<int>(o.threads));
  const std::vector<std::int32_t> ids = fused::cli::parse_ids({o.tokens});
  if (ids.size() < 2) throw fused::cli::usage_error("--tokens: a train step needs at least two token ids (the loss predicts each next one)");
  if (o.betas.size() != 2) throw fused::cli::usage_error("--betas takes two numbers: beta1,beta2");
  const fused::decoder::hf_model_info info = fused::decoder::load_hf_model_info(o.model_dir);
  for (std::size_t t = 0; t < ids.size(); ++t)
    if (ids[t] >= info.arch.vocab_size)
      throw std::invalid_argument("--tokens: id " + std::to_string(ids[t]) + " (position " + std::to_string(t) + ") is outside the vocabulary of " +
                                  std::to_string(info.arch.vocab_size));

  fused::decoder::graph_options graph{};
  graph.train = {.optimizer = {.beta1 = o.betas[0], .beta2 = o.betas[1], .eps = o.eps, .weight_decay = o.weight_decay}, .keep_gradients = true};
  fused::decoder::trainer t(*info.family, info.arch, static_cast<std::int64_t>(ids.size()), graph);
  const std::vector<fused::tensor_info> stored = t.checkpoint_tensors();
  t.load(fused::runtime::weight_store::load(o.model_dir, stored, info.arch.tie_word_embeddings));

  const auto lr = static_cast<float>(o.lr);
  const float loss = t.step(ids, lr);
  const std::size_t n = t.prog().parameters.size();
  std::vector<std::vector<float>> grads(n), after(n);
  for (std::size_t k = 0; k < n; ++k) {
    const auto g = t.gradient(k);
    const auto p = t.parameter(k);
    grads[k].assign(g.begin(), g.end());
    after[k].assign(p.begin(), p.end());
  }
  const float loss_after = t.step(ids, lr);  // this call's loss is the updated parameters'; its own update is not kept

  std::vector<std::string> names;
  names.reserve(2 * n);
  std::vector<fused::io::tensor_data> out;
  const std::vector<float> loss_v{loss}, loss_after_v{loss_after};
  out.push_back({"loss", fused::io::dtype::F32, {1}, std::as_bytes(std::span(loss_v))});
  out.push_back({"loss_after", fused::io::dtype::F32, {1}, std::as_bytes(std::span(loss_after_v))});
  for (std::size_t k = 0; k < n; ++k) {
    const fused::tensor_info& p = stored[k];
    std::vector<std::int64_t> dims;
    for (int i = 0; i < p.shp.rank; ++i) dims.push_back(p.shp[i].n);
    names.push_back("grad." + t.parameter_name(k));
    out.push_back({names.back(), fused::io::dtype::F32, dims, std::as_bytes(std::span(grads[k]))});
    names.push_back("after." + t.parameter_name(k));
    out.push_back({names.back(), fused::io::dtype::F32, dims, std::as_bytes(std::span(after[k]))});
  }
  fused::io::write_safetensors(o.out, out);
  std::fprintf(stderr, "fused train-step: %zu tokens, %zu parameters, %zu steps, arena %lld bytes, state %lld bytes: loss %.6g -> %.6g\n", ids.size(), n,
               t.prog().steps.size(), static_cast<long long>(t.mem().arena_bytes()),
               static_cast<long long>(t.mem().region_bytes[static_cast<int>(fused::region::state)]), static_cast<double>(loss),
               static_cast<double>(loss_after));
  return 0;
}

const fused::cli::command train_step_cmd{
    "train-step", "one AdamW step on one sequence: loss, gradients and updated parameters as safetensors", [](CLI::App& app) -> fused::cli::runner {
      auto o = std::make_shared<options>();
      app.add_option("-m,--model", o->model_dir, "a Hugging Face model directory")->required();
      app.add_option("--tokens", o->tokens, "the sequence's token ids: 1,2,3 (the loss predicts each from those before it)")->required();
      app.add_option("--lr", o->lr, "learning rate")->check(fused::cli::finite_in(0, 1e3));
      app.add_option("--betas", o->betas, "AdamW's beta1,beta2")->delimiter(',')->check(fused::cli::finite_in(0, 0.999999999));
      app.add_option("--eps", o->eps, "AdamW's eps")->check(fused::cli::finite_in(1e-30, 1));
      app.add_option("--weight-decay", o->weight_decay, "AdamW's decoupled weight decay")->check(fused::cli::finite_in(0, 1e3));
      app.add_option("--out", o->out, "the safetensors file to write")->required();
      app.add_option("-t,--threads", o->threads, "threads; 0 = all cores")->check(fused::cli::integer_in(0, 1024));
      return [o] { return run_train_step(*o); };
    }};

}  // namespace
