// Decode (and prefill) speed of the generated C against the C++ static model it was generated from:
// Qwen2-0.5B, prefill up to 512 tokens a call, KV cache 4096, synthetic weights (one blob laid out as
// the weights region, shared by both: the C model binds it with qwen2_0_5b_init_blob). Repetitions
// alternate which model goes first, so both see the same machine; figures are medians. Each
// repetition also checks that both models produced the same logits, bit for bit.
//
//   codegen_bench [--prompt 512] [--gen 64] [--reps 5] [--threads N]
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include <fused/qwen2.hpp>

#include "bench_util.hpp"
#include "cli.hpp"
#include "qwen2_0_5b.h"

namespace {

using namespace fused::bench;
using static_0_5b = fused::qwen2::static_model<fused::qwen2::presets::qwen2_0_5b, QWEN2_0_5B_MAX_SEQ, QWEN2_0_5B_MAX_CTX>;
static_assert(static_0_5b::weights_bytes == QWEN2_0_5B_WEIGHTS_BYTES && static_0_5b::arena_bytes == QWEN2_0_5B_ARENA_BYTES &&
              static_0_5b::state_bytes == QWEN2_0_5B_STATE_BYTES, "the generated layout is the static model's");

struct figures {
  std::vector<double> prefill, decode;
  std::vector<float> last_logits;
};

// reset, prefill the prompt, decode `gen` tokens greedily; `step(id)` returns the logits pointer.
template <class Prefill, class Decode>
void one_rep(Prefill&& prefill, Decode&& decode, const std::vector<std::int32_t>& prompt, long long gen, std::size_t V, figures& f) {
  const float* logits = nullptr;
  double t = seconds([&] { logits = prefill(); });
  f.prefill.push_back(static_cast<double>(prompt.size()) / t);
  std::int32_t next = static_cast<std::int32_t>(fk_argmax(logits, V));
  t = seconds([&] {
    for (long long i = 0; i < gen; ++i) {
      logits = decode(next);
      next = static_cast<std::int32_t>(fk_argmax(logits, V));
    }
  });
  f.decode.push_back(static_cast<double>(gen) / t);
  f.last_logits.assign(logits, logits + V);
}

}  // namespace

int main(int argc, char** argv) {
  try {
    const std::vector<std::string> a(argv + 1, argv + argc);
    fused::cli::args_reader args(a);
    const long long P = args.int_or("--prompt", 512, 1, QWEN2_0_5B_MAX_SEQ);
    const long long G = args.int_or("--gen", 64, 1, QWEN2_0_5B_MAX_CTX - P);
    const int reps = static_cast<int>(args.int_or("--reps", 5, 1, 1000));
    const int threads = static_cast<int>(args.int_or("--threads", fk_get_threads(), 1, 1024));
    args.finish();
    fk_set_threads(threads);
    qwen2_0_5b_set_threads(threads);

    constexpr auto& plan = static_0_5b::plans::prefill;
    const auto weights = fused::runtime::weight_store::synthetic(plan.tensors, plan.buffers, static_0_5b::weights_bytes, 1);
    static_0_5b cpp(weights);
    qwen2_0_5b_model c{};
    if (qwen2_0_5b_init_blob(&c, weights.blob().data(), weights.blob().size(), QWEN2_0_5B_WEIGHTS_FINGERPRINT, nullptr, nullptr)) {
      std::fprintf(stderr, "codegen_bench: %s\n", c.error);
      return 1;
    }
    std::vector<std::int32_t> prompt(static_cast<std::size_t>(P));
    std::uint64_t s = 12345;
    for (auto& id : prompt) {
      s = s * 6364136223846793005ull + 1442695040888963407ull;
      id = static_cast<std::int32_t>((s >> 33) % QWEN2_0_5B_VOCAB_SIZE);
    }
    const std::size_t V = QWEN2_0_5B_VOCAB_SIZE;
    auto rep_cpp = [&](figures& f, long long gen) {
      cpp.reset();
      one_rep([&] { return cpp.prefill(prompt).data(); }, [&](std::int32_t id) { return cpp.decode(id).data(); }, prompt, gen, V, f);
    };
    auto rep_c = [&](figures& f, long long gen) {
      qwen2_0_5b_reset(&c);
      one_rep([&] { return qwen2_0_5b_prefill(&c, prompt.data(), prompt.size()); }, [&](std::int32_t id) { return qwen2_0_5b_decode(&c, id); },
              prompt, gen, V, f);
    };
    figures fc, fcpp, warm;
    rep_cpp(warm, 2);  // page faults, thread pool
    rep_c(warm, 2);
    bool same = true;
    for (int r = 0; r < reps; ++r) {
      if (r % 2 == 0) {
        rep_cpp(fcpp, G);
        rep_c(fc, G);
      } else {
        rep_c(fc, G);
        rep_cpp(fcpp, G);
      }
      same = same && std::memcmp(fc.last_logits.data(), fcpp.last_logits.data(), V * sizeof(float)) == 0;
    }
    std::printf("codegen_bench: Qwen2-0.5B, synthetic bf16 weights, %s, %d thread%s, prompt %lld, decode %lld, %d reps (medians)\n",
                qwen2_0_5b_isa(), threads, threads == 1 ? "" : "s", P, G, reps);
    std::printf("%-16s %14s %14s\n", "model", "prefill tok/s", "decode tok/s");
    std::printf("%-16s %14.1f %14.2f\n", "C++ static", median(fcpp.prefill), median(fcpp.decode));
    std::printf("%-16s %14.1f %14.2f\n", "generated C", median(fc.prefill), median(fc.decode));
    std::printf("generated C / C++ static: prefill %.3f, decode %.3f; logits bitwise equal: %s\n", median(fc.prefill) / median(fcpp.prefill),
                median(fc.decode) / median(fcpp.decode), same ? "yes" : "NO");
    qwen2_0_5b_free(&c);
    return same ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "codegen_bench: %s\n", e.what());
    return 1;
  }
}
