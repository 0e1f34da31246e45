// The optimizer's flags, one set for every command that plans a train step (train, train-step,
// gen-c --train): --optimizer adamw|sgd and its hyperparameters, as torch.optim names them; and the
// check of a step's shape that those commands and bench-train make before planning it.
#pragma once
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <fused/models/decoder_config.hpp>
#include <fused/train/step.hpp>

#include "cli.hpp"

namespace fused::cli {

// "beta1,beta2": two decimal numbers in [0, 1), one comma between them and nothing else.
inline std::optional<std::pair<double, double>> beta_pair(std::string_view text) {
  const std::size_t comma = text.find(',');
  if (comma == std::string_view::npos) return std::nullopt;
  const std::optional<double> beta1 = finite_number(text.substr(0, comma)), beta2 = finite_number(text.substr(comma + 1));
  const auto average = [](std::optional<double> b) { return b && *b >= 0 && *b < 1; };
  if (!average(beta1) || !average(beta2)) return std::nullopt;
  return std::pair{*beta1, *beta2};
}

// The shape of a train step from the command line against the model and the step's limits, as usage
// errors that name the flags (plan_train's own sentences name none). `sequence` says how the command
// line gave the sequences' `tokens` ("--seq 512"); the batch runs as `micro_batches` programs (its
// ranks' and micro-batches'), each of which is held to train::max_step_tokens.
struct train_shape {
  long long batch = 1, micro_batches = 1, tokens = 0;
  std::string sequence;
};
inline void check_train_shape(const decoder::config& c, const train_shape& s) {
  if (s.tokens < train::min_sequence_tokens) throw usage_error(s.sequence + ": " + train::too_few_tokens);
  if (s.tokens > c.max_position_embeddings) throw usage_error(s.sequence + " exceeds max_position_embeddings " + std::to_string(c.max_position_embeddings));
  if (c.sliding_window != 0 && s.tokens > c.sliding_window)
    throw usage_error(s.sequence + " exceeds sliding_window " + std::to_string(c.sliding_window) + ": only full attention is implemented");
  const long long per_program = s.batch / s.micro_batches;
  if (per_program > train::max_step_tokens / s.tokens)
    throw usage_error("--batch " + std::to_string(s.batch) +
                      (s.micro_batches > 1 ? " in " + std::to_string(s.micro_batches) + " micro-batches of " + std::to_string(per_program) : std::string()) +
                      " x " + s.sequence + ": a train step's program takes at most " + std::to_string(train::max_step_tokens) + " tokens");
}

struct optimizer_flags {
  std::string optimizer = "adamw";
  std::string betas = "0.9,0.999";  // beta1,beta2
  double eps = 1e-8, momentum = 0, dampening = 0;
  std::optional<double> weight_decay;  // AdamW's decoupled decay (default 0.01), SGD's L2 term (default 0)
  bool nesterov = false;
  CLI::Option *betas_given = nullptr, *eps_given = nullptr;

  // `train_only`: the flags need this option (gen-c's --train), or nullptr.
  void add_to(CLI::App& app, CLI::Option* train_only = nullptr) {
    const auto needs = [&](CLI::Option* o) { return train_only ? o->needs(train_only) : o; };
    needs(app.add_option("--optimizer", optimizer, "adamw (torch.optim.AdamW) or sgd (torch.optim.SGD, with --momentum)")
              ->check(one_of({"adamw", "sgd"})));
    betas_given = needs(app.add_option("--betas", betas, "AdamW's beta1,beta2 (default 0.9,0.999)")->check(CLI::Validator(
        [](std::string& text) -> std::string { return beta_pair(text) ? std::string() : "'" + text + "' is not two numbers in [0, 1): beta1,beta2"; },
        "BETA1,BETA2", "beta_pair")));
    eps_given = needs(app.add_option("--eps", eps, "AdamW's eps")->check(finite_in(1e-30, 1)));
    needs(app.add_option("--weight-decay", weight_decay, "AdamW's decoupled weight decay (default 0.01); SGD's L2 penalty (default 0)")
              ->check(finite_in(0, 1e3)));
    needs(app.add_option("--momentum", momentum, "SGD's momentum (default 0: none)")->check(finite_below(0, 1)));
    needs(app.add_option("--dampening", dampening, "SGD's dampening of the momentum")->check(finite_in(0, 1)));
    needs(app.add_flag("--nesterov", nesterov, "SGD: Nesterov momentum (needs --momentum, no --dampening)"));
  }

  // The train step's options; a usage_error for flags that do not fit the optimizer.
  train::options options(bool keep_gradients = false) const {
    train::options o{.keep_gradients = keep_gradients};
    if (optimizer == "adamw") {
      if (momentum != 0 || dampening != 0 || nesterov) throw usage_error("--momentum, --dampening and --nesterov are SGD's (--optimizer sgd)");
      const std::optional<std::pair<double, double>> b = beta_pair(betas);
      if (!b) throw usage_error("--betas: '" + betas + "' is not two numbers in [0, 1): beta1,beta2");
      o.optimizer = {.beta1 = b->first, .beta2 = b->second, .eps = eps, .weight_decay = weight_decay.value_or(0.01)};
      return o;
    }
    if ((betas_given && betas_given->count() > 0) || (eps_given && eps_given->count() > 0)) throw usage_error("--betas and --eps are AdamW's (--optimizer adamw)");
    if (nesterov && (momentum == 0 || dampening != 0)) throw usage_error("--nesterov needs --momentum above 0 and no --dampening (as torch.optim.SGD)");
    o.use = train::method::sgd;
    o.sgd = {.momentum = momentum, .dampening = dampening, .weight_decay = weight_decay.value_or(0), .nesterov = nesterov};
    return o;
  }
};

}  // namespace fused::cli
