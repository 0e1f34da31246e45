// Qwen2 shapes beyond the references: GQA ratios 1..7, head_dim 32..128, tied and untied heads, on
// every kernel path this CPU has, against a double-precision forward pass written here from the
// Hugging Face modeling code (same bf16 weights; the KV cache keeps bf16 keys and values as ours).
//
// Tolerances, relative to the largest |logit|: the f32 paths (scalar, AVX2) differ from double
// only by f32 rounding over sums of a few hundred terms (1e-3 is generous); the bf16 paths
// (AVX-512 BF16, AMX) round every matmul's activations to bf16 (2^-9 relative each), which through
// a few layers stays within a few percent — transformers' own bf16 run is further off (see the
// reference yardsticks).
#include <doctest/doctest.h>

#include <cmath>
#include <map>
#include <string>
#include <vector>

#include <fused/core/text_string.hpp>
#include <fused/qwen2.hpp>

namespace {

using fused::decoder::config;

double bf(std::uint16_t h) { return static_cast<double>(fk_bf16_to_f32_1(h)); }
double round_bf16(double x) { return bf(fk_f32_to_bf16_1(static_cast<float>(x))); }

struct weights_by_name {
  std::map<std::string, const std::uint16_t*> p;
  const std::uint16_t* operator()(const std::string& n) const { return p.at(n); }
};

using mat = std::vector<std::vector<double>>;  // [rows][cols]

std::vector<double> rmsnorm(const std::vector<double>& x, const std::uint16_t* w, double eps) {
  double ss = 0;
  for (double v : x) ss += v * v;
  const double r = 1.0 / std::sqrt(ss / static_cast<double>(x.size()) + eps);
  std::vector<double> y(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) y[i] = x[i] * r * bf(w[i]);
  return y;
}
std::vector<double> linear(const std::vector<double>& x, const std::uint16_t* w, std::int64_t n, const std::uint16_t* bias) {
  std::vector<double> y(static_cast<std::size_t>(n));
  const std::size_t k = x.size();
  for (std::size_t o = 0; o < y.size(); ++o) {
    double s = bias ? bf(bias[o]) : 0;
    for (std::size_t i = 0; i < k; ++i) s += x[i] * bf(w[o * k + i]);
    y[o] = s;
  }
  return y;
}
void rope(std::vector<double>& x, std::int64_t heads, std::int64_t hd, std::int64_t pos, double theta) {
  const std::int64_t half = hd / 2;
  for (std::int64_t h = 0; h < heads; ++h)
    for (std::int64_t i = 0; i < half; ++i) {
      const double inv = std::pow(theta, -2.0 * static_cast<double>(i) / static_cast<double>(hd));
      const double a = static_cast<double>(pos) * inv, c = std::cos(a), s = std::sin(a);
      double& x1 = x[static_cast<std::size_t>(h * hd + i)];
      double& x2 = x[static_cast<std::size_t>(h * hd + i + half)];
      const double a1 = x1, a2 = x2;
      x1 = a1 * c - a2 * s;
      x2 = a2 * c + a1 * s;
    }
}

// Logits of every position of `ids` (all processed as one sequence from position 0).
mat reference_forward(const config& c, const weights_by_name& w, const std::vector<std::int32_t>& ids) {
  const std::int64_t H = c.hidden_size, nh = c.num_attention_heads, nkv = c.num_key_value_heads, hd = c.head_dim;
  const std::size_t T = ids.size();
  mat x(T);
  for (std::size_t t = 0; t < T; ++t)
    for (std::int64_t i = 0; i < H; ++i) x[t].push_back(bf(w("model.embed_tokens.weight")[ids[t] * H + i]));
  for (int l = 0; l < c.num_hidden_layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    mat q(T), k(T), v(T);
    for (std::size_t t = 0; t < T; ++t) {
      const auto h = rmsnorm(x[t], w(p + "input_layernorm.weight"), c.rms_norm_eps);
      q[t] = linear(h, w(p + "self_attn.q_proj.weight"), nh * hd, w(p + "self_attn.q_proj.bias"));
      k[t] = linear(h, w(p + "self_attn.k_proj.weight"), nkv * hd, w(p + "self_attn.k_proj.bias"));
      v[t] = linear(h, w(p + "self_attn.v_proj.weight"), nkv * hd, w(p + "self_attn.v_proj.bias"));
      rope(q[t], nh, hd, static_cast<std::int64_t>(t), c.rope_theta);
      rope(k[t], nkv, hd, static_cast<std::int64_t>(t), c.rope_theta);
      for (auto& e : k[t]) e = round_bf16(e);  // the cache holds bf16
      for (auto& e : v[t]) e = round_bf16(e);
    }
    for (std::size_t t = 0; t < T; ++t) {
      std::vector<double> att(static_cast<std::size_t>(nh * hd), 0.0);
      for (std::int64_t h = 0; h < nh; ++h) {
        const std::int64_t g = h / (nh / nkv);
        std::vector<double> s(t + 1);
        double mx = -1e300;
        for (std::size_t j = 0; j <= t; ++j) {
          double d = 0;
          for (std::int64_t i = 0; i < hd; ++i) d += q[t][static_cast<std::size_t>(h * hd + i)] * k[j][static_cast<std::size_t>(g * hd + i)];
          s[j] = d / std::sqrt(static_cast<double>(hd));
          mx = std::max(mx, s[j]);
        }
        double z = 0;
        for (auto& e : s) z += (e = std::exp(e - mx));
        for (std::size_t j = 0; j <= t; ++j)
          for (std::int64_t i = 0; i < hd; ++i)
            att[static_cast<std::size_t>(h * hd + i)] += s[j] / z * v[j][static_cast<std::size_t>(g * hd + i)];
      }
      const auto o = linear(att, w(p + "self_attn.o_proj.weight"), H, nullptr);
      for (std::size_t i = 0; i < x[t].size(); ++i) x[t][i] += o[i];
      const auto h2 = rmsnorm(x[t], w(p + "post_attention_layernorm.weight"), c.rms_norm_eps);
      auto gate = linear(h2, w(p + "mlp.gate_proj.weight"), c.intermediate_size, nullptr);
      const auto up = linear(h2, w(p + "mlp.up_proj.weight"), c.intermediate_size, nullptr);
      for (std::size_t i = 0; i < gate.size(); ++i) gate[i] = gate[i] / (1 + std::exp(-gate[i])) * up[i];
      const auto down = linear(gate, w(p + "mlp.down_proj.weight"), H, nullptr);
      for (std::size_t i = 0; i < x[t].size(); ++i) x[t][i] += down[i];
    }
  }
  mat logits(T);
  const std::uint16_t* head = c.tie_word_embeddings ? w("model.embed_tokens.weight") : w("lm_head.weight");
  for (std::size_t t = 0; t < T; ++t) logits[t] = linear(rmsnorm(x[t], w("model.norm.weight"), c.rms_norm_eps), head, c.vocab_size, nullptr);
  return logits;
}

config make(int nh, int nkv, int hd, bool tied) {
  config c{};
  c.vocab_size = 300;
  c.num_attention_heads = nh;
  c.num_key_value_heads = nkv;
  c.head_dim = hd;
  c.hidden_size = nh * hd;
  c.intermediate_size = 3 * c.hidden_size / 2 + 16;
  c.num_hidden_layers = 2;
  c.max_position_embeddings = 64;
  c.rms_norm_eps = 1e-6;
  c.rope_theta = 10000.0;
  c.tie_word_embeddings = tied;
  return c;
}

void check_shape(const config& c) {
  const std::vector<std::int32_t> ids = {5, 17, 299, 0, 42, 42, 128, 7, 250, 3, 99};
  const std::size_t prompt = 8;  // prefill 8, then decode the remaining 3
  fused::qwen2::model m(c, 8, 16);
  const auto& plan = m.prefill_plan();
  const auto store = fused::runtime::weight_store::synthetic(plan.prog.tensors, plan.mem.buffers, m.weights_bytes(), 7);
  m.bind(store);
  weights_by_name w;
  std::size_t slot = 0;
  for (const auto& t : m.tensors())
    if (t.kind == fused::role::weight) w.p[fused::to_string(t.name)] = store.table()[slot++];
  const mat want = reference_forward(c, w, ids);
  double scale = 0;
  for (const auto& row : want)
    for (double v : row) scale = std::max(scale, std::fabs(v));

  for (int isa = FK_ISA_SCALAR; isa <= FK_ISA_AMX; ++isa) {
    if (!fk_isa_force(static_cast<fk_isa>(isa))) continue;
    m.reset();
    std::vector<std::vector<float>> got;
    const auto p = m.prefill(std::span(ids).first(prompt));
    got.emplace_back(p.begin(), p.end());
    for (std::size_t t = prompt; t < ids.size(); ++t) {
      const auto d = m.decode(ids[t]);
      got.emplace_back(d.begin(), d.end());
    }
    double dev = 0;
    for (std::size_t r = 0; r < got.size(); ++r)
      for (std::size_t i = 0; i < got[r].size(); ++i) dev = std::max(dev, std::fabs(got[r][i] - want[prompt - 1 + r][i]));
    const double tol = isa >= FK_ISA_AVX512BF16 ? 0.03 : 1e-3;
    const std::string what = "heads " + std::to_string(c.num_attention_heads) + "/" + std::to_string(c.num_key_value_heads) +
                             ", head_dim " + std::to_string(c.head_dim) + (c.tie_word_embeddings ? ", tied, " : ", untied, ") +
                             fk_isa_name(static_cast<fk_isa>(isa)) + ": max |d| " + std::to_string(dev) + " of max |logit| " +
                             std::to_string(scale);
    INFO(what);
    CHECK(dev <= tol * scale);
  }
  fk_isa_force(fk_isa_detect());
}

}  // namespace

TEST_CASE("GQA 7:1, head_dim 32, tied") { check_shape(make(7, 1, 32, true)); }
TEST_CASE("MHA 4:4, head_dim 128, untied") { check_shape(make(4, 4, 128, false)); }
TEST_CASE("GQA 6:2, head_dim 64, untied") { check_shape(make(6, 2, 64, false)); }
TEST_CASE("GQA 10:2, head_dim 96, tied") { check_shape(make(10, 2, 96, true)); }
