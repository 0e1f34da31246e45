// Decode (and prefill) speed of the generated C against the C++ static model it was generated from:
// Qwen2-0.5B, prefill up to 512 tokens a call, KV cache 4096, synthetic weights (one blob laid out as
// the weights region, shared by both: the C model binds it with qwen2_0_5b_init_blob). Repetitions
// alternate which model goes first, so both see the same machine; figures are medians. Each
// repetition also checks that both models produced the same logits, bit for bit.
//
// Generation as one program: qwen2_0_5b_generate (a short prompt, then QWEN2_0_5B_MAX_NEW_TOKENS tokens
// in the generated loop) against the C++ static model running the same prompt and greedy decode loop
// on the host; both must pick the same ids.
//
//   codegen_bench [--prompt 512] [--gen 64] [--generate-prompt 16] [--reps 5] [--threads N]
#include <algorithm>
#include <cstdio>
#include <cstring>
#include <span>
#include <string>
#include <vector>

#include <fused/qwen2.hpp>

#include "bench_util.hpp"
#include "cli.hpp"
#include "qwen2_0_5b.h"

namespace {

using namespace fused::bench;
using static_0_5b = fused::qwen2::static_model<fused::qwen2::presets::qwen2_0_5b, QWEN2_0_5B_MAX_SEQ, QWEN2_0_5B_MAX_CTX>;
static_assert(static_0_5b::weights_bytes == QWEN2_0_5B_WEIGHTS_BYTES &&
                  static_0_5b::arena_bytes == std::max(QWEN2_0_5B_PREFILL_ARENA_BYTES, QWEN2_0_5B_DECODE_ARENA_BYTES) &&
                  static_0_5b::state_bytes == QWEN2_0_5B_STATE_BYTES,
              "the generated layout is the static model's (its arena holds the generate mode too)");

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
    long long P = 512, G = 64, GP = 16;
    int reps = 5, threads = fk_get_threads();
    CLI::App app{"codegen_bench: the generated C against the C++ static model, Qwen2-0.5B with synthetic weights"};
    using fused::cli::integer_in;
    app.add_option("--prompt", P, "prompt tokens of the prefill/decode comparison")->check(integer_in(1, QWEN2_0_5B_MAX_SEQ));
    app.add_option("--gen", G, "tokens decoded after it")->check(integer_in(1, QWEN2_0_5B_MAX_CTX - QWEN2_0_5B_MAX_SEQ));
    app.add_option("--generate-prompt", GP, "prompt tokens of the generation comparison")->check(integer_in(1, QWEN2_0_5B_MAX_SEQ));
    app.add_option("--reps", reps, "repetitions (medians)")->check(integer_in(1, 1000));
    app.add_option("--threads", threads, "threads")->check(integer_in(1, 1024));
    CLI11_PARSE(app, argc, argv);
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

    // Generation as one program against the host loop, same prompt, same tokens.
    const std::vector<std::int32_t> short_prompt(prompt.begin(), prompt.begin() + GP);
    constexpr long long N = QWEN2_0_5B_MAX_NEW_TOKENS;
    std::vector<std::int32_t> host_ids, program_ids(N);
    auto host_loop = [&] {
      host_ids.clear();
      cpp.reset();
      std::span<const float> logits = cpp.prefill(short_prompt);
      for (long long i = 0; i < N; ++i) {
        host_ids.push_back(static_cast<std::int32_t>(fk_argmax(logits.data(), V)));
        if (i + 1 < N) logits = cpp.decode(host_ids.back());
      }
    };
    int count = 0;
    auto program = [&] { count = qwen2_0_5b_generate(&c, short_prompt.data(), short_prompt.size(), program_ids.data()); };
    std::vector<double> t_host, t_program;
    host_loop();  // warm
    program();
    for (int r = 0; r < reps; ++r) {
      if (r % 2 == 0) {
        t_host.push_back(seconds(host_loop));
        t_program.push_back(seconds(program));
      } else {
        t_program.push_back(seconds(program));
        t_host.push_back(seconds(host_loop));
      }
      same = same && count == N && program_ids == host_ids;
    }
    std::printf("generation of %lld tokens after a %lld-token prompt (medians): C++ static, host loop %.1f tok/s; generated C, %s_generate %.1f tok/s;"
                " ratio %.3f; same ids: %s\n",
                N, GP, static_cast<double>(N) / median(t_host), "qwen2_0_5b", static_cast<double>(N) / median(t_program),
                median(t_host) / median(t_program), count == N && program_ids == host_ids ? "yes" : "NO");
    qwen2_0_5b_free(&c);
    return same ? 0 : 1;
  } catch (const std::exception& e) {
    std::fprintf(stderr, "codegen_bench: %s\n", e.what());
    return 1;
  }
}
