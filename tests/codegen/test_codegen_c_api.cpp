// The generated C's API, built in its debug layout (FUSED_DEBUG_CANARIES): an overrun planted after a
// step is reported naming the step and the buffer; capacity, vocabulary and weights mistakes are
// refused with a sentence, before anything is written.
#include <doctest/doctest.h>

#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include <fused/core/text_string.hpp>
#include <fused/qwen2.hpp>

#include "../reference_presets.hpp"
#include "tiny_a.h"

namespace {

using fused_test::tiny_a;
constexpr fused::decoder::graph_options all_rows{.logits = fused::decoder::logits_rows::all};
using plans = fused::decoder::static_plans<tiny_a, TINY_A_MAX_SEQ, TINY_A_MAX_CTX, all_rows>;
static_assert(TINY_A_VOCAB_SIZE == 1000 && TINY_A_LOGITS_ALL_ROWS == 1);
static_assert(TINY_A_WEIGHTS_BYTES == plans::prefill.weights_bytes(), "the generated weights region is the plan's");

const std::string weights_file = std::string(FUSED_TEST_DATA) + "/reference/tiny_a/model.safetensors";

// The overrun: one byte past the end of the output of the step at (mode, pos).
int g_mode = -1, g_pos = -1;
extern "C" void plant_overrun(int mode, int pos, void* out, size_t bytes) {
  if (mode == g_mode && pos == g_pos) static_cast<unsigned char*>(out)[bytes] ^= 0x5A;
}

struct model {
  tiny_a_model m{};
  model() {
    const char* files[] = {weights_file.c_str()};
    REQUIRE_MESSAGE(tiny_a_init_safetensors(&m, files, 1, nullptr, nullptr) == 0, m.error);
  }
  ~model() {
    tiny_a_free(&m);
    tiny_a_debug_after_step = nullptr;
  }
};

// Schedule position of the step whose result has this name.
template <class Plan>
int position_of(const Plan& p, const std::string& result) {
  for (std::size_t i = 0; i < p.steps.size(); ++i)
    if (fused::to_string(p.tensors[static_cast<std::size_t>(p.steps[i].result)].name) == result) return static_cast<int>(i);
  FAIL("no step writes " << result);
  return -1;
}

}  // namespace

TEST_CASE("a clean run passes every canary check") {
  model m;
  std::vector<std::int32_t> ids(40);
  for (std::size_t i = 0; i < ids.size(); ++i) ids[i] = static_cast<std::int32_t>(i * 37 % 1000);
  REQUIRE(tiny_a_prefill(&m.m, ids.data(), ids.size()) != nullptr);
  CHECK(m.m.logits_rows == 40 - 2 * TINY_A_MAX_SEQ);
  for (int k = 0; k < 5; ++k) REQUIRE_MESSAGE(tiny_a_decode(&m.m, k) != nullptr, m.m.error);
  CHECK(m.m.pos == 45);
}

TEST_CASE("an overrun in prefill names the step and the buffer") {
  for (const char* result : {"layers.0.q", "layers.1.up", "logits"}) {
    model m;
    g_mode = 0;
    g_pos = position_of(plans::prefill, result);
    tiny_a_debug_after_step = plant_overrun;
    const std::int32_t ids[3] = {1, 2, 3};
    CHECK(tiny_a_prefill(&m.m, ids, 3) == nullptr);
    const std::string report = m.m.error;
    const int id = plans::prefill.steps[static_cast<std::size_t>(g_pos)].id;
    CHECK_MESSAGE(report.find("prefill step " + std::to_string(id) + " '" + result + "'") != std::string::npos, report);
    CHECK_MESSAGE(report.find("buffer '" + std::string(result) + "'") != std::string::npos, report);
    CHECK(m.m.pos == 0);
  }
}

TEST_CASE("an overrun of a KV-cache write in decode names the state buffer") {
  model m;
  const std::int32_t ids[2] = {5, 6};
  REQUIRE(tiny_a_prefill(&m.m, ids, 2) != nullptr);
  g_mode = 1;
  g_pos = position_of(plans::decode, "cache.layers.1.value.next");
  tiny_a_debug_after_step = plant_overrun;
  CHECK(tiny_a_decode(&m.m, 7) == nullptr);
  const std::string report = m.m.error;
  const int id = plans::decode.steps[static_cast<std::size_t>(g_pos)].id;
  CHECK_MESSAGE(report.find("decode step " + std::to_string(id) + " 'cache.layers.1.value.next' (kv_write, fk_kv_store)") != std::string::npos, report);
  CHECK_MESSAGE(report.find("buffer 'cache.layers.1.value' (state +") != std::string::npos, report);
}

TEST_CASE("capacity and vocabulary are checked before anything runs") {
  model m;
  std::vector<std::int32_t> ids(TINY_A_MAX_CTX + 1, 3);
  CHECK(tiny_a_prefill(&m.m, ids.data(), ids.size()) == nullptr);
  CHECK(std::string(m.m.error) == "the KV cache holds 128 positions; 0 are used and this call needs 129 more");
  const std::int32_t bad[2] = {1, 1000};
  CHECK(tiny_a_prefill(&m.m, bad, 2) == nullptr);
  CHECK(std::string(m.m.error) == "token id 1000 (at index 1) is outside the vocabulary [0, 1000)");
  CHECK(tiny_a_decode(&m.m, -1) == nullptr);
  CHECK(tiny_a_prefill(&m.m, bad, 0) == nullptr);
  CHECK(m.m.pos == 0);
  REQUIRE(tiny_a_prefill(&m.m, ids.data(), 127) != nullptr);
  REQUIRE(tiny_a_decode(&m.m, 1) != nullptr);
  CHECK(tiny_a_decode(&m.m, 1) == nullptr);
  CHECK(std::string(m.m.error) == "the KV cache holds 128 positions; 128 are used and this call needs 1 more");
  tiny_a_reset(&m.m);
  CHECK(tiny_a_decode(&m.m, 1) != nullptr);
}

TEST_CASE("weights: wrong files and blobs are refused with a reason") {
  tiny_a_model m{};
  const std::string other = std::string(FUSED_TEST_DATA) + "/reference/tiny_mha/model.safetensors";
  const char* files[] = {other.c_str()};
  CHECK(tiny_a_init_safetensors(&m, files, 1, nullptr, nullptr) == -1);
  CHECK_MESSAGE(std::string(m.error).find("\"model.embed_tokens.weight\" has shape [512, 64], the model needs [1000, 128]") != std::string::npos, m.error);
  const char* none[] = {"/nonexistent.safetensors"};
  CHECK(tiny_a_init_safetensors(&m, none, 1, nullptr, nullptr) == -1);
  CHECK(std::string(m.error) == "/nonexistent.safetensors: cannot open");

  // A blob laid out as the weights region: the same bits as the file, through the C++ store's layout.
  const auto w = fused::runtime::weight_store::synthetic(plans::prefill.tensors, plans::prefill.buffers, TINY_A_WEIGHTS_BYTES, 7);
  CHECK(tiny_a_init_blob(&m, w.blob().data(), w.blob().size(), TINY_A_WEIGHTS_FINGERPRINT ^ 1, nullptr, nullptr) == -1);
  CHECK(std::string(m.error).find("packed for the layout") != std::string::npos);
  CHECK(tiny_a_init_blob(&m, w.blob().data(), w.blob().size() - 64, TINY_A_WEIGHTS_FINGERPRINT, nullptr, nullptr) == -1);
  REQUIRE(tiny_a_init_blob(&m, w.blob().data(), w.blob().size(), TINY_A_WEIGHTS_FINGERPRINT, nullptr, nullptr) == 0);
  const std::int32_t ids[4] = {9, 8, 7, 6};
  const float* c = tiny_a_prefill(&m, ids, 4);
  REQUIRE(c != nullptr);
  fused::qwen2::static_model<tiny_a, TINY_A_MAX_SEQ, TINY_A_MAX_CTX, all_rows> cpp(w);
  const auto l = cpp.prefill(ids);
  CHECK(std::memcmp(l.data(), c, l.size_bytes()) == 0);
  tiny_a_free(&m);
}
