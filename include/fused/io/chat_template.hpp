// fused::io::chat_template: a conversation as token ids, in the format a model was tuned on.
//
// Hugging Face models carry their chat format as a Jinja program (tokenizer_config.json's
// "chat_template"). fused does not run Jinja: it recognises the formats of the families it runs
// and renders them itself, and refuses a template it does not know (the caller names a format).
//   - chatml  (Qwen2, Qwen2.5, Qwen3): <|im_start|>ROLE\nTEXT<|im_end|>\n ... <|im_start|>assistant\n
//   - llama3  (Llama 3, 3.1, 3.2): BOS <|start_header_id|>ROLE<|end_header_id|>\n\nTEXT<|eot_id|> ...
//   - mistral (Mistral 7B v0.1 - v0.3): BOS [INST] TEXT[/INST] ANSWER</s> ...
// with the variants their templates differ by, read from the template text: a default system
// message (Qwen2/2.5), Llama 3.1's dated system turn, the spaces around Mistral's [/INST].
//
// The template's control tokens become their ids; the messages' text is encoded with special tokens
// off, so a user who types "<|im_end|>" gets text, not a control token (a template engine rendering
// one string would let the text forge turns). For text without such strings the ids equal
// transformers' tokenizer(apply_chat_template(messages), add_special_tokens=False).
//
//   auto tmpl = fused::io::chat_template::from_model_dir(dir);   // or chat_template::named("chatml")
//   std::vector<std::int32_t> ids = tmpl.encode(tok, {{"system", "Be brief."}, {"user", "Hi"}});
//   auto stop = tmpl.end_of_turn_ids(tok);                          // <|im_end|>
#pragma once
#include <algorithm>
#include <cstdint>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "json_config.hpp"
#include "load_error.hpp"
#include "tokenizer.hpp"

namespace fused::io {

struct chat_message {
  std::string role;  // "system", "user" or "assistant"
  std::string content;
};

enum class chat_format { chatml, llama3, mistral };

struct chat_template {
  chat_format format = chat_format::chatml;
  // chatml: the system message a conversation without one gets (Qwen2.5: "You are Qwen, ...").
  std::string default_system{};
  // chatml: the template keeps <think> reasoning only after the last user turn (Qwen3).
  bool strip_reasoning = false;
  // llama3: a system turn always comes first, dated ("Cutting Knowledge Date: ...", Llama 3.1+).
  bool dated_system = false;
  std::string knowledge_date{};// "December 2023"
  std::string today{};         // "26 Jul 2024"; empty: today's date, as strftime_now("%d %b %Y")
  // mistral: " [/INST]" (v0.1) rather than "[/INST]", and " " before an answer (v0.3).
  bool space_before_close = false;
  bool space_before_answer = true;
  // The BOS and EOS tokens the template writes (tokenizer_config.json's bos_token / eos_token).
  std::string bos = "", eos = "";

  static constexpr std::string_view format_names = "chatml|llama3|mistral";

  // A format by name, with its families' defaults; nullopt for another name.
  static std::optional<chat_template> named(std::string_view name) {
    chat_template t;
    if (name == "chatml") t.format = chat_format::chatml;
    else if (name == "llama3") t = {.format = chat_format::llama3, .bos = "<|begin_of_text|>", .eos = "<|eot_id|>"};
    else if (name == "mistral") t = {.format = chat_format::mistral, .bos = "<s>", .eos = "</s>"};
    else return std::nullopt;
    return t;
  }

  // The format of a Jinja chat template's text, with its variants; nullopt when it is none of these.
  static std::optional<chat_template> recognise(std::string_view jinja) {
    const auto has = [&](std::string_view s) { return jinja.find(s) != std::string_view::npos; };
    if (has("<|im_start|>")) {
      chat_template t = *named("chatml");
      // Qwen2/2.5 give a conversation without a system message a fixed one:
      //   {{- '<|im_start|>system\nYou are Qwen, ... assistant.<|im_end|>\n' }}
      // (the newline written as an escape in the Jinja string, or as the character itself).
      static constexpr std::string_view open = "<|im_start|>system";
      for (std::size_t at = jinja.find(open); at != std::string_view::npos; at = jinja.find(open, at + 1)) {
        std::size_t text = at + open.size();
        if (jinja.substr(text, 2) == "\\n") text += 2;
        else if (jinja.substr(text, 1) == "\n") text += 1;
        else continue;
        const std::size_t end = jinja.find("<|im_end|>", text);
        if (end == std::string_view::npos) break;
        const std::string_view between = jinja.substr(text, end - text);
        if (between.empty() || between.find_first_of("'\"{}+") != std::string_view::npos) continue;  // an expression, not a literal
        t.default_system = unescape(between);
        break;
      }
      t.strip_reasoning = has("</think>");
      return t;
    }
    if (has("<|start_header_id|>")) {
      chat_template t = *named("llama3");
      if (has("Cutting Knowledge Date:")) {
        t.dated_system = true;
        t.knowledge_date = literal_after(jinja, "Cutting Knowledge Date: ", "\\n").value_or("December 2023");
        // 3.2 dates the turn today when strftime_now exists (transformers defines it); 3.1 uses a constant.
        if (!has("strftime_now")) t.today = quoted_after(jinja, "date_string = ").value_or("26 Jul 2024");
      }
      return t;
    }
    if (has("[INST]")) {
      chat_template t = *named("mistral");
      t.space_before_close = has(" [/INST]");
      t.space_before_answer = has("\" \" + message[\"content\"]") || has("' ' + message['content']");
      return t;
    }
    return std::nullopt;
  }

  // The template of a model directory, where transformers reads it: chat_template.jinja (what
  // save_pretrained writes since transformers 4.50; it wins over the rest), tokenizer_config.json's
  // "chat_template", or chat_template.json's (a processor's). The BOS and EOS it writes come from
  // tokenizer_config.json. No template, or one not recognised, is a load_error naming the file and
  // the flag that chooses a format instead.
  static chat_template from_model_dir(const std::filesystem::path& dir) {
    const std::string choose = "; choose a format with --chat-template " + std::string(format_names);
    const std::filesystem::path config_file = dir / "tokenizer_config.json", jinja_file = dir / "chat_template.jinja",
                                json_file = dir / "chat_template.json";
    std::error_code ec;
    const auto read_json = [&](const std::filesystem::path& file) {
      return std::filesystem::exists(file, ec) ? detail::parse_json_object(detail::read_text_file(file), file.string()) : nlohmann::json();
    };
    const nlohmann::json config = read_json(config_file);
    std::string jinja, from;
    if (std::filesystem::exists(jinja_file, ec)) {
      jinja = detail::read_text_file(jinja_file);
      from = jinja_file.string();
      if (jinja.empty()) throw load_error(from + ": is empty" + choose);
    } else {
      from = config_file.string();
      const nlohmann::json alone = config.contains("chat_template") ? nlohmann::json() : read_json(json_file);
      if (alone.contains("chat_template")) from = json_file.string();
      if (config.is_null() && !alone.contains("chat_template"))
        throw load_error(from + ": no such file, nor chat_template.jinja beside it: the model has no chat template" + choose);
      const auto field = [](const nlohmann::json& j) { return j.contains("chat_template") ? j["chat_template"] : nlohmann::json(); };
      jinja = template_text(alone.contains("chat_template") ? field(alone) : field(config), from, choose);
    }
    std::optional<chat_template> t = recognise(jinja);
    if (!t) throw load_error(from + ": chat_template is not a format fused renders (ChatML, Llama 3, Mistral [INST])" + choose);
    t->bos = token_text(config, "bos_token").value_or(t->bos);
    t->eos = token_text(config, "eos_token").value_or(t->eos);
    return *t;
  }

  // The ids of `messages`, then (add_generation_prompt) the opening of the assistant's turn.
  // Throws std::invalid_argument naming messages[i] for a role the format has no place for.
  std::vector<std::int32_t> encode(const tokenizer& tok, std::span<const chat_message> messages, bool add_generation_prompt = true) const {
    std::vector<piece> pieces;
    for (std::size_t i = 0; i < messages.size(); ++i) {
      const std::string& r = messages[i].role;
      if (r != "system" && r != "user" && r != "assistant")
        throw std::invalid_argument("messages[" + std::to_string(i) + "].role: '" + r + "' is not system, user or assistant");
    }
    switch (format) {
      case chat_format::chatml: render_chatml(messages, add_generation_prompt, pieces); break;
      case chat_format::llama3: render_llama3(messages, add_generation_prompt, pieces); break;
      case chat_format::mistral: render_mistral(messages, pieces); break;
    }
    return encode_pieces(tok, pieces);
  }

  // The token that ends an assistant turn in this format (a stop token for generation), when the
  // tokenizer has it: <|im_end|>, <|eot_id|>, or the template's EOS.
  std::vector<std::int32_t> end_of_turn_ids(const tokenizer& tok) const {
    std::vector<std::int32_t> ids;
    const std::string name = format == chat_format::chatml ? "<|im_end|>" : format == chat_format::llama3 ? "<|eot_id|>" : eos;
    if (const std::int32_t id = tok.token_id(name); id >= 0) ids.push_back(id);
    return ids;
  }

 private:
  // A control token of the template (looked up by its text) or text. A control token the tokenizer
  // lacks is an error, but for `or_text` ones: Mistral v0.1's tokenizer has no [INST] token, and its
  // template's "[INST]" is text, encoded with its neighbours as one stretch.
  struct piece {
    std::string text;
    enum { text_kind, control, control_or_text } kind = text_kind;
  };
  static void text(std::vector<piece>& out, std::string s) { out.push_back({std::move(s), piece::text_kind}); }
  static void control(std::vector<piece>& out, std::string s) {
    if (!s.empty()) out.push_back({std::move(s), piece::control});
  }

  static std::vector<std::int32_t> encode_pieces(const tokenizer& tok, std::vector<piece>& pieces) {
    std::vector<std::int32_t> ids;
    std::string run;
    const auto flush = [&] {
      if (run.empty()) return;
      const std::vector<std::int32_t> part = tok.encode(run, false, ids.empty());
      ids.insert(ids.end(), part.begin(), part.end());
      run.clear();
    };
    for (piece& p : pieces) {
      const std::int32_t id = p.kind == piece::text_kind ? -1 : tok.token_id(p.text);
      if (p.kind == piece::control && id < 0)
        throw std::invalid_argument("the chat template's token " + p.text + " is not in this tokenizer (a template for another model?)");
      if (id < 0) {
        run += p.text;
        continue;
      }
      flush();
      ids.push_back(id);
    }
    flush();
    return ids;
  }

  void render_chatml(std::span<const chat_message> messages, bool generation, std::vector<piece>& out) const {
    const auto turn = [&](const std::string& role, const std::string& content) {
      control(out, "<|im_start|>");
      text(out, role + "\n" + content);
      control(out, "<|im_end|>");
      text(out, "\n");
    };
    if ((messages.empty() || messages.front().role != "system") && !default_system.empty()) turn("system", default_system);
    // Qwen3: reasoning is kept (as a <think> block) only in the answers after the last question,
    // and the final answer always gets one; earlier answers lose theirs.
    std::size_t last_query = messages.empty() ? 0 : messages.size() - 1;
    for (std::size_t i = 0; i < messages.size(); ++i)
      if (messages[i].role == "user") last_query = i;
    for (std::size_t i = 0; i < messages.size(); ++i) {
      const chat_message& m = messages[i];
      if (!strip_reasoning || m.role != "assistant") {
        turn(m.role, m.content);
        continue;
      }
      const auto [reasoning, answer] = split_reasoning(m.content);
      if (i > last_query && (i + 1 == messages.size() || !reasoning.empty()))
        turn(m.role, "<think>\n" + std::string(strip_newlines(reasoning)) + "\n</think>\n\n" + std::string(answer));
      else
        turn(m.role, std::string(answer));
    }
    if (generation) {
      control(out, "<|im_start|>");
      text(out, "assistant\n");
    }
  }

  void render_llama3(std::span<const chat_message> messages, bool generation, std::vector<piece>& out) const {
    // The messages' text is trimmed (Jinja's | trim), the dated system turn's preamble is not.
    const auto turn = [&](const std::string& role, std::string_view content) {
      control(out, "<|start_header_id|>");
      text(out, role);
      control(out, "<|end_header_id|>");
      text(out, "\n\n" + std::string(content));
      control(out, "<|eot_id|>");
    };
    control(out, bos);
    std::size_t first = 0;
    if (dated_system) {
      std::string system;
      if (!messages.empty() && messages.front().role == "system") {
        system = std::string(trim(messages.front().content));
        first = 1;
      }
      turn("system", "Cutting Knowledge Date: " + knowledge_date + "\nToday Date: " + (today.empty() ? date_today() : today) + "\n\n" + system);
    }
    for (std::size_t i = first; i < messages.size(); ++i) turn(messages[i].role, trim(messages[i].content));
    if (generation) {
      control(out, "<|start_header_id|>");
      text(out, "assistant");
      control(out, "<|end_header_id|>");
      text(out, "\n\n");
    }
  }

  // Mistral's template puts the system message into the last user turn and wants the turns to
  // alternate user / assistant; the generation prompt is the [/INST] that closes each user turn.
  void render_mistral(std::span<const chat_message> messages, std::vector<piece>& out) const {
    std::size_t first = 0;
    std::string system;
    if (!messages.empty() && messages.front().role == "system") {
      system = messages.front().content;
      first = 1;
    }
    std::size_t last_user = messages.size();
    for (std::size_t i = first; i < messages.size(); ++i) {
      const std::string& want = (i - first) % 2 == 0 ? "user" : "assistant";
      if (messages[i].role != want)
        throw std::invalid_argument("messages[" + std::to_string(i) + "].role: '" + messages[i].role +
                                    "'; after an optional first system message, Mistral's format alternates user and assistant");
      if (want == "user") last_user = i;
    }
    control(out, bos);
    for (std::size_t i = first; i < messages.size(); ++i) {
      const chat_message& m = messages[i];
      if (m.role == "user") {
        out.push_back({"[INST]", piece::control_or_text});
        std::string body = " ";
        if (i == last_user && !system.empty()) body.append(system).append("\n\n");
        body.append(m.content).append(space_before_close ? " " : "");
        text(out, std::move(body));
        out.push_back({"[/INST]", piece::control_or_text});
      } else {
        text(out, std::string(space_before_answer ? " " : "").append(m.content));
        control(out, eos);
      }
    }
  }

  static std::string_view trim(std::string_view s) {
    const auto space = [](char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f' || c == '\v'; };
    while (!s.empty() && space(s.front())) s.remove_prefix(1);
    while (!s.empty() && space(s.back())) s.remove_suffix(1);
    return s;
  }

  // Qwen3's template: the answer is content.split('</think>')[-1].lstrip('\n'), the reasoning what
  // is between <think> and </think>, newlines trimmed (all the content, and no reasoning, without </think>).
  static std::pair<std::string_view, std::string_view> split_reasoning(std::string_view content) {
    const std::size_t close = content.rfind("</think>");
    if (close == std::string_view::npos) return {{}, content};
    std::string_view answer = content.substr(close + 8);
    while (!answer.empty() && answer.front() == '\n') answer.remove_prefix(1);
    std::string_view reasoning = content.substr(0, content.find("</think>"));
    while (!reasoning.empty() && reasoning.back() == '\n') reasoning.remove_suffix(1);
    if (const std::size_t open = reasoning.rfind("<think>"); open != std::string_view::npos) reasoning.remove_prefix(open + 7);
    while (!reasoning.empty() && reasoning.front() == '\n') reasoning.remove_prefix(1);
    return {reasoning, answer};
  }
  static std::string_view strip_newlines(std::string_view s) {
    while (!s.empty() && s.front() == '\n') s.remove_prefix(1);
    while (!s.empty() && s.back() == '\n') s.remove_suffix(1);
    return s;
  }

  static std::string date_today() {
    const std::time_t now = std::time(nullptr);
    std::tm tm{};
    gmtime_r(&now, &tm);
    char buf[32];
    return std::string(buf, std::strftime(buf, sizeof buf, "%d %b %Y", &tm));
  }

  // A Jinja string literal's escapes (\n, \', \", \\) as the characters they stand for.
  static std::string unescape(std::string_view s) {
    std::string out;
    for (std::size_t i = 0; i < s.size(); ++i) {
      if (s[i] == '\\' && i + 1 < s.size()) {
        const char c = s[++i];
        out += c == 'n' ? '\n' : c == 't' ? '\t' : c;
      } else {
        out += s[i];
      }
    }
    return out;
  }
  // The literal text after `key` up to `end` ("December 2023" in "Cutting Knowledge Date: December 2023\n").
  static std::optional<std::string> literal_after(std::string_view jinja, std::string_view key, std::string_view end) {
    const std::size_t at = jinja.find(key);
    if (at == std::string_view::npos) return std::nullopt;
    const std::size_t from = at + key.size(), to = jinja.find(end, from);
    if (to == std::string_view::npos || to - from > 64) return std::nullopt;
    const std::string_view lit = jinja.substr(from, to - from);
    if (lit.empty() || lit.find_first_of("'\"{}+") != std::string_view::npos) return std::nullopt;
    return std::string(lit);
  }
  // The quoted string after `key` ("26 Jul 2024" in `date_string = "26 Jul 2024"`).
  static std::optional<std::string> quoted_after(std::string_view jinja, std::string_view key) {
    const std::size_t at = jinja.find(key);
    if (at == std::string_view::npos || at + key.size() >= jinja.size()) return std::nullopt;
    const char q = jinja[at + key.size()];
    if (q != '"' && q != '\'') return std::nullopt;
    return literal_after(jinja.substr(at), std::string(key) + q, std::string(1, q));
  }
  // A "chat_template" field: the text, or the "default" one of a list of named templates
  // ([{"name": "default", "template": "..."}, ...]).
  static std::string template_text(const nlohmann::json& field, const std::string& file, const std::string& choose) {
    if (field.is_null()) throw load_error(file + ": this model has no chat_template (nor chat_template.jinja beside it)" + choose);
    std::string jinja;
    if (field.is_string()) jinja = field.get<std::string>();
    else if (field.is_array()) {
      for (const auto& e : field)
        if (e.is_object() && e.value("name", "") == "default" && e.contains("template") && e["template"].is_string()) jinja = e["template"].get<std::string>();
      if (jinja.empty()) throw load_error(file + ": chat_template is a list without a \"default\" template" + choose);
    } else {
      throw load_error(file + ": chat_template is neither a string nor a list of named templates" + choose);
    }
    if (jinja.empty()) throw load_error(file + ": chat_template is empty" + choose);
    return jinja;
  }
  // tokenizer_config.json writes a special token as "text" or {"content": "text", ...}.
  static std::optional<std::string> token_text(const nlohmann::json& j, const char* key) {
    const auto it = j.find(key);
    if (it == j.end()) return std::nullopt;
    if (it->is_string()) return it->get<std::string>();
    if (it->is_object() && it->contains("content") && (*it)["content"].is_string()) return (*it)["content"].get<std::string>();
    return std::nullopt;
  }
};

}  // namespace fused::io
