// fused::io::chat_template: a conversation as token ids, in the format a model was tuned on.
//
// Hugging Face models carry their chat format as a Jinja program (tokenizer_config.json's
// "chat_template"). fused does not run Jinja: it recognises the formats of the families it runs
// and renders them itself, and refuses a template it does not know (the caller names a format).
//   - chatml  (Qwen2, Qwen2.5, Qwen3, QwQ, SmolLM2): <|im_start|>ROLE\nTEXT<|im_end|>\n ... <|im_start|>assistant\n
//   - llama2  (Llama 2 chat): BOS [INST] <<SYS>>\nSYSTEM\n<</SYS>>\n\nTEXT [/INST] ANSWER </s> ...
//   - llama3  (Llama 3, 3.1, 3.2): BOS <|start_header_id|>ROLE<|end_header_id|>\n\nTEXT<|eot_id|> ...
//   - mistral (Mistral 7B v0.1 - v0.3): BOS [INST] TEXT[/INST] ANSWER</s> ...
// with the variants their templates differ by, read from the template's string literals: a default
// system message (Qwen2/2.5, SmolLM2), what follows the generation prompt (QwQ's <think>), a leading
// BOS, Llama 3.1's dated system turn, the spaces around Mistral's [/INST] and its trimmed answers.
// A template that is not well-formed Jinja (an unclosed tag or block, a filter Jinja does not have)
// is refused, naming what is wrong; comments ({# ... #}) are not read.
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
#include <cctype>
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

enum class chat_format { chatml, llama2, llama3, mistral };
// When a ChatML template opens the assistant's turn after the messages: when add_generation_prompt
// asks, always (a template that never reads the flag but writes the header), or never.
enum class generation_rule : std::uint8_t { when_asked, always, never };

struct chat_template {
  chat_format format = chat_format::chatml;
  // chatml: the system message a conversation without one gets (Qwen2.5: "You are Qwen, ...").
  std::string default_system{};
  // chatml: the template keeps <think> reasoning only after the last user turn (Qwen3).
  bool strip_reasoning = false;
  // chatml: the template writes bos_token first (Hermes 3); what its generation prompt writes after
  // "<|im_start|>assistant\n" (QwQ: "<think>\n"); when it writes one.
  bool bos_first = false;
  std::string generation_prefix{};
  generation_rule generation_prompt = generation_rule::when_asked;
  // llama3: a system turn always comes first, dated ("Cutting Knowledge Date: ...", Llama 3.1+).
  bool dated_system = false;
  std::string knowledge_date{};// "December 2023"
  std::string today{};         // "26 Jul 2024"; empty: today's date, as strftime_now("%d %b %Y")
  // mistral: " [/INST]" (v0.1) rather than "[/INST]", " " before an answer (v0.3), answers | trim (v0.3).
  bool space_before_close = false;
  bool space_before_answer = true;
  bool trim_answers = false;
  // The BOS and EOS tokens the template writes (tokenizer_config.json's bos_token / eos_token).
  std::string bos = "", eos = "";

  static constexpr std::string_view format_names = "chatml|llama2|llama3|mistral";

  // A format by name, with its families' defaults; nullopt for another name.
  static std::optional<chat_template> named(std::string_view name) {
    chat_template t;
    if (name == "chatml") t.format = chat_format::chatml;
    else if (name == "llama2") t = {.format = chat_format::llama2, .bos = "<s>", .eos = "</s>"};
    else if (name == "llama3") t = {.format = chat_format::llama3, .bos = "<|begin_of_text|>", .eos = "<|eot_id|>"};
    else if (name == "mistral") t = {.format = chat_format::mistral, .bos = "<s>", .eos = "</s>"};
    else return std::nullopt;
    return t;
  }

  // One piece of a template: text outside the tags (a {% raw %} block's included), or a tag, {{ }}
  // or {% %}; comments are dropped.
  enum class jinja_kind { text, expression, statement };
  struct jinja_piece {
    jinja_kind kind = jinja_kind::text;
    std::size_t at = 0;                     // its first byte in the template
    std::string_view written;               // as written: the text, or the tag with its delimiters
    std::string code;                       // a tag's text inside its delimiters, each string literal as its two quotes
    std::vector<std::string_view> strings;  // a tag's string literals as written between their quotes (escapes unread)
  };

  // The format of a Jinja chat template's text, with its variants; nullopt when it is none of these
  // or not well-formed Jinja (syntax_problem says why).
  static std::optional<chat_template> recognise(std::string_view template_text) {
    std::vector<jinja_piece> pieces;
    if (split_jinja(template_text, pieces) || block_problem(pieces)) return std::nullopt;
    const jinja_text j = read_jinja(pieces);
    const auto has = [&](std::string_view s) { return j.code.find(s) != std::string::npos; };
    const auto literal_has = [&](std::string_view s) {
      return std::any_of(j.literals.begin(), j.literals.end(), [&](const std::string& l) { return l.find(s) != std::string::npos; });
    };
    if (literal_has("<|im_start|>")) {
      chat_template t = *named("chatml");
      // A fixed system message for a conversation without one (Qwen2/2.5, SmolLM2): one literal
      //   '<|im_start|>system\nYou are Qwen, ... assistant.<|im_end|>\n'
      // (a literal that goes on with an expression, '<|im_start|>system\n' + ..., is not one).
      static constexpr std::string_view open = "<|im_start|>system\n", close = "<|im_end|>";
      for (const std::string& l : j.literals)
        if (l.starts_with(open) && l.find(close) != std::string::npos && l.find(close) > open.size()) {
          t.default_system = l.substr(open.size(), l.find(close) - open.size());
          break;
        }
      // The generation prompt: what its literal writes after the assistant's header (QwQ's "<think>\n").
      static constexpr std::string_view header = "<|im_start|>assistant\n";
      bool writes_header = false;
      for (const std::string& l : j.literals)
        if (l.starts_with(header) && l.find("<|im_end|>") == std::string::npos) {
          writes_header = true;
          if (l.size() > header.size()) t.generation_prefix = l.substr(header.size());
        }
      t.generation_prompt = has("add_generation_prompt") ? generation_rule::when_asked : writes_header ? generation_rule::always : generation_rule::never;
      t.bos_first = has("bos_token");
      t.strip_reasoning = literal_has("</think>");
      return t;
    }
    if (literal_has("<<SYS>>")) return *named("llama2");  // before [INST]: Llama 2 writes both
    if (literal_has("<|start_header_id|>")) {
      chat_template t = *named("llama3");
      if (literal_has("Cutting Knowledge Date:")) {
        t.dated_system = true;
        t.knowledge_date = literal_after(j, "Cutting Knowledge Date: ").value_or("December 2023");
        // 3.2 dates the turn today when strftime_now exists (transformers defines it); 3.1 uses a constant.
        if (!has("strftime_now")) t.today = quoted_after(template_text, "date_string = ").value_or("26 Jul 2024");
      }
      return t;
    }
    if (literal_has("[INST]")) {
      chat_template t = *named("mistral");
      t.space_before_close = literal_has(" [/INST]");
      const auto written = [&](std::string_view s) { return j.raw.find(s) != std::string::npos; };
      t.space_before_answer = written("\" \" + message[\"content\"]") || written("' ' + message['content']");
      t.trim_answers = written("message[\"content\"]|trim + eos_token") || written("message[\"content\"] | trim + eos_token") ||
                       written("message['content']|trim + eos_token") || written("message['content'] | trim + eos_token");
      return t;
    }
    return std::nullopt;
  }

  // What makes `template_text` not well-formed Jinja, or nullopt: a tag ({{ }}, {% %}, {# #}) or a
  // string in one left open, a block ({% if %}, {% for %}, ...) never closed or an end closing none,
  // a filter Jinja (with transformers' tojson) does not have. Not a Jinja parser: what slips through
  // is what a template that renders cannot hold.
  static std::optional<std::string> syntax_problem(std::string_view text) {
    std::vector<jinja_piece> pieces;
    if (std::optional<std::string> unreadable = split_jinja(text, pieces)) return unreadable;
    return block_problem(pieces);
  }
  // syntax_problem's half after split_jinja: the tags' filters and blocks.
  static std::optional<std::string> block_problem(const std::vector<jinja_piece>& pieces) {
    static constexpr std::string_view blocks[] = {"if", "for", "macro", "call", "filter", "block", "generation", "set", "with", "autoescape"};
    static constexpr std::string_view filters[] = {
        "abs", "attr", "batch", "capitalize", "center", "count", "d", "default", "dictsort", "e", "escape", "filesizeformat", "first",
        "float", "forceescape", "format", "groupby", "indent", "int", "items", "join", "last", "length", "list", "lower", "map", "max",
        "min", "pprint", "random", "reject", "rejectattr", "replace", "reverse", "round", "safe", "select", "selectattr", "slice", "sort",
        "string", "striptags", "sum", "title", "tojson", "trim", "truncate", "unique", "upper", "urlencode", "urlize", "wordcount",
        "wordwrap", "xmlattr"};
    std::vector<std::pair<std::string, std::size_t>> open;  // the blocks open, and where
    for (const jinja_piece& p : pieces) {
      if (p.kind == jinja_kind::text) continue;
      const std::string where = " at byte " + std::to_string(p.at);
      const std::string& code = p.code;
      for (std::size_t bar = code.find('|'); bar != std::string::npos; bar = code.find('|', bar + 1)) {
        std::size_t n = bar + 1;
        while (n < code.size() && (code[n] == ' ' || code[n] == '\t' || code[n] == '\n')) ++n;
        std::size_t e = n;
        while (e < code.size() && (std::isalnum(static_cast<unsigned char>(code[e])) || code[e] == '_')) ++e;
        const std::string name = code.substr(n, e - n);
        if (std::find(std::begin(filters), std::end(filters), name) == std::end(filters))
          return "the filter '" + name + "'" + where + " is not one Jinja has";
      }
      if (p.kind != jinja_kind::statement) continue;
      const std::string word(statement_word(code));
      const bool block_set = word == "set" && code.find('=') == std::string::npos;  // {% set x %}...{% endset %}
      if (word == "set" && !block_set) {
      } else if (std::find(std::begin(blocks), std::end(blocks), word) != std::end(blocks)) {
        open.emplace_back(word, p.at);
      } else if (word.starts_with("end")) {
        if (open.empty() || open.back().first != word.substr(3))
          return "{% " + word + " %}" + where + " closes " + (open.empty() ? std::string("no block") : "{% " + open.back().first + " %} at byte " + std::to_string(open.back().second));
        open.pop_back();
      } else if ((word == "elif" && (open.empty() || open.back().first != "if")) ||
                 (word == "else" && (open.empty() || (open.back().first != "if" && open.back().first != "for")))) {
        return "{% " + word + " %}" + where + " is outside an {% if %}";
      }
    }
    if (!open.empty()) return "{% " + open.back().first + " %} at byte " + std::to_string(open.back().second) + " is never closed";
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
    if (const std::optional<std::string> wrong = syntax_problem(jinja)) throw load_error(from + ": chat_template is not well-formed Jinja: " + *wrong + choose);
    std::optional<chat_template> t = recognise(jinja);
    if (!t) throw load_error(from + ": chat_template is not a format fused renders (ChatML, Llama 2, Llama 3, Mistral [INST])" + choose);
    // An absent token keeps the format's; a null one is none (the template writes "").
    if (config.contains("bos_token")) t->bos = token_text(config, "bos_token").value_or("");
    if (config.contains("eos_token")) t->eos = token_text(config, "eos_token").value_or("");
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
      case chat_format::llama2: render_llama2(messages, pieces); break;
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

  void render_chatml(std::span<const chat_message> messages, bool asked, std::vector<piece>& out) const {
    const auto turn = [&](const std::string& role, const std::string& content) {
      control(out, "<|im_start|>");
      text(out, role + "\n" + content);
      control(out, "<|im_end|>");
      text(out, "\n");
    };
    if (bos_first) control(out, bos);
    if ((messages.empty() || messages.front().role != "system") && !default_system.empty()) turn("system", default_system);
    // Qwen3: reasoning is kept (as a <think> block) only in the answers after the last question,
    // and the final answer always gets one; earlier answers lose theirs.
    // The last question: a user message that is not a tool's answer (<tool_response>...</tool_response>).
    std::size_t last_query = messages.empty() ? 0 : messages.size() - 1;
    for (std::size_t i = 0; i < messages.size(); ++i) {
      const std::string_view c = messages[i].content;
      if (messages[i].role == "user" && !(c.starts_with("<tool_response>") && c.ends_with("</tool_response>"))) last_query = i;
    }
    for (std::size_t i = 0; i < messages.size(); ++i) {
      const chat_message& m = messages[i];
      if (!strip_reasoning || m.role != "assistant") {
        turn(m.role, m.content);
        continue;
      }
      const auto [reasoning, answer] = split_reasoning(m.content);
      if (i > last_query && (i + 1 == messages.size() || !reasoning.empty()))
        turn(m.role, "<think>\n" + std::string(strip_newlines(reasoning)) + "\n</think>\n\n" + std::string(lstrip_newlines(answer)));  // content.lstrip('\n')
      else
        turn(m.role, std::string(answer));
    }
    if (generation_prompt == generation_rule::always || (asked && generation_prompt == generation_rule::when_asked)) {
      control(out, "<|im_start|>");
      text(out, "assistant\n" + generation_prefix);
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

  // After an optional system message, user and assistant must alternate (Llama 2's and Mistral's
  // templates raise otherwise): the index of the first of them.
  static std::size_t alternating(std::span<const chat_message> messages, const char* format) {
    const std::size_t first = !messages.empty() && messages.front().role == "system" ? 1 : 0;
    for (std::size_t i = first; i < messages.size(); ++i)
      if (messages[i].role != ((i - first) % 2 == 0 ? "user" : "assistant"))
        throw std::invalid_argument("messages[" + std::to_string(i) + "].role: '" + messages[i].role + "'; after an optional first system message, " +
                                    format + " format alternates user and assistant");
    return first;
  }

  // Llama 2 chat: each user turn BOS [INST] TEXT [/INST], each answer " ANSWER " EOS, the system
  // message wrapped in <<SYS>> at the start of the first user turn; text stripped (Python's strip()).
  void render_llama2(std::span<const chat_message> messages, std::vector<piece>& out) const {
    const std::size_t first = alternating(messages, "Llama 2's");
    for (std::size_t i = first; i < messages.size(); ++i) {
      const chat_message& m = messages[i];
      std::string content = m.content;
      if (i == first && first == 1) content = "<<SYS>>\n" + messages.front().content + "\n<</SYS>>\n\n" + m.content;
      if (m.role == "user") {
        control(out, bos);
        out.push_back({"[INST]", piece::control_or_text});
        text(out, " " + std::string(trim(content)) + " ");
        out.push_back({"[/INST]", piece::control_or_text});
      } else {
        text(out, " " + std::string(trim(content)) + " ");
        control(out, eos);
      }
    }
  }

  // Mistral's template puts the system message into the user turn that ends the conversation (none
  // when an answer ends it) and wants the turns to alternate user / assistant; the generation prompt
  // is the [/INST] that closes each user turn.
  void render_mistral(std::span<const chat_message> messages, std::vector<piece>& out) const {
    const std::size_t first = alternating(messages, "Mistral's");
    const std::string system = first == 1 ? messages.front().content : std::string();
    control(out, bos);
    for (std::size_t i = first; i < messages.size(); ++i) {
      const chat_message& m = messages[i];
      if (m.role == "user") {
        out.push_back({"[INST]", piece::control_or_text});
        std::string body = " ";
        if (i + 1 == messages.size() && first == 1) body.append(system).append("\n\n");
        body.append(m.content).append(space_before_close ? " " : "");
        text(out, std::move(body));
        out.push_back({"[/INST]", piece::control_or_text});
      } else {
        text(out, std::string(space_before_answer ? " " : "").append(trim_answers ? trim(m.content) : std::string_view(m.content)));
        control(out, eos);
      }
    }
  }

  // Jinja's | trim and Python's str.strip(): the whitespace str.isspace() knows, Unicode's included.
  static std::string_view trim(std::string_view s) {
    static constexpr std::string_view wide[] = {"\u0085", "\u00a0", "\u1680", "\u2000", "\u2001", "\u2002", "\u2003", "\u2004",
                                                "\u2005", "\u2006", "\u2007", "\u2008", "\u2009", "\u200a", "\u2028", "\u2029",
                                                "\u202f", "\u205f", "\u3000"};
    const auto ascii = [](char c) { return c == ' ' || (c >= '\t' && c <= '\r') || (c >= '\x1c' && c <= '\x1f'); };
    for (bool again = true; again && !s.empty();) {
      again = false;
      if (ascii(s.front())) s.remove_prefix(1), again = true;
      for (const std::string_view w : wide)
        if (!again && s.starts_with(w)) s.remove_prefix(w.size()), again = true;
    }
    for (bool again = true; again && !s.empty();) {
      again = false;
      if (ascii(s.back())) s.remove_suffix(1), again = true;
      for (const std::string_view w : wide)
        if (!again && s.ends_with(w)) s.remove_suffix(w.size()), again = true;
    }
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
  static std::string_view lstrip_newlines(std::string_view s) {
    while (!s.empty() && s.front() == '\n') s.remove_prefix(1);
    return s;
  }
  static std::string_view strip_newlines(std::string_view s) {
    while (!s.empty() && s.front() == '\n') s.remove_prefix(1);
    while (!s.empty() && s.back() == '\n') s.remove_suffix(1);
    return s;
  }

  static std::string date_today() {
    const std::time_t now = std::time(nullptr);
    std::tm tm{};
    localtime_r(&now, &tm);  // transformers' strftime_now: datetime.now(), the local date
    char buf[32];
    return std::string(buf, std::strftime(buf, sizeof buf, "%d %b %Y", &tm));
  }

  // The {% endraw %} tag at or after `from`: where it starts and where it ends (past its "%}").
  static std::optional<std::pair<std::size_t, std::size_t>> endraw_tag(std::string_view t, std::size_t from) {
    for (std::size_t at = t.find("{%", from); at != std::string_view::npos; at = t.find("{%", at + 2)) {
      std::size_t i = at + 2;
      const auto blanks = [&] {
        while (i < t.size() && (t[i] == ' ' || t[i] == '\t' || t[i] == '\n' || t[i] == '\r')) ++i;
      };
      if (i < t.size() && (t[i] == '-' || t[i] == '+')) ++i;
      blanks();
      if (t.substr(i, 6) != "endraw") continue;
      i += 6;
      blanks();
      if (i < t.size() && (t[i] == '-' || t[i] == '+')) ++i;
      if (t.substr(i, 2) == "%}") return std::pair{at, i + 2};
    }
    return std::nullopt;
  }

  // A string literal's text as jinja2 reads it (Python's unicode-escape): \n, \t, \\, \', \xHH,
  // \uHHHH, \UHHHHHHHH, octal, ...; another escape keeps its backslash.
  static std::string unescape(std::string_view lit) {
    std::string out;
    const auto utf8 = [&](std::uint32_t c) {
      if (c < 0x80) out += static_cast<char>(c);
      else if (c < 0x800) out += static_cast<char>(0xC0 | (c >> 6)), out += static_cast<char>(0x80 | (c & 0x3F));
      else if (c < 0x10000)
        out += static_cast<char>(0xE0 | (c >> 12)), out += static_cast<char>(0x80 | ((c >> 6) & 0x3F)), out += static_cast<char>(0x80 | (c & 0x3F));
      else
        out += static_cast<char>(0xF0 | (c >> 18)), out += static_cast<char>(0x80 | ((c >> 12) & 0x3F)),
            out += static_cast<char>(0x80 | ((c >> 6) & 0x3F)), out += static_cast<char>(0x80 | (c & 0x3F));
    };
    const auto hex = [&](std::size_t at, std::size_t digits) -> std::optional<std::uint32_t> {
      if (at + digits > lit.size()) return std::nullopt;
      std::uint32_t v = 0;
      for (std::size_t k = 0; k < digits; ++k) {
        const char c = lit[at + k];
        const int d = c >= '0' && c <= '9' ? c - '0' : c >= 'a' && c <= 'f' ? c - 'a' + 10 : c >= 'A' && c <= 'F' ? c - 'A' + 10 : -1;
        if (d < 0) return std::nullopt;
        v = v * 16 + static_cast<std::uint32_t>(d);
      }
      return v;
    };
    for (std::size_t i = 0; i < lit.size(); ++i) {
      if (lit[i] != '\\' || i + 1 >= lit.size()) {
        out += lit[i];
        continue;
      }
      const char c = lit[++i];
      static constexpr std::string_view from = "\\'\"abfnrtv", to = "\\'\"\a\b\f\n\r\t\v";
      if (const std::size_t k = from.find(c); k != std::string_view::npos) {
        out += to[k];
      } else if (c >= '0' && c <= '7') {
        std::uint32_t v = 0;
        std::size_t n = 0;
        for (; n < 3 && i + n < lit.size() && lit[i + n] >= '0' && lit[i + n] <= '7'; ++n) v = v * 8 + static_cast<std::uint32_t>(lit[i + n] - '0');
        utf8(v);
        i += n - 1;
      } else if (const std::size_t digits = c == 'x' ? 2 : c == 'u' ? 4 : c == 'U' ? 8 : 0; digits && hex(i + 1, digits) && *hex(i + 1, digits) <= 0x10FFFF) {
        utf8(*hex(i + 1, digits));
        i += digits;
      } else {
        out += '\\';
        out += c;
      }
    }
    return out;
  }

  static jinja_piece text_piece(std::size_t at, std::string_view written) {
    jinja_piece p;
    p.at = at;
    p.written = written;
    return p;
  }
  // The template in pieces, in order: the one scanner syntax_problem and recognise share. Returns
  // what stops it, naming the byte where that starts: a tag, a string in one, a comment or a
  // {% raw %} block never closed (the pieces before it are in `pieces`).
  static std::optional<std::string> split_jinja(std::string_view t, std::vector<jinja_piece>& pieces) {
    std::size_t at = 0;  // where the text not yet in a piece starts
    for (std::size_t tag = t.find('{'); tag != std::string_view::npos && tag + 1 < t.size(); tag = t.find('{', tag + 1)) {
      const char mark = t[tag + 1];
      if (mark != '{' && mark != '%' && mark != '#') continue;
      const std::string where = " at byte " + std::to_string(tag);
      if (tag > at) pieces.push_back(text_piece(at, t.substr(at, tag - at)));
      if (mark == '#') {
        const std::size_t end = t.find("#}", tag + 2);
        if (end == std::string_view::npos) return "the comment" + where + " is never closed";
        at = end + 2;
        tag = end + 1;
        continue;
      }
      const std::string_view closing = mark == '{' ? "}}" : "%}";
      jinja_piece p;
      p.kind = mark == '{' ? jinja_kind::expression : jinja_kind::statement;
      p.at = tag;
      std::size_t i = tag + 2;
      for (; i + 1 < t.size() && t.substr(i, 2) != closing; ++i) {
        if (t[i] != '\'' && t[i] != '"') {
          p.code += t[i];
          continue;
        }
        const char quote = t[i];
        const std::size_t from = i + 1;
        for (++i; i < t.size() && t[i] != quote; ++i)
          if (t[i] == '\\') ++i;
        if (i >= t.size()) return "a string" + where + " is never closed";
        p.code += quote;
        p.code += quote;
        p.strings.push_back(t.substr(from, i - from));
      }
      if (i + 1 >= t.size()) return std::string(mark == '{' ? "the expression" : "the statement") + where + " is never closed";
      p.written = t.substr(tag, i + 2 - tag);
      at = i + 2;
      tag = i + 1;
      if (p.kind == jinja_kind::statement && statement_word(p.code) == "raw") {  // its text is text, up to {% endraw %}
        const std::optional<std::pair<std::size_t, std::size_t>> end = endraw_tag(t, at);
        if (!end) return "{% raw %}" + where + " is never closed";
        pieces.push_back(text_piece(at, t.substr(at, end->first - at)));
        at = end->second;
        tag = at - 1;
        continue;
      }
      pieces.push_back(std::move(p));
    }
    if (at < t.size()) pieces.push_back(text_piece(at, t.substr(at)));
    return std::nullopt;
  }
  // A statement's first word: "if" of "{%- if x %}".
  static std::string_view statement_word(std::string_view code) {
    std::size_t w = 0;
    while (w < code.size() && std::string_view("-+ \t\n\r").find(code[w]) != std::string_view::npos) ++w;
    std::size_t e = w;
    while (e < code.size() && (std::isalnum(static_cast<unsigned char>(code[e])) || code[e] == '_')) ++e;
    return code.substr(w, e - w);
  }

  // A template's text in two parts: its string literals (escapes read, the text outside tags
  // included) and its code (the tags' text with the literals blanked), comments dropped.
  struct jinja_text {
    std::vector<std::string> literals;
    std::string code;
    std::string raw;  // the text as written, without its comments
  };
  static jinja_text read_jinja(const std::vector<jinja_piece>& pieces) {
    jinja_text j;
    for (const jinja_piece& p : pieces) {
      j.raw += p.written;
      if (p.kind == jinja_kind::text) {
        j.literals.emplace_back(p.written);
        continue;
      }
      j.code += p.code;
      j.code += '\n';
      for (const std::string_view literal : p.strings) j.literals.push_back(unescape(literal));
    }
    return j;
  }
  // The text after `key` in a literal, up to the line's end ("December 2023" in
  // "Cutting Knowledge Date: December 2023\n").
  static std::optional<std::string> literal_after(const jinja_text& j, std::string_view key) {
    for (const std::string& l : j.literals)
      if (const std::size_t at = l.find(key); at != std::string::npos) {
        const std::size_t from = at + key.size(), to = l.find('\n', from);
        if (to == std::string::npos || to == from || to - from > 64) return std::nullopt;
        return l.substr(from, to - from);
      }
    return std::nullopt;
  }
  // The quoted string after `key` ("26 Jul 2024" in `date_string = "26 Jul 2024"`).
  static std::optional<std::string> quoted_after(std::string_view jinja, std::string_view key) {
    const std::size_t at = jinja.find(key);
    if (at == std::string_view::npos || at + key.size() >= jinja.size()) return std::nullopt;
    const char q = jinja[at + key.size()];
    if (q != '"' && q != '\'') return std::nullopt;
    const std::size_t from = at + key.size() + 1, to = jinja.find(q, from);
    if (to == std::string_view::npos || to == from || to - from > 64) return std::nullopt;
    return std::string(jinja.substr(from, to - from));
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
