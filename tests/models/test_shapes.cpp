// Shapes beyond the references, for every family (Qwen2, Qwen3, Llama, Mistral): GQA ratios 1:1 to
// 15:5, head_dim 16..128 (also unrelated to hidden_size / heads), tied and untied heads, Qwen3's q/k
// head norms, Llama's attention_bias and mlp_bias, RoPE "llama3" scaling over positions past
// original_max_position_embeddings, Mistral; on every kernel path this CPU has, against a
// double-precision forward pass written here from the Hugging Face modeling code (same bf16
// weights; the KV cache keeps bf16 keys and values as ours). The reference decides what a family
// computes from the family and the config alone (never from the weights the model asks for), and
// checks that it read exactly the weights the model binds: a missing or an extra bias, norm or head
// fails here.
//
// Tolerances, relative to the largest |logit|: the f32 paths (scalar, AVX2) differ from double
// only by f32 rounding over sums of a few hundred terms (1e-3 is generous); the bf16 paths
// (AVX-512 BF16, AMX) round every matmul's activations to bf16 (2^-9 relative each), which through
// a few layers stays within a few percent — transformers' own bf16 run is further off (see the
// reference yardsticks).
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <map>
#include <numbers>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include <fused/core/text_string.hpp>
#include <fused/llama.hpp>
#include <fused/mistral.hpp>
#include <fused/qwen2.hpp>
#include <fused/qwen3.hpp>

namespace {

using fused::decoder::config;
using fused::decoder::family_entry;
using fused::decoder::rope_kind;

double bf(std::uint16_t h) { return static_cast<double>(fk_bf16_to_f32_1(h)); }
double round_bf16(double x) { return bf(fk_f32_to_bf16_1(static_cast<float>(x))); }

// The model's weights by name; remembers which ones the reference read.
struct weights_by_name {
  std::map<std::string, const std::uint16_t*> p;
  mutable std::set<std::string> used;
  const std::uint16_t* operator()(const std::string& n) const {
    const auto it = p.find(n);
    if (it == p.end()) throw std::out_of_range("the reference needs weight " + n + ", which the model does not have");
    used.insert(n);
    return it->second;
  }
  const std::uint16_t* operator()(const std::string& n, bool present) const { return present ? (*this)(n) : nullptr; }
};

using mat = std::vector<std::vector<double>>;  // [rows][cols]

// What Hugging Face's modeling code of each family computes, from the family and the config.
struct features {
  bool qkv_bias = false, o_bias = false, mlp_bias = false, qk_norm = false;
};
features features_of(const family_entry& f, const config& c) {
  const std::string t(f.model_type);
  if (t == "qwen2") return {.qkv_bias = true};                                                       // Qwen2Attention: q/k/v bias=True, o bias=False
  if (t == "qwen3") return {.qkv_bias = c.attention_bias, .o_bias = c.attention_bias, .qk_norm = true};  // Qwen3Attention
  if (t == "llama") return {.qkv_bias = c.attention_bias, .o_bias = c.attention_bias, .mlp_bias = c.mlp_bias};
  if (t == "mistral") return {};  // MistralAttention / MistralMLP: bias=False everywhere
  throw std::invalid_argument("no reference for model_type " + t);
}

// RMSNorm of x[0, n) in place (Qwen2RMSNorm / LlamaRMSNorm: x * rsqrt(mean(x^2) + eps) * w).
void rmsnorm_span(double* x, std::size_t n, const std::uint16_t* w, double eps) {
  double ss = 0;
  for (std::size_t i = 0; i < n; ++i) ss += x[i] * x[i];
  const double r = 1.0 / std::sqrt(ss / static_cast<double>(n) + eps);
  for (std::size_t i = 0; i < n; ++i) x[i] = x[i] * r * bf(w[i]);
}
std::vector<double> rmsnorm(std::vector<double> x, const std::uint16_t* w, double eps) {
  rmsnorm_span(x.data(), x.size(), w, eps);
  return x;
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

// inv_freq[i], i < head_dim/2, in double: transformers' _compute_default_rope_parameters
// (1 / base ** (arange(0, dim, 2) / dim)) and, for rope_type "llama3", _compute_llama3_parameters:
//   low_freq_wavelen = old_context_len / low_freq_factor; high_freq_wavelen = old_context_len / high_freq_factor
//   wavelen = 2 * pi / inv_freq
//   inv_freq_llama = where(wavelen > low_freq_wavelen, inv_freq / factor, inv_freq)
//   smooth_factor = (old_context_len / wavelen - low_freq_factor) / (high_freq_factor - low_freq_factor)
//   smoothed_inv_freq = (1 - smooth_factor) * inv_freq_llama / factor + smooth_factor * inv_freq_llama
//   is_medium_freq = ~(wavelen < high_freq_wavelen) * ~(wavelen > low_freq_wavelen)
//   inv_freq_llama = where(is_medium_freq, smoothed_inv_freq, inv_freq_llama)
struct rope_bands {
  int kept = 0, smoothed = 0, scaled = 0;
};
std::vector<double> inv_freq(const config& c, rope_bands* bands = nullptr) {
  const std::int64_t hd = c.head_dim;
  std::vector<double> r(static_cast<std::size_t>(hd / 2));
  for (std::int64_t i = 0; i < hd / 2; ++i) {
    const double inv = 1.0 / std::pow(c.rope_theta, static_cast<double>(2 * i) / static_cast<double>(hd));
    double f = inv;
    if (c.rope_type == rope_kind::llama3) {
      const double old = c.rope_original_max_position_embeddings, factor = c.rope_factor;
      const double low = c.rope_low_freq_factor, high = c.rope_high_freq_factor;
      const double low_wavelen = old / low, high_wavelen = old / high;
      const double wavelen = 2 * std::numbers::pi / inv;
      f = wavelen > low_wavelen ? inv / factor : inv;
      const double smooth = (old / wavelen - low) / (high - low);
      const bool medium = !(wavelen < high_wavelen) && !(wavelen > low_wavelen);
      if (medium) f = (1 - smooth) * f / factor + smooth * f;
      if (bands) ++(medium ? bands->smoothed : wavelen > low_wavelen ? bands->scaled : bands->kept);
    }
    r[static_cast<std::size_t>(i)] = f;
  }
  return r;
}

// rotate_half RoPE of `heads` heads at position pos.
void rope(std::vector<double>& x, std::int64_t heads, std::int64_t hd, std::int64_t pos, const std::vector<double>& inv) {
  const std::int64_t half = hd / 2;
  for (std::int64_t h = 0; h < heads; ++h)
    for (std::int64_t i = 0; i < half; ++i) {
      const double a = static_cast<double>(pos) * inv[static_cast<std::size_t>(i)], c = std::cos(a), s = std::sin(a);
      double& x1 = x[static_cast<std::size_t>(h * hd + i)];
      double& x2 = x[static_cast<std::size_t>(h * hd + i + half)];
      const double a1 = x1, a2 = x2;
      x1 = a1 * c - a2 * s;
      x2 = a2 * c + a1 * s;
    }
}

// Logits of every position of `ids` (all processed as one sequence from position 0).
mat reference_forward(const family_entry& f, const config& c, const weights_by_name& w, const std::vector<std::int32_t>& ids) {
  const features ft = features_of(f, c);
  const std::int64_t H = c.hidden_size, nh = c.num_attention_heads, nkv = c.num_key_value_heads, hd = c.head_dim;
  const std::vector<double> inv = inv_freq(c);
  const std::size_t T = ids.size();
  mat x(T);
  for (std::size_t t = 0; t < T; ++t)
    for (std::int64_t i = 0; i < H; ++i) x[t].push_back(bf(w("model.embed_tokens.weight")[ids[t] * H + i]));
  for (int l = 0; l < c.num_hidden_layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    mat q(T), k(T), v(T);
    for (std::size_t t = 0; t < T; ++t) {
      const auto h = rmsnorm(x[t], w(p + "input_layernorm.weight"), c.rms_norm_eps);
      q[t] = linear(h, w(p + "self_attn.q_proj.weight"), nh * hd, w(p + "self_attn.q_proj.bias", ft.qkv_bias));
      k[t] = linear(h, w(p + "self_attn.k_proj.weight"), nkv * hd, w(p + "self_attn.k_proj.bias", ft.qkv_bias));
      v[t] = linear(h, w(p + "self_attn.v_proj.weight"), nkv * hd, w(p + "self_attn.v_proj.bias", ft.qkv_bias));
      if (ft.qk_norm) {  // Qwen3: q_norm / k_norm over each head (head_dim), before RoPE
        for (std::int64_t j = 0; j < nh; ++j)
          rmsnorm_span(q[t].data() + j * hd, static_cast<std::size_t>(hd), w(p + "self_attn.q_norm.weight"), c.rms_norm_eps);
        for (std::int64_t j = 0; j < nkv; ++j)
          rmsnorm_span(k[t].data() + j * hd, static_cast<std::size_t>(hd), w(p + "self_attn.k_norm.weight"), c.rms_norm_eps);
      }
      rope(q[t], nh, hd, static_cast<std::int64_t>(t), inv);
      rope(k[t], nkv, hd, static_cast<std::int64_t>(t), inv);
      for (auto& e : k[t]) e = round_bf16(e);  // the cache holds bf16
      for (auto& e : v[t]) e = round_bf16(e);
    }
    for (std::size_t t = 0; t < T; ++t) {
      std::vector<double> att(static_cast<std::size_t>(nh * hd), 0.0);
      for (std::int64_t h = 0; h < nh; ++h) {
        const std::int64_t g = h / (nh / nkv);  // repeat_kv: query head h reads KV head h / n_rep
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
      const auto o = linear(att, w(p + "self_attn.o_proj.weight"), H, w(p + "self_attn.o_proj.bias", ft.o_bias));
      for (std::size_t i = 0; i < x[t].size(); ++i) x[t][i] += o[i];
      const auto h2 = rmsnorm(x[t], w(p + "post_attention_layernorm.weight"), c.rms_norm_eps);
      auto gate = linear(h2, w(p + "mlp.gate_proj.weight"), c.intermediate_size, w(p + "mlp.gate_proj.bias", ft.mlp_bias));
      const auto up = linear(h2, w(p + "mlp.up_proj.weight"), c.intermediate_size, w(p + "mlp.up_proj.bias", ft.mlp_bias));
      for (std::size_t i = 0; i < gate.size(); ++i) gate[i] = gate[i] / (1 + std::exp(-gate[i])) * up[i];
      const auto down = linear(gate, w(p + "mlp.down_proj.weight"), H, w(p + "mlp.down_proj.bias", ft.mlp_bias));
      for (std::size_t i = 0; i < x[t].size(); ++i) x[t][i] += down[i];
    }
  }
  mat logits(T);
  const std::uint16_t* head = c.tie_word_embeddings ? w("model.embed_tokens.weight") : w("lm_head.weight");
  for (std::size_t t = 0; t < T; ++t) logits[t] = linear(rmsnorm(x[t], w("model.norm.weight"), c.rms_norm_eps), head, c.vocab_size, nullptr);
  return logits;
}

// hidden 0: heads x head_dim (as the Qwen2 cases always were).
config make(int nh, int nkv, int hd, bool tied, int hidden = 0) {
  config c{};
  c.vocab_size = 300;
  c.num_attention_heads = nh;
  c.num_key_value_heads = nkv;
  c.head_dim = hd;
  c.hidden_size = hidden ? hidden : nh * hd;
  c.intermediate_size = 3 * c.hidden_size / 2 + 16;
  c.num_hidden_layers = 2;
  c.max_position_embeddings = 64;
  c.rms_norm_eps = 1e-6;
  c.rope_theta = 10000.0;
  c.tie_word_embeddings = tied;
  return c;
}
config with_bias(config c, bool attention, bool mlp) {
  c.attention_bias = attention;
  c.mlp_bias = mlp;
  return c;
}
config with_llama3(config c, double theta, double factor, double low, double high, int original_max) {
  c.rope_type = rope_kind::llama3;
  c.rope_theta = theta;
  c.rope_factor = factor;
  c.rope_low_freq_factor = low;
  c.rope_high_freq_factor = high;
  c.rope_original_max_position_embeddings = original_max;
  return c;
}

// The tokens of a run: `prompt` prefilled in chunks of at most `max_tokens`, then the rest decoded
// one at a time.
struct run {
  std::size_t tokens = 11, prompt = 8, max_tokens = 8;
};
constexpr run short_run{};
constexpr run long_run{.tokens = 52, .prompt = 44, .max_tokens = 16};  // chunks 16 + 16 + 12, then 8 decodes

std::vector<std::int32_t> ids_for(const run& r, int vocab) {
  std::vector<std::int32_t> ids = {5, 17, 299, 0, 42, 42, 128, 7, 250, 3, 99};
  ids.resize(std::min(ids.size(), r.tokens));
  std::uint32_t s = 12345;
  while (ids.size() < r.tokens) {
    s = s * 1664525u + 1013904223u;
    ids.push_back(static_cast<std::int32_t>((s >> 8) % static_cast<std::uint32_t>(vocab)));
  }
  return ids;
}

std::string describe(const family_entry& f, const config& c, const run& r) {
  std::string s = std::string(f.model_type) + ": heads " + std::to_string(c.num_attention_heads) + "/" + std::to_string(c.num_key_value_heads) +
                  ", head_dim " + std::to_string(c.head_dim) + ", hidden " + std::to_string(c.hidden_size) +
                  (c.tie_word_embeddings ? ", tied" : ", untied");
  if (c.attention_bias) s += ", attention_bias";
  if (c.mlp_bias) s += ", mlp_bias";
  if (c.rope_type == rope_kind::llama3)
    s += ", llama3 rope (theta " + std::to_string(c.rope_theta) + ", factor " + std::to_string(c.rope_factor) + ", low " +
         std::to_string(c.rope_low_freq_factor) + ", high " + std::to_string(c.rope_high_freq_factor) + ", original_max " +
         std::to_string(c.rope_original_max_position_embeddings) + ")";
  if (c.sliding_window) s += ", sliding_window " + std::to_string(c.sliding_window);
  return s + ", " + std::to_string(r.prompt) + " + " + std::to_string(r.tokens - r.prompt) + " tokens";
}

void check_shape(const family_entry& f, const config& c, const run& r = short_run) {
  const std::string label = describe(f, c, r);
  INFO(label);
  const std::vector<std::int32_t> ids = ids_for(r, c.vocab_size);
  fused::decoder::model m(f, c, static_cast<std::int64_t>(r.max_tokens), static_cast<std::int64_t>(r.tokens));
  const auto& plan = m.prefill_plan();
  const auto synthetic = fused::runtime::weight_store::synthetic(plan.prog.tensors, plan.mem.buffers, m.weights_bytes(), 7);
  // The synthetic biases are small (+-0.02): here they are +-0.5, so that one the model leaves out,
  // or adds where Hugging Face has none, shows on the bf16 paths too.
  fused::runtime::aligned_bytes blob(synthetic.blob().size());
  std::memcpy(blob.data(), synthetic.blob().data(), synthetic.blob().size());
  for (const auto& t : m.tensors()) {
    if (t.kind != fused::role::weight || !fused::to_string(t.name).ends_with(".bias")) continue;
    auto* b = reinterpret_cast<std::uint16_t*>(blob.data() + plan.mem.buffers[static_cast<std::size_t>(t.id)].offset);
    for (std::int64_t i = 0; i < t.shp[0].n; ++i) b[i] = fk_f32_to_bf16_1(0.5f * static_cast<float>(bf(b[i])) / 0.02f);
  }
  const auto store = fused::runtime::weight_store::from_blob(blob.data(), plan.prog.tensors, plan.mem.buffers);
  m.bind(store);
  weights_by_name w;
  std::size_t slot = 0;
  for (const auto& t : m.tensors())
    if (t.kind == fused::role::weight) w.p[fused::to_string(t.name)] = store.table()[slot++];
  const mat want = reference_forward(f, c, w, ids);
  // Hugging Face's model has exactly the weights the model binds (tied: no lm_head.weight).
  std::set<std::string> bound;
  for (const auto& [name, ptr] : w.p) bound.insert(name);
  CHECK(w.used == bound);
  double scale = 0;
  for (const auto& row : want)
    for (double v : row) scale = std::max(scale, std::fabs(v));

  for (int isa = FK_ISA_SCALAR; isa <= FK_ISA_AMX; ++isa) {
    if (!fk_isa_force(static_cast<fk_isa>(isa))) continue;
    m.reset();
    std::vector<std::vector<float>> got;
    const auto p = m.prefill(std::span(ids).first(r.prompt));
    got.emplace_back(p.begin(), p.end());
    for (std::size_t t = r.prompt; t < ids.size(); ++t) {
      const auto d = m.decode(ids[t]);
      got.emplace_back(d.begin(), d.end());
    }
    double dev = 0;
    for (std::size_t row = 0; row < got.size(); ++row)
      for (std::size_t i = 0; i < got[row].size(); ++i) dev = std::max(dev, std::fabs(got[row][i] - want[r.prompt - 1 + row][i]));
    const double tol = isa >= FK_ISA_AVX512BF16 ? 0.03 : 1e-3;
    INFO(std::string(fk_isa_name(static_cast<fk_isa>(isa))) << ": max |d| " << dev << " of max |logit| " << scale << " (" << dev / scale << ")");
    CHECK(dev <= tol * scale);
  }
  fk_isa_force(fk_isa_detect());
}

const family_entry& qwen2 = fused::qwen2::entry;
const family_entry& qwen3 = fused::qwen3::entry;
const family_entry& llama = fused::llama::entry;
const family_entry& mistral = fused::mistral::entry;

// Every family over the GQA ratios 1:1, 4:1, 8:2, 15:5 (SmolLM2) and head_dim 16..128, tied and untied.
void ratios_and_head_dims(const family_entry& f) {
  check_shape(f, make(4, 4, 16, true));
  check_shape(f, make(4, 1, 32, false));
  check_shape(f, make(8, 2, 64, true));
  check_shape(f, make(15, 5, 96, false, 240));
  check_shape(f, make(8, 2, 128, false, 256));
}

}  // namespace

TEST_CASE("Qwen2: GQA 7:1, head_dim 32, tied") { check_shape(qwen2, make(7, 1, 32, true)); }
TEST_CASE("Qwen2: MHA 4:4, head_dim 128, untied") { check_shape(qwen2, make(4, 4, 128, false)); }
TEST_CASE("Qwen2: GQA 6:2, head_dim 64, untied") { check_shape(qwen2, make(6, 2, 64, false)); }
TEST_CASE("Qwen2: GQA 10:2, head_dim 96, tied") { check_shape(qwen2, make(10, 2, 96, true)); }
TEST_CASE("Qwen2: GQA 1:1 to 15:5, head_dim 16 to 128") { ratios_and_head_dims(qwen2); }

TEST_CASE("Qwen3: GQA 1:1 to 15:5, head_dim 16 to 128") { ratios_and_head_dims(qwen3); }
TEST_CASE("Qwen3: heads x head_dim unlike hidden_size, attention_bias") {
  check_shape(qwen3, make(8, 2, 64, true, 128));               // 512 query features from 128 (Qwen3's 16 x 128 over 1024)
  check_shape(qwen3, make(4, 2, 32, false, 192));              // fewer: 128 from 192
  check_shape(qwen3, with_bias(make(6, 3, 32, false, 96), true, false));
}
TEST_CASE("Qwen3: llama3 RoPE") { check_shape(qwen3, with_llama3(make(4, 2, 16, true, 96), 10000, 8, 1, 4, 32), long_run); }

TEST_CASE("Llama: GQA 1:1 to 15:5, head_dim 16 to 128") { ratios_and_head_dims(llama); }
TEST_CASE("Llama: attention_bias, mlp_bias, both, head_dim unlike hidden_size") {
  check_shape(llama, with_bias(make(4, 2, 32, false, 96), true, false));
  check_shape(llama, with_bias(make(4, 2, 32, true, 160), false, true));
  check_shape(llama, with_bias(make(6, 2, 16, false, 128), true, true));
}
TEST_CASE("Llama: llama3 RoPE, positions past original_max_position_embeddings") {
  // Each parameter set has frequencies kept, smoothed and scaled (checked below), and the 52
  // positions run past original_max (16 or 32), where the scaled ones differ most.
  const config sets[] = {
      with_llama3(make(4, 1, 32, false, 96), 10000, 8, 1, 4, 32),     // 1 kept, 2 smoothed, 13 scaled
      with_llama3(make(4, 2, 64, true, 128), 500000, 32, 1, 2, 16),   // 1, 2, 29
      with_llama3(make(2, 2, 128, false, 128), 10000, 4, 1, 4, 32),   // 2, 10, 52
  };
  for (const config& c : sets) {
    rope_bands b;
    inv_freq(c, &b);
    INFO("kept " << b.kept << ", smoothed " << b.smoothed << ", scaled " << b.scaled);
    CHECK((b.kept > 0 && b.smoothed > 0 && b.scaled > 0));
    check_shape(llama, c, long_run);
  }
}
TEST_CASE("Llama: plain RoPE over the long run") { check_shape(llama, make(15, 5, 16, true, 96), long_run); }

// Mistral's graph is Llama's without biases (mistral.hpp), so a few shapes suffice.
TEST_CASE("Mistral: GQA 15:5 tied, 8:2 untied") {
  check_shape(mistral, make(15, 5, 16, true, 96));
  check_shape(mistral, make(8, 2, 128, false, 256));
}
TEST_CASE("Mistral: sliding_window equal to the KV capacity") {
  config c = make(8, 2, 32, false, 128);
  c.sliding_window = static_cast<int>(long_run.tokens);
  check_shape(mistral, c, long_run);
}
