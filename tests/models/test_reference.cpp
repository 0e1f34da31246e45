// Every family end to end against its fp32 reference (tests/data/reference: logits from bf16
// weights; tiny_a and tiny_mha from transformers, tiny_llama and tiny_qwen3 from a plain-torch forward
// that reproduces transformers, see their README.md).
// Yardstick: reference.json's hf_bf16_prefill_logits_max_abs_dev, the gap between transformers' own
// bf16 run and its fp32 run — we must be no further from fp32 than transformers' bf16 is.
#include <doctest/doctest.h>

#include <cmath>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include <fused/core/json_text.hpp>
#include <string>
#include <vector>

#include <fused/core/text_string.hpp>
#include <fused/models/decoder_model.hpp>
#include <fused/models/hf_config.hpp>
#include <fused/runtime/weights.hpp>

namespace {

struct fp32_reference {
  fused::decoder::hf_model_info info;
  nlohmann::json meta;
  std::vector<std::int32_t> input_ids, generated_ids;
  std::vector<float> prefill_logits, decode_logits;  // [T, V], [N, V]
  std::map<std::string, std::vector<float>> layers;  // layer{i}_out, final_norm: [T, H]
  std::string dir;
  double yardstick = 0;
};

std::vector<std::int32_t> ids_of(const fused::io::tensor_view& t) {
  std::vector<std::int32_t> out;
  for (auto v : fused::io::to_i64_owned(t)) out.push_back(static_cast<std::int32_t>(v));
  return out;
}

fp32_reference load_fp32_reference(const std::string& name) {
  fp32_reference r;
  r.dir = std::string(FUSED_TEST_DATA) + "/reference/" + name;
  r.info = fused::decoder::load_hf_config(r.dir + "/config.json");
  std::ifstream in(r.dir + "/reference.json");
  r.meta = fused::json_text::parse(in);
  r.yardstick = r.meta["hf_bf16_prefill_logits_max_abs_dev"].get<double>();
  auto f = fused::io::safetensors_file::open(r.dir + "/reference.safetensors");
  r.input_ids = ids_of(*f.find("input_ids"));
  r.generated_ids = ids_of(*f.find("generated_ids"));
  r.prefill_logits = fused::io::to_f32_owned(*f.find("prefill_logits"));
  r.decode_logits = fused::io::to_f32_owned(*f.find("decode_logits"));
  for (const auto& t : f.tensors())
    if (t.name.starts_with("layer") || t.name == "final_norm") r.layers[t.name] = fused::io::to_f32_owned(t);
  return r;
}

double max_abs_diff(std::span<const float> a, std::span<const float> b) {
  REQUIRE(a.size() == b.size());
  double m = 0;
  for (std::size_t i = 0; i < a.size(); ++i) m = std::max(m, std::fabs(static_cast<double>(a[i]) - b[i]));
  return m;
}

fused::decoder::graph_options every_row_logits() {
  fused::decoder::graph_options o;
  o.logits = fused::decoder::logits_rows::all;
  return o;
}

void check_model(const std::string& name) {
  const fp32_reference ref = load_fp32_reference(name);
  const auto T = static_cast<std::int64_t>(ref.input_ids.size());
  const auto N = static_cast<std::int64_t>(ref.generated_ids.size());
  const auto V = ref.info.arch.vocab_size;
  fused::decoder::model m(*ref.info.family, ref.info.arch, T, T + N, every_row_logits());
  const auto w = fused::runtime::weight_store::load(ref.dir, m.tensors(), ref.info.arch.tie_word_embeddings);
  m.bind(w);

  const auto logits = m.prefill(ref.input_ids);
  REQUIRE(static_cast<std::int64_t>(logits.size()) == T * V);
  const double prefill_dev = max_abs_diff(logits, ref.prefill_logits);
  MESSAGE(name << ": prefill max |dlogit| " << prefill_dev << " (yardstick " << ref.yardstick << ")");
  CHECK(prefill_dev <= ref.yardstick);

  // decode_logits row 0 is the last prefill position; row k follows continue ids 0..k-1.
  std::vector<float> decoded(logits.end() - V, logits.end());
  for (std::int64_t k = 1; k < N; ++k) {
    const auto d = m.decode(ref.generated_ids[static_cast<std::size_t>(k - 1)]);
    REQUIRE(static_cast<std::int64_t>(d.size()) == V);
    decoded.insert(decoded.end(), d.begin(), d.end());
  }
  const double decode_dev = max_abs_diff(decoded, ref.decode_logits);
  MESSAGE(name << ": decode max |dlogit| " << decode_dev);
  CHECK(decode_dev <= ref.yardstick);
}

// Debugging aid and a finer check: each layer's output and the final norm against transformers'.
void check_layers(const std::string& name) {
  const fp32_reference ref = load_fp32_reference(name);
  const auto T = static_cast<std::int64_t>(ref.input_ids.size());
  fused::decoder::model m(*ref.info.family, ref.info.arch, T, T, every_row_logits());
  const auto w = fused::runtime::weight_store::load(ref.dir, m.tensors(), ref.info.arch.tie_word_embeddings);
  m.bind(w);
  std::map<std::string, double> dev;
  m.prefill_observed(ref.input_ids, [&](const fused::tensor_info& t, std::span<const float> data) {
    std::string key = fused::to_string(t.name);
    for (int l = 0; l < ref.info.arch.num_hidden_layers; ++l)
      if (key == "layers." + std::to_string(l) + ".resid_mlp") key = "layer" + std::to_string(l) + "_out";
    if (const auto it = ref.layers.find(key); it != ref.layers.end()) dev[key] = max_abs_diff(data, it->second);
  });
  REQUIRE(dev.size() == ref.layers.size());
  for (const auto& [key, d] : dev) {
    // Hidden states are O(1); bf16 keeps 8 bits of mantissa, so 2^-8 relative per rounding.
    double scale = 0;
    for (float v : ref.layers.at(key)) scale = std::max(scale, std::fabs(static_cast<double>(v)));
    MESSAGE(name << " " << key << ": max |d| " << d << " (max |x| " << scale << ")");
    CHECK(d <= scale * 0.02);
  }
}

}  // namespace

TEST_CASE("layer outputs follow the reference's (tiny_a, tiny_mha, tiny_llama, tiny_qwen3)") {
  check_layers("tiny_a");
  check_layers("tiny_mha");
  check_layers("tiny_llama");
  check_layers("tiny_qwen3");
}

TEST_CASE("tiny_a (GQA 4:2, tied) matches transformers within its bf16 yardstick") { check_model("tiny_a"); }
TEST_CASE("tiny_mha (MHA) matches transformers within its bf16 yardstick") { check_model("tiny_mha"); }
TEST_CASE("tiny_llama (Llama 3.1-style llama3 RoPE, untied) matches its reference within its bf16 yardstick") {
  CHECK(load_fp32_reference("tiny_llama").info.family->model_type == "llama");
  check_model("tiny_llama");
}
TEST_CASE("tiny_qwen3 (q/k norm, heads x head_dim != hidden) matches its reference within its bf16 yardstick") {
  CHECK(load_fp32_reference("tiny_qwen3").info.family->model_type == "qwen3");
  check_model("tiny_qwen3");
}
