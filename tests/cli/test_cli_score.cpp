// `fused score` end to end: runs the built tool on the transformers references and compares the
// safetensors it writes with reference.safetensors (the acceptance check of the Qwen2 issue).
#include <doctest/doctest.h>

#include <cmath>
#include <cstdlib>
#include <fstream>
#include <nlohmann/json.hpp>

#include <fused/core/json_text.hpp>
#include <string>

#include <fused/io/safetensors.hpp>

namespace {

std::string ids_of(const nlohmann::json& a) {
  std::string s;
  for (const auto& v : a) {
    if (!s.empty()) s += ',';
    s += std::to_string(v.get<long>());
  }
  return s;
}

void check(const std::string& name) {
  const std::string dir = std::string(FUSED_TEST_DATA) + "/reference/" + name;
  std::ifstream in(dir + "/reference.json");
  const auto ref = fused::json_text::parse(in);
  const std::string out = std::string(FUSED_BINARY_DIR) + "/score_" + name + ".safetensors";
  const std::string cmd = std::string(FUSED_EXE) + " score --model " + dir + " --input-ids " + ids_of(ref["input_ids"]) +
                          " --continue-ids " + ids_of(ref["generated_ids"]) + " --out " + out + " 2>/dev/null";
  REQUIRE(std::system(cmd.c_str()) == 0);
  auto got = fused::io::safetensors_file::open(out);
  auto want = fused::io::safetensors_file::open(dir + "/reference.safetensors");
  const double yardstick = ref["hf_bf16_prefill_logits_max_abs_dev"].get<double>();
  for (const char* t : {"prefill_logits", "decode_logits"}) {
    REQUIRE(got.find(t) != nullptr);
    CHECK(got.find(t)->shape == want.find(t)->shape);
    const auto a = fused::io::to_f32_owned(*got.find(t)), b = fused::io::to_f32_owned(*want.find(t));
    REQUIRE(a.size() == b.size());
    double m = 0;
    for (std::size_t i = 0; i < a.size(); ++i) m = std::max(m, std::fabs(static_cast<double>(a[i]) - b[i]));
    MESSAGE(name << " " << t << ": max |d| " << m << " (yardstick " << yardstick << ")");
    CHECK(m <= yardstick);
  }
}

}  // namespace

TEST_CASE("fused score: tiny_a") { check("tiny_a"); }
TEST_CASE("fused score: tiny_mha") { check("tiny_mha"); }
