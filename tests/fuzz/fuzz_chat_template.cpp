// Fuzzes chat templates: recognise() on arbitrary template text, then encode() of arbitrary
// messages with the demo model's (ChatML) tokenizer. Invariants checked:
//   - a refused conversation is std::invalid_argument, never a crash;
//   - the control tokens in the ids are exactly the template's: <|im_start|> once per turn (the
//     default system message's, each message's, the generation prompt's), <|im_end|> once per
//     message turn, so no message text becomes a control token whatever it spells;
//   - decoding the ids gives back every message's text as the tokenizer round-trips it (the template
//     adds, it never alters what was said), but where Qwen3's template drops earlier reasoning.
// Input: the template text up to the first '\n', then messages separated by '\x01', the first
// byte of each choosing its role (system, user, assistant, or a role the formats refuse).
#include <cstdint>
#include <cstdlib>
#include <string>
#include <string_view>
#include <vector>

#include <fused/io/chat_template.hpp>

#include "demo_tokenizer.hpp"

namespace fuzz::chat_template {

int one_input(const std::uint8_t* data, std::size_t size) {
  const std::string_view in(reinterpret_cast<const char*>(data), size);
  const std::size_t nl = in.find('\n');
  const std::string_view jinja = in.substr(0, nl);
  std::optional<fused::io::chat_template> t = fused::io::chat_template::recognise(jinja);
  if (!t || t->format != fused::io::chat_format::chatml) t = fused::io::chat_template::named("chatml");
  std::vector<fused::io::chat_message> messages;
  if (nl != std::string_view::npos) {
    std::string_view rest = in.substr(nl + 1);
    static constexpr const char* roles[] = {"system", "user", "assistant", "tool"};
    while (!rest.empty()) {
      const std::size_t end = rest.find('\x01');
      const std::string_view m = rest.substr(0, end);
      if (!m.empty()) messages.push_back({roles[static_cast<unsigned char>(m[0]) % 4], std::string(m.substr(1))});
      rest = end == std::string_view::npos ? std::string_view{} : rest.substr(end + 1);
    }
  }
  const bool generation = size % 2 == 0;
  std::vector<std::int32_t> ids;
  try {
    ids = t->encode(demo_tokenizer(), messages, generation);
  } catch (const std::invalid_argument&) {
    for (const auto& m : messages)
      if (m.role == "tool") return 0;
    require(false, "a conversation of system, user and assistant messages was refused");
  }
  const std::int32_t im_start = demo_tokenizer().token_id("<|im_start|>"), im_end = demo_tokenizer().token_id("<|im_end|>");
  const bool default_system = (messages.empty() || messages.front().role != "system") && !t->default_system.empty();
  const std::size_t turns = messages.size() + (default_system ? 1 : 0);
  std::size_t starts = 0, ends = 0;
  for (const std::int32_t id : ids) {
    starts += id == im_start;
    ends += id == im_end;
  }
  const bool opens = t->generation_prompt == fused::io::generation_rule::always || (generation && t->generation_prompt == fused::io::generation_rule::when_asked);
  require(starts == turns + (opens ? 1 : 0), "<|im_start|> count differs from the turns");
  require(ends == turns, "<|im_end|> count differs from the turns");
  if (!t->strip_reasoning) {
    const std::string text = demo_tokenizer().decode(ids);
    // Each message as the tokenizer gives text back (NFC, U+FFFD for ill-formed UTF-8).
    for (const auto& m : messages)
      require(text.find(demo_tokenizer().decode(demo_tokenizer().encode(m.content, false))) != std::string::npos, "a message's text is missing");
  }
  return 0;
}

}  // namespace fuzz::chat_template
