// config.json -> decoder::config: real configs in both transformers formats, one test per validation
// rule with its exact message, and the field-by-field comparison against a compiled-in config.
#include "fused/models/hf_config.hpp"

#include <doctest/doctest.h>
#include <nlohmann/json.hpp>

#include <fused/core/json_text.hpp>

#include <filesystem>
#include <fstream>
#include <functional>
#include <string>
#include <vector>

namespace fs = std::filesystem;
using fused::decoder::hf_model_info;
using fused::io::load_error;
using fused::decoder::parse_hf_config;
using nlohmann::json;

namespace {

const fs::path data_dir = FUSED_TEST_DATA;
const fs::path source_dir = FUSED_SOURCE_DIR;

json read_json(const fs::path& path) {
  std::ifstream in(path);
  return fused::json_text::parse(in);
}

// Qwen2-0.5B's config.json (transformers 4), edited by `edit`, parsed: the error message or "no error".
std::string error_after(const std::function<void(json&)>& edit) {
  json j = read_json(data_dir / "configs" / "qwen2-0.5b.json");
  edit(j);
  try {
    parse_hf_config(fused::json_text::dump(j), "config.json");
  } catch (const load_error& e) {
    return e.what();
  }
  return "no error";
}

std::string error_of_text(std::string_view text) {
  try {
    parse_hf_config(text, "config.json");
  } catch (const load_error& e) {
    return e.what();
  }
  return "no error";
}

constexpr fused::decoder::config qwen2_0_5b{.vocab_size = 151936,
                                          .hidden_size = 896,
                                          .intermediate_size = 4864,
                                          .num_hidden_layers = 24,
                                          .num_attention_heads = 14,
                                          .num_key_value_heads = 2,
                                          .head_dim = 64,
                                          .max_position_embeddings = 131072,
                                          .rms_norm_eps = 1e-6,
                                          .rope_theta = 1e6,
                                          .tie_word_embeddings = true};

}  // namespace

TEST_CASE("transformers 4 configs: the four Qwen2 checkpoints users bring") {
  const hf_model_info small = fused::decoder::load_hf_config(data_dir / "configs" / "qwen2-0.5b.json");
  CHECK(small.arch == qwen2_0_5b);
  CHECK(small.eos_token_ids == std::vector<int>{151643});
  CHECK(small.bos_token_id == 151643);
  CHECK(small.dtype == "bfloat16");

  fused::decoder::config v25 = qwen2_0_5b;
  v25.max_position_embeddings = 32768;
  CHECK(fused::decoder::load_hf_config(data_dir / "configs" / "qwen2.5-0.5b.json").arch == v25);

  const fused::decoder::config big = fused::decoder::load_hf_config(data_dir / "configs" / "qwen2-7b.json").arch;
  CHECK(big == fused::decoder::config{152064, 3584, 18944, 28, 28, 4, 128, 131072, 1e-6, 1e6, false});
  const fused::decoder::config mid = fused::decoder::load_hf_config(data_dir / "configs" / "qwen2-1.5b.json").arch;
  CHECK(mid == fused::decoder::config{151936, 1536, 8960, 28, 12, 2, 128, 131072, 1e-6, 1e6, true});
}

TEST_CASE("transformers 5 configs: rope_parameters and dtype; a model directory works as the path") {
  const hf_model_info kjv = fused::decoder::load_hf_config(source_dir / "examples" / "models" / "kjv-qwen2-4m");
  CHECK(kjv.arch == fused::decoder::config{4096, 256, 768, 4, 8, 2, 32, 512, 1e-6, 1e4, true});
  CHECK(kjv.eos_token_ids == std::vector<int>{4093});
  CHECK(kjv.bos_token_id == 4093);
  CHECK(kjv.dtype == "bfloat16");

  const hf_model_info a = fused::decoder::load_hf_config(data_dir / "reference" / "tiny_a" / "config.json");
  CHECK(a.arch == fused::decoder::config{1000, 128, 352, 2, 4, 2, 32, 1024, 1e-6, 1e6, true});
  CHECK(a.eos_token_ids.empty());  // null in the file
  CHECK(!a.bos_token_id);
  const hf_model_info mha = fused::decoder::load_hf_config(data_dir / "reference" / "tiny_mha");
  CHECK(mha.arch == fused::decoder::config{512, 64, 160, 2, 2, 2, 32, 1024, 1e-6, 1e4, false});
}

TEST_CASE("defaults transformers applies, and the fields that override them") {
  CHECK(error_after([](json& j) {
          j.erase("num_key_value_heads");
          j.erase("tie_word_embeddings");
          j["head_dim"] = 128;
          j["eos_token_id"] = {151643, 151645};
          j.erase("bos_token_id");
          j.erase("torch_dtype");
        }) == "no error");
  json j = read_json(data_dir / "configs" / "qwen2-0.5b.json");
  j.erase("num_key_value_heads");
  j.erase("tie_word_embeddings");
  j["head_dim"] = 128;  // explicit head_dim wins over hidden / heads
  j["eos_token_id"] = {151643, 151645};
  j.erase("bos_token_id");
  j.erase("torch_dtype");
  j["rope_scaling"] = {{"rope_type", "default"}};
  const hf_model_info info = parse_hf_config(fused::json_text::dump(j));
  CHECK(info.arch.num_key_value_heads == 14);  // MHA when absent
  CHECK(!info.arch.tie_word_embeddings);       // Qwen2Config's default
  CHECK(info.arch.head_dim == 128);
  CHECK(info.eos_token_ids == std::vector<int>{151643, 151645});
  CHECK(!info.bos_token_id);
  CHECK(info.dtype.empty());

  // Both rope spellings at once are fine when they agree.
  j["rope_parameters"] = {{"rope_theta", 1e6}, {"rope_type", "default"}};
  CHECK(parse_hf_config(fused::json_text::dump(j)).arch.rope_theta == 1e6);

  // Without a head_dim key, Qwen3Config takes 128 (not hidden / heads, as Qwen2, Llama and Mistral
  // do); an explicit null is hidden / heads there too.
  j.erase("head_dim");
  CHECK(parse_hf_config(fused::json_text::dump(j)).arch.head_dim == 896 / 14);
  j["model_type"] = "qwen3";
  j["architectures"] = {"Qwen3ForCausalLM"};
  CHECK(parse_hf_config(fused::json_text::dump(j)).arch.head_dim == 128);
  j["num_attention_heads"] = 12;  // does not divide 896: no matter, head_dim is 128
  j["num_key_value_heads"] = 4;
  CHECK(parse_hf_config(fused::json_text::dump(j)).arch.head_dim == 128);
  j["head_dim"] = nullptr;
  CHECK_THROWS_WITH(parse_hf_config(fused::json_text::dump(j)), doctest::Contains("12 does not divide hidden_size 896 (and there is no \"head_dim\")"));
  j["num_attention_heads"] = 14;
  j["num_key_value_heads"] = 2;
  CHECK(parse_hf_config(fused::json_text::dump(j)).arch.head_dim == 64);
}

TEST_CASE("missing and mistyped fields") {
  CHECK(error_after([](json& j) { j.erase("hidden_size"); }) == "config.json: field \"hidden_size\": is missing");
  CHECK(error_after([](json& j) { j["vocab_size"] = nullptr; }) == "config.json: field \"vocab_size\": is missing");
  CHECK(error_after([](json& j) { j["hidden_size"] = "896"; }) ==
        "config.json: field \"hidden_size\": must be an integer, got \"896\"");
  CHECK(error_after([](json& j) { j["hidden_size"] = 896.0; }) ==
        "config.json: field \"hidden_size\": must be an integer, got 896.0");
  CHECK(error_after([](json& j) { j["num_hidden_layers"] = 0; }) ==
        "config.json: field \"num_hidden_layers\": 0 must be positive");
  CHECK(error_after([](json& j) { j["intermediate_size"] = -4864; }) ==
        "config.json: field \"intermediate_size\": -4864 must be positive");
  CHECK(error_after([](json& j) { j["vocab_size"] = 4294967296LL; }) ==
        "config.json: field \"vocab_size\": 4294967296 is out of range");
  CHECK(error_after([](json& j) { j["rms_norm_eps"] = 0; }) ==
        "config.json: field \"rms_norm_eps\": 0 must be positive and below 1");
  CHECK(error_after([](json& j) { j["rms_norm_eps"] = "1e-6"; }) ==
        "config.json: field \"rms_norm_eps\": must be a number, got \"1e-6\"");
  CHECK(error_after([](json& j) { j["tie_word_embeddings"] = 1; }) ==
        "config.json: field \"tie_word_embeddings\": must be true or false, got 1");
  CHECK(error_after([](json& j) { j["torch_dtype"] = 16; }) ==
        "config.json: field \"torch_dtype\": must be a string, got 16");
  CHECK(error_after([](json& j) { j["max_position_embeddings"] = true; }) ==
        "config.json: field \"max_position_embeddings\": must be an integer, got true");
}

TEST_CASE("shape rules between fields") {
  CHECK(error_after([](json& j) { j["num_key_value_heads"] = 3; }) ==
        "config.json: field \"num_key_value_heads\": 3 does not divide num_attention_heads 14");
  CHECK(error_after([](json& j) { j["num_attention_heads"] = 12; }) ==
        "config.json: field \"num_attention_heads\": 12 does not divide hidden_size 896 (and there is no \"head_dim\")");
  CHECK(error_after([](json& j) { j["num_attention_heads"] = 12, j["head_dim"] = 64; }) == "no error");
  CHECK(error_after([](json& j) { j["head_dim"] = 63; }) ==
        "config.json: field \"head_dim\": 63 must be even (RoPE rotates pairs of dimensions)");
  CHECK(error_after([](json& j) { j["hidden_size"] = 14 * 7, j["intermediate_size"] = 64; }) ==
        "config.json: field \"head_dim\": 7 must be even (RoPE rotates pairs of dimensions)");
  CHECK(error_after([](json& j) { j["head_dim"] = 2000000000; }) ==
        "config.json: field \"head_dim\": 2000000000 times num_attention_heads 14 does not fit in an int");
  CHECK(error_after([](json& j) { j["eos_token_id"] = 151936; }) ==
        "config.json: field \"eos_token_id\": 151936 is not below vocab_size 151936");
  CHECK(error_after([](json& j) { j["eos_token_id"] = {1, -2}; }) ==
        "config.json: field \"eos_token_id\": -2 must be non-negative");
  CHECK(error_after([](json& j) { j["bos_token_id"] = {1, 2}; }) ==
        "config.json: field \"bos_token_id\": must be one id, got 2");
}

TEST_CASE("models this library would run wrongly are refused") {
  CHECK(error_after([](json& j) { j["model_type"] = "llama"; }) ==
        "config.json: field \"architectures\": [\"Qwen2ForCausalLM\"] does not include \"LlamaForCausalLM\"");
  CHECK(error_after([](json& j) { j["model_type"] = "gpt2"; }) ==
        "config.json: field \"model_type\": \"gpt2\" is not supported (supported: \"qwen2\", \"qwen3\", \"llama\", \"mistral\")");
  CHECK(error_after([](json& j) { j["num_experts"] = 8; }) == "config.json: field \"num_experts\": mixture-of-experts models are not supported");
  CHECK(error_after([](json& j) { j["architectures"] = {"Qwen2ForSequenceClassification"}; }) ==
        "config.json: field \"architectures\": [\"Qwen2ForSequenceClassification\"] does not include "
        "\"Qwen2ForCausalLM\"");
  CHECK(error_after([](json& j) { j.erase("model_type"); }) == "no error");  // architectures suffices
  // model_type's architecture anywhere in the list (the first one supported may be another family's).
  CHECK(error_after([](json& j) { j["architectures"] = {"LlamaForCausalLM", "Qwen2ForCausalLM"}; }) == "no error");
  CHECK(error_after([](json& j) { j["rope_scaling"] = {{"factor", 8.0}, {"original_max_position_embeddings", 64}}; }) ==
        "config.json: field \"rope_scaling\": gives \"factor\" but no \"rope_type\" (or \"type\"): which RoPE it scales by is not said");
  CHECK(error_after([](json& j) { j.erase("model_type"), j.erase("architectures"); }) ==
        "config.json: field \"model_type\": is missing, and so is \"architectures\": cannot tell which model this is");
  CHECK(error_after([](json& j) { j["use_sliding_window"] = true; }) ==
        "config.json: field \"use_sliding_window\": true is not supported (only full attention)");
  CHECK(error_after([](json& j) { j["hidden_act"] = "gelu"; }) ==
        "config.json: field \"hidden_act\": \"gelu\" is not supported (only \"silu\")");
  CHECK(error_after([](json& j) { j["quantization_config"] = {{"bits", 4}}; }) ==
        "config.json: field \"quantization_config\": quantized checkpoints are not supported (bf16, f16 or f32 "
        "weights only)");
  CHECK(error_after([](json& j) { j["layer_types"] = json::array({"full_attention", "sliding_attention"}); }) ==
        "config.json: field \"layer_types\": must be a list of num_hidden_layers 24 entries, got "
        "[\"full_attention\",\"sliding_attention\"]");
  CHECK(error_after([](json& j) {
          j["layer_types"] = json::array();
          for (int i = 0; i < 24; ++i) j["layer_types"].push_back(i == 5 ? "sliding_attention" : "full_attention");
        }) == "config.json: field \"layer_types\": \"sliding_attention\" is not supported (only \"full_attention\" layers)");
}

TEST_CASE("RoPE: both spellings, the default and the llama3 kind") {
  CHECK(error_after([](json& j) { j.erase("rope_theta"); }) == "no error");  // transformers' default, 10000
  {
    json j = read_json(data_dir / "configs" / "qwen2-0.5b.json");
    j.erase("rope_theta");
    CHECK(parse_hf_config(fused::json_text::dump(j)).arch.rope_theta == 10000.0);
  }
  CHECK(error_after([](json& j) { j["rope_scaling"] = {{"type", "yarn"}, {"factor", 4.0}}; }) ==
        "config.json: field \"rope_scaling.type\": \"yarn\" is not supported (only \"default\" and \"llama3\" RoPE)");
  // RoPE over part of each head rotates other dims: refused, not run as full RoPE (1 is full RoPE).
  CHECK(error_after([](json& j) { j["partial_rotary_factor"] = 0.5; }) ==
        "config.json: field \"partial_rotary_factor\": 0.5 is not supported (RoPE over the whole head_dim only)");
  CHECK(error_after([](json& j) {
          j.erase("rope_theta");
          j["rope_parameters"] = {{"rope_theta", 1e6}, {"rope_type", "default"}, {"partial_rotary_factor", 0.25}};
        }) == "config.json: field \"rope_parameters.partial_rotary_factor\": 0.25 is not supported (RoPE over the whole head_dim only)");
  CHECK(error_after([](json& j) { j["partial_rotary_factor"] = 1.0; }) == "no error");
  CHECK(error_after([](json& j) { j["rope_theta"] = 1e-308; }) == "config.json: field \"rope_theta\": 1e-308 must be at least 1 (RoPE's base)");
  CHECK(error_after([](json& j) {
          j.erase("rope_theta");
          j["rope_parameters"] = {{"rope_theta", 1e6}, {"rope_type", "linear"}, {"factor", 2.0}};
        }) == "config.json: field \"rope_parameters.rope_type\": \"linear\" is not supported (only \"default\" "
              "and \"llama3\" RoPE)");
  CHECK(error_after([](json& j) { j["rope_parameters"] = {{"rope_theta", 1e4}}; }) ==
        "config.json: field \"rope_theta\": 1000000 disagrees with rope_parameters.rope_theta 10000");
  CHECK(error_after([](json& j) { j["rope_parameters"] = "default"; }) ==
        "config.json: field \"rope_parameters\": must be an object, got \"default\"");
  CHECK(error_after([](json& j) { j["rope_theta"] = -1; }) == "config.json: field \"rope_theta\": -1 must be positive");
  json kjv = read_json(source_dir / "examples" / "models" / "kjv-qwen2-4m" / "config.json");
  kjv["rope_parameters"].erase("rope_theta");
  CHECK(error_of_text(fused::json_text::dump(kjv)) == "no error");  // rope_theta: transformers' default
}

TEST_CASE("text that is not a config object") {
  CHECK(error_of_text("").starts_with("config.json: not valid JSON: "));
  CHECK(error_of_text("{\"vocab_size\": 1,}").starts_with("config.json: not valid JSON: "));
  CHECK(error_of_text("[1, 2]") == "config.json: not a JSON object");
  CHECK(error_of_text(R"({"hidden_size": 896, "hidden_size": 512})") ==
        "config.json: field \"hidden_size\" appears twice");
  CHECK(error_of_text(std::string(40, '[') + std::string(40, ']')) == "config.json: JSON nests deeper than 32 levels");
  CHECK_THROWS_WITH_AS(fused::decoder::load_hf_config(data_dir / "no_such_config.json"),
                       ((data_dir / "no_such_config.json").string() + ": cannot open: No such file or directory").c_str(),
                       load_error);
  CHECK_THROWS_WITH_AS(fused::decoder::load_hf_config("/dev/zero"), "/dev/zero: not a regular file", load_error);
}

TEST_CASE("generation_config.json overrides the token ids, as transformers' generate() does") {
  const hf_model_info kjv = fused::decoder::load_hf_model_info(source_dir / "examples" / "models" / "kjv-qwen2-4m");
  CHECK(kjv.eos_token_ids == std::vector<int>{4093});
  CHECK(kjv.bos_token_id == 4093);
  // tiny_a's generation_config.json sets neither: config.json's nulls stand.
  const hf_model_info a = fused::decoder::load_hf_model_info(data_dir / "reference" / "tiny_a");
  CHECK(a.eos_token_ids.empty());
  CHECK(!a.bos_token_id);

  // An instruct checkpoint: config.json says 151645, generation_config.json lists both ends.
  hf_model_info info = fused::decoder::load_hf_config(data_dir / "configs" / "qwen2.5-0.5b.json");
  fused::decoder::apply_generation_config(R"({"eos_token_id": [151645, 151643], "temperature": 0.7})",
                                     "generation_config.json", info);
  CHECK(info.eos_token_ids == std::vector<int>{151645, 151643});
  CHECK(info.bos_token_id == 151643);
  CHECK_THROWS_WITH_AS(fused::decoder::apply_generation_config(R"({"eos_token_id": 200000})", "generation_config.json", info),
                       "generation_config.json: field \"eos_token_id\": 200000 is not below vocab_size 151936",
                       load_error);
  CHECK_THROWS_WITH_AS(fused::decoder::apply_generation_config(R"({"bos_token_id": []})", "generation_config.json", info),
                       "generation_config.json: field \"bos_token_id\": must be one id, got 0", load_error);
}

TEST_CASE("config_differences lists every differing field, by its reflected name") {
  const fused::decoder::config small = fused::decoder::load_hf_config(data_dir / "configs" / "qwen2-0.5b.json").arch;
  const fused::decoder::config mid = fused::decoder::load_hf_config(data_dir / "configs" / "qwen2-1.5b.json").arch;
  CHECK(fused::decoder::config_differences(small, small).empty());
  CHECK(fused::decoder::config_differences(small, mid) ==
        std::vector<std::string>{"hidden_size: expected 896, got 1536", "intermediate_size: expected 4864, got 8960",
                                 "num_hidden_layers: expected 24, got 28", "num_attention_heads: expected 14, got 12",
                                 "head_dim: expected 64, got 128"});

  // Every field is covered, doubles and bools included.
  fused::decoder::config other = small;
  other.vocab_size += 1;
  other.num_key_value_heads = 7;
  other.max_position_embeddings = 1;
  other.rms_norm_eps = 1e-5;
  other.rope_theta = 10000.5;
  other.tie_word_embeddings = false;
  CHECK(fused::decoder::config_differences(small, other) ==
        std::vector<std::string>{"vocab_size: expected 151936, got 151937", "num_key_value_heads: expected 2, got 7",
                                 "max_position_embeddings: expected 131072, got 1",
                                 "rms_norm_eps: expected 1e-06, got 1e-05",
                                 "rope_theta: expected 1000000, got 10000.5",
                                 "tie_word_embeddings: expected true, got false"});

  CHECK_NOTHROW(fused::decoder::check_matches(qwen2_0_5b, small, "qwen2-0.5b.json"));
  CHECK_THROWS_WITH_AS(fused::decoder::check_matches(qwen2_0_5b, mid, "qwen2-1.5b.json"),
                       "qwen2-1.5b.json: does not match the config this program was compiled for (5 fields differ): "
                       "hidden_size: expected 896, got 1536; intermediate_size: expected 4864, got 8960; "
                       "num_hidden_layers: expected 24, got 28; num_attention_heads: expected 14, got 12; "
                       "head_dim: expected 64, got 128",
                       load_error);
}

TEST_CASE("hostile sizes: each refused naming the field, before any arithmetic can overflow") {
  // Beyond int: refused as out of range by the reader.
  CHECK(error_after([](json& j) { j["hidden_size"] = std::int64_t{1} << 40; }) ==
        "config.json: field \"hidden_size\": 1099511627776 is out of range");
  CHECK(error_after([](json& j) { j["vocab_size"] = std::int64_t{1} << 62; }) ==
        "config.json: field \"vocab_size\": 4611686018427387904 is out of range");
  // Each int fits, but the planner's tables or a byte count would not (qwen2_limits.hpp).
  CHECK(error_after([](json& j) { j["num_hidden_layers"] = 1000000000; }) ==
        "config.json: field \"num_hidden_layers\": 1000000000 is more than the 1024 layers this library plans");
  CHECK(error_after([](json& j) { j["vocab_size"] = 2147483647, j["hidden_size"] = 1 << 20, j["head_dim"] = 64; })
            .find("config.json: field \"vocab_size\": 2147483647 times hidden_size 1048576 makes the embedding table more than") == 0);
  CHECK(error_after([](json& j) { j["head_dim"] = 128, j["num_attention_heads"] = 1 << 23, j["hidden_size"] = 1 << 21; })
            .find("config.json: field \"num_attention_heads\": 8388608 heads of head_dim 128") == 0);
  // A head wider than the attention kernels' stack rows (Gemma's 256): refused here, not by a kernel.
  CHECK(error_after([](json& j) { j["head_dim"] = 256; }) == "config.json: field \"head_dim\": 256 is more than the 128 the attention kernels take");
  CHECK(error_after([](json& j) { j["intermediate_size"] = 2147483647, j["hidden_size"] = 1 << 20, j["head_dim"] = 64; })
            .find("config.json: field \"intermediate_size\": 2147483647 times hidden_size 1048576 makes the MLP weights") == 0);
  CHECK(error_after([](json& j) {
          j["num_hidden_layers"] = 1024, j["hidden_size"] = 1 << 16, j["head_dim"] = 64, j["intermediate_size"] = 1 << 22;
        }).find("config.json: field \"num_hidden_layers\": 1024 layers of ") == 0);
  // The KV cache overflows only at the longest context the config allows.
  CHECK(error_after([](json& j) { j["num_hidden_layers"] = 200, j["num_key_value_heads"] = 14; }) == "no error");
  CHECK(error_after([](json& j) { j["max_position_embeddings"] = 2147483647, j["num_hidden_layers"] = 200, j["num_key_value_heads"] = 14; })
            .find("config.json: field \"max_position_embeddings\": 2147483647 positions of 200 layers") == 0);
  // At the limits, still accepted: real models are far inside them.
  CHECK(error_after([](json& j) { j["num_hidden_layers"] = 1024; }) == "no error");
  CHECK(fused::decoder::load_hf_config(data_dir / "configs" / "qwen2-7b.json").arch.num_hidden_layers == 28);
}
