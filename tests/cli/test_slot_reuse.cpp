// The tools' slot (fused run, chat, serve): a prompt run over a reused KV cache gives the logits an
// empty cache gives, bit for bit. A linear layer computes a decoded token's row, or a short call's,
// with other arithmetic than a long prefill's (fk_gemm_bf16_rows): reusing such rows as they are
// made a server's greedy answer depend on what the session had run before.
#include <doctest/doctest.h>

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "generation.hpp"

namespace {

struct conversation {
  const fused::cli::loaded_model& l;
  fused::runtime::aligned_bytes state{static_cast<std::size_t>(l.model->state_bytes())};
  fused::cli::slot s{l.model->open_session({state.data(), state.size()})};
};

std::int32_t argmax(std::span<const float> logits) {
  return static_cast<std::int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
}

// The logits of `ids` run into an empty cache.
std::vector<float> fresh(const fused::cli::loaded_model& l, const std::vector<std::int32_t>& ids) {
  conversation c{l};
  const auto logits = c.s.feed(*l.model, ids);
  return {logits.begin(), logits.end()};
}

}  // namespace

TEST_CASE("a prompt over a reused KV cache gives a fresh cache's logits, bit for bit") {
  const fused::cli::loaded_model l = fused::cli::load_model(FUSED_DEFAULT_MODEL_SOURCE_DIR, 0);
  std::vector<std::int32_t> ids = l.tok.encode("In the beginning God created the heaven and the earth.", false);
  conversation c{l};
  std::span<const float> logits = c.s.feed(*l.model, ids);
  for (int i = 0; i < 12; ++i) {  // a greedy reply, decoded a token at a time
    ids.push_back(argmax(logits));
    logits = c.s.decode(*l.model, ids.back());
  }
  SUBCASE("the reply and a new message, as a chat's next turn runs them") {
    const std::vector<std::int32_t> more = l.tok.encode(" And the earth was without form, and void.", false);
    ids.insert(ids.end(), more.begin(), more.end());
  }
  SUBCASE("one more token, as a completion's retry runs it") { ids.push_back(argmax(logits)); }
  std::size_t reused = 0;
  const auto reused_logits = c.s.feed(*l.model, ids, &reused);
  const std::vector<float> again(reused_logits.begin(), reused_logits.end());  // the arena is shared: copied before the next run
  const std::vector<float> want = fresh(l, ids);
  REQUIRE(again.size() == want.size());
  CHECK(std::equal(again.begin(), again.end(), want.begin()));
  MESSAGE(ids.size() << " tokens, " << reused << " reused, the " << std::string(fk_isa_name(fk_isa_active())) << " path");
  CHECK(reused > 0);  // the prompt's prefill rows are a fresh prefill's
}
