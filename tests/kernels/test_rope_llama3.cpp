// RoPE "llama3" (Llama 3.1's frequency scaling, fk_rope_llama3): its f32 inverse frequencies are
// transformers' own, bit for bit (the list tests/data/reference/tiny_llama was made with), they
// follow the formula of _compute_llama3_parameters written here in double, and where every
// frequency is in the kept band the kernel is plain RoPE, bit for bit, on every path.
#include <fstream>
#include <numbers>

#include <nlohmann/json.hpp>

#include <fused/core/json_text.hpp>

#include "kernel_test_util.hpp"

using namespace fkt;

namespace {

struct llama3_params {
  float theta, factor, low, high;
  std::size_t original_max;
};

// transformers' _compute_llama3_parameters in double (see tests/models/test_shapes.cpp, inv_freq).
double llama3_inv_freq_double(std::size_t i, std::size_t hd, const llama3_params& p) {
  const double inv = 1.0 / std::pow(static_cast<double>(p.theta), static_cast<double>(2 * i) / static_cast<double>(hd));
  const double old = static_cast<double>(p.original_max), low = p.low, high = p.high, factor = p.factor;
  const double wavelen = 2 * std::numbers::pi / inv;
  double f = wavelen > old / low ? inv / factor : inv;
  const double smooth = (old / wavelen - low) / (high - low);
  if (!(wavelen < old / high) && !(wavelen > old / low)) f = (1 - smooth) * f / factor + smooth * f;
  return f;
}

// The longest wavelength of plain RoPE at this head_dim: 2 pi theta^((hd - 2) / hd).
double longest_wavelen(std::size_t hd, double theta) {
  return 2 * std::numbers::pi * std::pow(theta, static_cast<double>(hd - 2) / static_cast<double>(hd));
}

}  // namespace

TEST_CASE("rope llama3: inv_freq is transformers' f32 list, bit for bit (tiny_llama's reference.json)") {
  std::ifstream in(std::string(FUSED_TEST_DATA) + "/reference/tiny_llama/reference.json");
  REQUIRE(in);
  const nlohmann::json ref = fused::json_text::parse(in);
  const nlohmann::json& cfg = ref.at("config");
  const nlohmann::json& rs = cfg.at("rope_scaling");
  REQUIRE(rs.at("rope_type") == "llama3");
  const auto hd = cfg.at("head_dim").get<std::size_t>();
  const auto theta = cfg.at("rope_theta").get<float>();
  const llama3_params p{theta, rs.at("factor").get<float>(), rs.at("low_freq_factor").get<float>(), rs.at("high_freq_factor").get<float>(),
                        rs.at("original_max_position_embeddings").get<std::size_t>()};
  // The parameters the list was made with (theta 500000, head_dim 32, factor 8, low 1, high 4, original_max 64).
  CHECK(hd == 32);
  CHECK(theta == 500000.0f);
  CHECK((p.factor == 8.0f && p.low == 1.0f && p.high == 4.0f && p.original_max == 64));
  const auto& scaled = ref.at("rope_inv_freq");
  const auto& unscaled = ref.at("rope_inv_freq_unscaled");
  REQUIRE(scaled.size() == hd / 2);
  REQUIRE(unscaled.size() == hd / 2);
  std::size_t differ = 0;  // frequencies the scaling changes: the list is not the plain one
  for (std::size_t i = 0; i < hd / 2; ++i) {
    INFO("i = " << i);
    // The JSON holds each f32 as the shortest double that round-trips: back to f32 exactly.
    const float want = static_cast<float>(scaled[i].get<double>()), want_plain = static_cast<float>(unscaled[i].get<double>());
    CHECK(fk_rope_llama3_inv_freq(i, hd, theta, p.factor, p.low, p.high, static_cast<float>(p.original_max)) == want);
    CHECK(fk_rope_inv_freq(i, hd, theta) == want_plain);
    if (want != want_plain) ++differ;
  }
  CHECK(differ >= hd / 4);
}

TEST_CASE("rope llama3: inv_freq against transformers' formula in double, every band") {
  // Together the sets put frequencies in all three bands (kept, smoothed, slowed by factor).
  const llama3_params sets[] = {{500000, 8, 1, 4, 64}, {10000, 8, 1, 4, 32}, {500000, 32, 1, 2, 16}, {10000, 4, 1, 4, 32}, {500000, 32, 1, 4, 8192}};
  for (const auto& p : sets)
    for (std::size_t hd : {std::size_t{16}, std::size_t{32}, std::size_t{64}, std::size_t{128}})
      for (std::size_t i = 0; i < hd / 2; ++i) {
        INFO("theta " << p.theta << ", factor " << p.factor << ", low " << p.low << ", high " << p.high << ", original_max "
                      << p.original_max << ", head_dim " << hd << ", i " << i);
        const double want = llama3_inv_freq_double(i, hd, p);
        const double got = fk_rope_llama3_inv_freq(i, hd, p.theta, p.factor, p.low, p.high, static_cast<float>(p.original_max));
        // f32 throughout: powf and the divisions are a few u each; the smooth factor carries an
        // absolute error of a few u * high / (high - low), which the mix scales by at most factor
        // relative to the result (>= inv / factor).
        const double tol = 4 * kU * (1 + p.factor * p.high / (p.high - p.low));
        CHECK(std::fabs(got - want) <= tol * want);
      }
}

TEST_CASE("rope llama3: with every frequency kept it is plain RoPE, bit for bit, on every path") {
  for_each_isa([&](fk_isa) {
    for (std::size_t hd : {std::size_t{6}, std::size_t{32}, std::size_t{64}, std::size_t{128}})
      for (std::size_t pos0 : {std::size_t{0}, std::size_t{7}, std::size_t{4000}}) {
        const std::size_t S = 5, heads = 3;
        const float theta = hd == 64 ? 1e6f : 1e4f;
        const float factor = 8, low = 1, high = 4;
        // An original_max just large enough that original_max / high is above every wavelength:
        // all kept. Half of it moves the longest into the smooth band (the check is not vacuous).
        const auto kept_max = static_cast<std::size_t>(std::ceil(longest_wavelen(hd, theta) * high * (1 + 1e-6))) + 1;
        unaligned<float> x(S * heads * hd);
        fill_f32(x.data(), x.size(), -2, 2);
        std::vector<float> plain(x.data(), x.data() + x.size()), llama3 = plain;
        fk_rope(plain.data(), S, heads, hd, pos0, 0, theta);
        fk_rope_llama3(x.data(), S, heads, hd, pos0, 0, theta, factor, low, high, kept_max);
        INFO("head_dim " << hd << ", pos0 " << pos0 << ", original_max " << kept_max);
        CHECK(std::memcmp(x.data(), plain.data(), plain.size() * 4) == 0);
        for (std::size_t i = 0; i < hd / 2; ++i)
          CHECK(fk_rope_llama3_inv_freq(i, hd, theta, factor, low, high, static_cast<float>(kept_max)) == fk_rope_inv_freq(i, hd, theta));
        // Half that original_max: the longest wavelength is in the smooth band, and the result differs.
        const std::size_t half_max = kept_max / 2;
        CHECK(fk_rope_llama3_inv_freq(hd / 2 - 1, hd, theta, factor, low, high, static_cast<float>(half_max)) <
              fk_rope_inv_freq(hd / 2 - 1, hd, theta));
        fk_rope_llama3(llama3.data(), S, heads, hd, pos0, 0, theta, factor, low, high, half_max);
        CHECK(std::memcmp(llama3.data(), plain.data(), plain.size() * 4) != 0);
      }
  });
}
