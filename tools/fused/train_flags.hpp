// The optimizer's flags, one set for every command that plans a train step (train, train-step,
// gen-c --train): --optimizer adamw|sgd and its hyperparameters, as torch.optim names them.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include <fused/train/step.hpp>

#include "cli.hpp"

namespace fused::cli {

struct optimizer_flags {
  std::string optimizer = "adamw";
  std::vector<double> betas{0.9, 0.999};
  double eps = 1e-8, momentum = 0, dampening = 0;
  std::optional<double> weight_decay;  // AdamW's decoupled decay (default 0.01), SGD's L2 term (default 0)
  bool nesterov = false;
  CLI::Option *betas_given = nullptr, *eps_given = nullptr;

  // `train_only`: the flags need this option (gen-c's --train), or nullptr.
  void add_to(CLI::App& app, CLI::Option* train_only = nullptr) {
    const auto needs = [&](CLI::Option* o) { return train_only ? o->needs(train_only) : o; };
    needs(app.add_option("--optimizer", optimizer, "adamw (torch.optim.AdamW) or sgd (torch.optim.SGD, with --momentum)")
              ->check(one_of({"adamw", "sgd"})));
    betas_given = needs(app.add_option("--betas", betas, "AdamW's beta1,beta2")->delimiter(',')->check(finite_below(0, 1)));
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
      if (betas.size() != 2) throw usage_error("--betas takes two numbers: beta1,beta2");
      o.optimizer = {.beta1 = betas[0], .beta2 = betas[1], .eps = eps, .weight_decay = weight_decay.value_or(0.01)};
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
