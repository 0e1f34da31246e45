// Must not compile: a static train step asking torch.optim.SGD's impossible combination, Nesterov
// momentum with dampening. Expect: "fused: invalid program" and the sentence saying what Nesterov needs.
#include <fused/models/decoder_static_train.hpp>

#include "../../reference_presets.hpp"

constexpr fused::train::options sgd{.sgd = {.momentum = 0.9, .dampening = 0.5, .nesterov = true}, .use = fused::train::method::sgd};
constexpr auto& plan = fused::decoder::static_train_plan<fused_test::tiny_a, 8, 1, sgd>::plan;
int main() { return static_cast<int>(plan.arena_bytes()); }
