// The generated C against the C++ static model (bitwise), against transformers (the bf16 yardstick),
// and against its golden text. The scorers are the generated <name>_main.c built by
// tests/codegen/CMakeLists.txt from fused_generate_c(... MAX_SEQ 16 MAX_CTX 128 LOGITS all).
//
// Golden files: tests/codegen/golden/micro/. After an intended change to the emitter, rewrite them with
//   FUSED_UPDATE_GOLDEN=1 build/gen/tests/codegen/test_codegen -tc='golden*'
// and review the diff like any other change.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>

#include <fused/core/json_text.hpp>
#include <sstream>
#include <string>
#include <vector>

#include <fused/core/text_string.hpp>
#include <fused/codegen.hpp>
#include <fused/qwen2.hpp>

#include "../reference_presets.hpp"

namespace {

namespace fs = std::filesystem;
using fused::decoder::config;

using fused_test::tiny_a;
using fused_test::tiny_mha;
// The golden config: one layer, GQA 2:1, tied, small enough to read the whole output.
struct micro {
  using family = fused::qwen2::family;
  static constexpr config value{.vocab_size = 64, .hidden_size = 32, .intermediate_size = 48, .num_hidden_layers = 1,
                                .num_attention_heads = 2, .num_key_value_heads = 1, .head_dim = 16, .max_position_embeddings = 64,
                                .rms_norm_eps = 1e-6, .rope_theta = 10000.0, .tie_word_embeddings = true};
};

constexpr fused::decoder::graph_options all_rows{.logits = fused::decoder::logits_rows::all};
constexpr std::int64_t max_seq = 16, max_ctx = 128;  // as tests/codegen/CMakeLists.txt generates them

std::string ref_dir(const std::string& name) { return std::string(FUSED_TEST_DATA) + "/reference/" + name; }

struct reference {
  std::vector<std::int32_t> input_ids, generated_ids;
  double yardstick = 0;
  std::vector<float> prefill_logits, decode_logits;
};
reference load_reference(const std::string& name) {
  std::ifstream in(ref_dir(name) + "/reference.json");
  const auto j = fused::json_text::parse(in);
  reference r;
  for (auto v : j["input_ids"]) r.input_ids.push_back(v.get<std::int32_t>());
  for (auto v : j["generated_ids"]) r.generated_ids.push_back(v.get<std::int32_t>());
  r.yardstick = j["hf_bf16_prefill_logits_max_abs_dev"].get<double>();
  auto f = fused::io::safetensors_file::open(ref_dir(name) + "/reference.safetensors");
  r.prefill_logits = fused::io::to_f32_owned(*f.find("prefill_logits"));
  r.decode_logits = fused::io::to_f32_owned(*f.find("decode_logits"));
  return r;
}

std::string join(const std::vector<std::int32_t>& ids) {
  std::string s;
  for (std::size_t i = 0; i < ids.size(); ++i) s.append(i ? "," : "").append(std::to_string(ids[i]));  // g++ 12: no -Wrestrict
  return s;
}

struct scores {
  std::vector<float> prefill, decode;  // [T, V], [N, V]
};

// The `fused score` computation on the C++ static model with the generated C's limits: the prompt
// in chunks of max_seq (every row kept), then teacher-forced decode.
template <class Preset>
scores static_scores(const std::string& name, const reference& r) {
  using model = fused::qwen2::static_model<Preset, max_seq, max_ctx, all_rows>;
  const auto w = fused::runtime::weight_store::load(ref_dir(name), model::plans::prefill.tensors, Preset::value.tie_word_embeddings);
  model m(w);
  scores s;
  const std::span<const std::int32_t> ids(r.input_ids);
  for (std::size_t at = 0; at < ids.size(); at += static_cast<std::size_t>(max_seq)) {
    const auto l = m.prefill(ids.subspan(at, std::min<std::size_t>(static_cast<std::size_t>(max_seq), ids.size() - at)));
    s.prefill.insert(s.prefill.end(), l.begin(), l.end());
  }
  const auto V = static_cast<std::ptrdiff_t>(Preset::value.vocab_size);
  s.decode.assign(s.prefill.end() - V, s.prefill.end());
  for (std::size_t k = 0; k + 1 < r.generated_ids.size(); ++k) {
    const auto l = m.decode(r.generated_ids[k]);
    s.decode.insert(s.decode.end(), l.begin(), l.end());
  }
  return s;
}

scores run_scorer(const std::string& scorer, const std::string& name, const reference& r, const std::string& tag) {
  const std::string out = std::string(FUSED_CODEGEN_WORK) + "/" + tag + ".safetensors";
  fs::remove(out);
  const std::string cmd =
      "'" + scorer + "' --model '" + ref_dir(name) + "' --input-ids " + join(r.input_ids) + " --continue-ids " + join(r.generated_ids) + " --out '" + out + "'";
  REQUIRE(std::system(cmd.c_str()) == 0);
  auto f = fused::io::safetensors_file::open(out);
  scores s;
  s.prefill = fused::io::to_f32_owned(*f.find("prefill_logits"));
  s.decode = fused::io::to_f32_owned(*f.find("decode_logits"));
  return s;
}

bool bitwise_equal(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}
double max_abs_diff(const std::vector<float>& a, const std::vector<float>& b) {
  REQUIRE(a.size() == b.size());
  double m = 0;
  for (std::size_t i = 0; i < a.size(); ++i) m = std::max(m, std::fabs(static_cast<double>(a[i]) - b[i]));
  return m;
}

template <class Preset>
void check_scorer(const std::string& name, const std::string& scorer, const std::string& tag) {
  CHECK(fused::decoder::config_differences(Preset::value, fused::decoder::load_hf_config(ref_dir(name)).arch).empty());
  const reference r = load_reference(name);
  const scores c = run_scorer(scorer, name, r, tag);
  const scores cpp = static_scores<Preset>(name, r);
  CHECK(c.prefill.size() == r.input_ids.size() * static_cast<std::size_t>(Preset::value.vocab_size));
  CHECK(c.decode.size() == r.generated_ids.size() * static_cast<std::size_t>(Preset::value.vocab_size));
  CHECK_MESSAGE(bitwise_equal(c.prefill, cpp.prefill), tag << ": prefill logits differ from the static model's by up to " << max_abs_diff(c.prefill, cpp.prefill));
  CHECK_MESSAGE(bitwise_equal(c.decode, cpp.decode), tag << ": decode logits differ from the static model's by up to " << max_abs_diff(c.decode, cpp.decode));
  const double dp = max_abs_diff(c.prefill, r.prefill_logits), dd = max_abs_diff(c.decode, r.decode_logits);
  MESSAGE(tag << ": max |dlogit| vs transformers fp32: prefill " << dp << ", decode " << dd << " (yardstick " << r.yardstick << ")");
  CHECK(dp <= r.yardstick);
  CHECK(dd <= r.yardstick);
}

std::string read_text(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace

TEST_CASE("generated C scores tiny_a bitwise like the static model, within the bf16 yardstick") {
  check_scorer<tiny_a>("tiny_a", TINY_A_SCORER, "tiny_a");
}
TEST_CASE("generated C scores tiny_mha (MHA, untied) bitwise like the static model") {
  check_scorer<tiny_mha>("tiny_mha", TINY_MHA_SCORER, "tiny_mha");
}
TEST_CASE("the debug layout (canaries after every buffer) computes the same bits") {
  check_scorer<tiny_a>("tiny_a", TINY_A_SCORER_CANARIES, "tiny_a_canaries");
}

TEST_CASE("golden: the emitted text of a micro config, from the static and the run-time plans alike") {
  const auto from_static = fused::codegen::from_static<micro, 4, 16, all_rows>("micro");
  const auto from_runtime = fused::codegen::from_runtime("micro", fused::qwen2::entry, micro::value, 4, 16, all_rows);
  const auto a = fused::codegen::emit_all(from_static), b = fused::codegen::emit_all(from_runtime);
  REQUIRE(a.size() == 5);
  REQUIRE(a.size() == b.size());
  for (std::size_t i = 0; i < a.size(); ++i) CHECK_MESSAGE(a[i].text == b[i].text, a[i].name << " differs between the static and run-time paths");

  const fs::path dir = fs::path(FUSED_CODEGEN_GOLDEN) / "micro";
  if (std::getenv("FUSED_UPDATE_GOLDEN")) {
    fs::create_directories(dir);
    for (const auto& f : a) std::ofstream(dir / f.name, std::ios::binary) << f.text;
    MESSAGE("golden files rewritten in " << dir.string());
  }
  for (const auto& f : a) {
    const std::string want = read_text(dir / f.name);
    if (want == f.text) continue;
    std::size_t line = 1, at = 0;
    while (at < want.size() && at < f.text.size() && want[at] == f.text[at]) line += want[at++] == '\n';
    FAIL_CHECK(f.name << " differs from " << (dir / f.name).string() << " from line " << line
                      << " (FUSED_UPDATE_GOLDEN=1 rewrites the golden files; see the top of this file)");
  }
}

TEST_CASE("fingerprints: the layout's follows every offset, the weights' only the weights region") {
  const auto a = fused::codegen::from_runtime("m", fused::qwen2::entry, micro::value, 4, 16, all_rows);
  const auto b = fused::codegen::from_runtime("m", fused::qwen2::entry, micro::value, 4, 32, all_rows);
  const auto c = fused::codegen::from_runtime("m", fused::qwen2::entry, micro::value, 8, 16);
  CHECK(fused::codegen::layout_fingerprint(a) != fused::codegen::layout_fingerprint(b));
  CHECK(fused::codegen::layout_fingerprint(a) != fused::codegen::layout_fingerprint(c));
  CHECK(fused::codegen::weights_fingerprint(a) == fused::codegen::weights_fingerprint(b));
  CHECK(fused::codegen::weights_fingerprint(a) == fused::codegen::weights_fingerprint(c));
  // A generation's stop ids (step attributes) and its most new tokens (the loop's bound) are its too.
  auto generating = [&](std::int64_t most, std::vector<int> stops) {
    return fused::codegen::layout_fingerprint(fused::codegen::from_runtime("m", fused::qwen2::entry, micro::value, 4, 16, {},
                                                                           fused::decoder::generation_options{.max_new_tokens = most, .stop_ids = stops}));
  };
  CHECK(generating(8, {3}) == generating(8, {3}));
  CHECK(generating(8, {3}) != generating(8, {5}));
  CHECK(generating(8, {3}) != generating(9, {3}));
  auto cfg = micro::value;
  cfg.intermediate_size = 64;
  CHECK(fused::codegen::weights_fingerprint(a) != fused::codegen::weights_fingerprint(fused::codegen::from_runtime("m", fused::qwen2::entry, cfg, 4, 16)));
}

TEST_CASE("the debug layout keeps live buffers and their canaries apart") {
  const auto p = fused::codegen::from_static<tiny_a, max_seq, max_ctx, all_rows>("tiny_a");
  for (const auto* m : {&p.prefill, &p.decode}) {
    const auto d = fused::codegen::with_canaries(*m, fused::region::activations);
    for (std::size_t i = 0; i < m->buffers.size(); ++i)
      for (std::size_t j = 0; j < m->buffers.size(); ++j) {
        const auto &x = m->buffers[i], &y = m->buffers[j];
        if (i == j || x.where != fused::region::activations || y.where != fused::region::activations) continue;
        if (x.last < y.first || y.last < x.first || (x.group >= 0 && x.group == y.group)) continue;  // never live together
        // x with its canary, and y, are disjoint.
        const bool apart = d.offset[i] + x.bytes + fused::canary_bytes <= d.offset[j] || d.offset[j] + y.bytes <= d.offset[i];
        CHECK_MESSAGE(apart, m->mode << ": " << fused::to_string(m->tensor(x.tensor).name) << " and " << fused::to_string(m->tensor(y.tensor).name));
      }
    CHECK(d.bytes % 64 == 0);
  }
}
