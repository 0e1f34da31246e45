// Reading and writing graph files (document.hpp) as JSON or MessagePack, the same document in two
// encodings. Reading reports every defect of form it finds (a missing field, a wrong type, an
// unknown dtype), each naming the node or edge, and keeps going; a file that is not a document at
// all (bad JSON, too deep, a repeated key, a major version it does not know) is one defect.
#pragma once
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <stdexcept>
#include <string>
#include <string_view>
#include <unordered_set>
#include <vector>

#include "../core/json_text.hpp"
#include "../core/text_string.hpp"
#include "../io/file_replace.hpp"
#include "../io/tokenizer/utf8.hpp"
#include "../plan/json.hpp"
#include "document.hpp"

namespace fused::ir {

enum class encoding : std::uint8_t { json_text, msgpack };

// A parsed file: the document and every defect of form (empty when the document is well formed).
struct read_result {
  document doc;
  std::vector<issue> errors;
  bool ok() const { return errors.empty(); }
};

namespace detail {

// A DOM builder for nlohmann's SAX parser that bounds nesting and refuses a key repeated in one
// object (a parser would keep the last silently), for JSON and MessagePack alike.
class strict_builder : public nlohmann::json_sax<json> {
 public:
  static constexpr std::size_t max_depth = 64;
  json root;
  std::string error;

  bool null() override { return put(nullptr); }
  bool boolean(bool v) override { return put(v); }
  bool number_integer(number_integer_t v) override { return put(v); }
  bool number_unsigned(number_unsigned_t v) override { return put(v); }
  bool number_float(number_float_t v, const string_t&) override { return put(v); }
  // MessagePack strings arrive unchecked (JSON's lexer checks its own): text that is not UTF-8
  // could be neither printed in a message nor written back as JSON.
  bool string(string_t& v) override {
    if (!io::tokenization::is_valid_utf8(v)) return fail("a string is not valid UTF-8");
    return put(std::move(v));
  }
  bool binary(binary_t&) override { return fail("binary values have no meaning in a graph file"); }
  bool start_object(std::size_t) override { return open(json::object()); }
  bool end_object() override { return close(); }
  bool start_array(std::size_t) override { return open(json::array()); }
  bool end_array() override { return close(); }
  bool key(string_t& k) override {
    if (!io::tokenization::is_valid_utf8(k)) return fail("a key is not valid UTF-8");
    if (!keys_.back().insert(k).second) return fail("key \"" + k + "\" appears twice in one object");
    key_ = std::move(k);
    return true;
  }
  bool parse_error(std::size_t position, const std::string&, const nlohmann::detail::exception& e) override {
    std::string why = json_text::reason(e);  // a parse error's says where; others get the byte
    return fail(why.starts_with("at ") ? why : "at byte " + std::to_string(position) + ": " + why);
  }

 private:
  bool fail(std::string what) {
    if (error.empty()) error = std::move(what);
    return false;
  }
  json* put(json v) {
    if (stack_.empty()) {
      root = std::move(v);
      return &root;
    }
    json& top = *stack_.back();
    if (top.is_array()) {
      top.push_back(std::move(v));
      return &top.back();
    }
    json& slot = top[key_];
    slot = std::move(v);
    return &slot;
  }
  bool open(json v) {
    if (stack_.size() >= max_depth) return fail("nests deeper than " + std::to_string(max_depth) + " levels");
    json* at = put(std::move(v));
    stack_.push_back(at);
    keys_.emplace_back();
    return true;
  }
  bool close() {
    stack_.pop_back();
    keys_.pop_back();
    return true;
  }
  std::vector<json*> stack_;
  std::vector<std::unordered_set<std::string>> keys_;
  std::string key_;
};

// Reads the fields of the document, recording each defect and going on.
class reader {
 public:
  explicit reader(std::vector<issue>& errors) : errors_(errors) {}

  void fail(const std::string& where, const std::string& rule, std::string message) { errors_.push_back({where, rule, std::move(message)}); }

  // An integer id (or count) >= 0.
  std::optional<std::int64_t> index(const json& v, const std::string& where, const std::string& field) {
    if (v.is_number_unsigned() && v.get<std::uint64_t>() <= static_cast<std::uint64_t>(INT64_MAX)) return v.get<std::int64_t>();
    if (v.is_number_integer() && v.get<std::int64_t>() >= 0) return v.get<std::int64_t>();
    fail(where, "format", "\"" + field + "\" must be a non-negative integer" + (v.is_number_unsigned() ? " up to 2^63 - 1" : "") + ", got " +
                              json_text::excerpt(v));
    return std::nullopt;
  }
  std::optional<std::int64_t> integer(const json& v, const std::string& where, const std::string& field) {
    if (v.is_number_integer() && !(v.is_number_unsigned() && v.get<std::uint64_t>() > static_cast<std::uint64_t>(INT64_MAX)))
      return v.get<std::int64_t>();
    fail(where, "format", "\"" + field + "\" must be an integer, got " + json_text::excerpt(v));
    return std::nullopt;
  }
  const std::string* text(const json& obj, const char* field, const std::string& where, bool required = true) {
    const auto it = obj.find(field);
    if (it == obj.end()) {
      if (required) fail(where, "format", std::string("\"") + field + "\" is missing");
      return nullptr;
    }
    if (!it->is_string()) {
      fail(where, "format", std::string("\"") + field + "\" must be a string, got " + json_text::excerpt(*it));
      return nullptr;
    }
    return &it->get_ref<const std::string&>();
  }

  std::optional<value_type> type_of(const json& data, const std::string& where, bool required) {
    const bool has_dtype = data.contains("dtype"), has_shape = data.contains("shape");
    if (!has_dtype && !has_shape) {
      if (required) fail(where, "format", "the value's \"dtype\" and \"shape\" are missing");
      return std::nullopt;
    }
    value_type v{};
    bool ok = true;
    if (const std::string* d = text(data, "dtype", where)) {
      bool known = false;
      for (auto t : {dtype::bf16, dtype::f16, dtype::f32, dtype::i32, dtype::i64, dtype::boolean})
        if (*d == name_of(t)) v.type = t, known = true;
      if (!known) fail(where, "dtype", "unknown dtype \"" + *d + "\" (known: bf16, f16, f32, i32, i64, bool)"), ok = false;
    } else {
      ok = false;
    }
    const auto s = data.find("shape");
    if (s == data.end() || !s->is_array()) {
      fail(where, "format", "\"shape\" must be an array of dims (numbers or symbol names)");
      return std::nullopt;
    }
    for (const json& d : *s) {
      if (const auto e = dim_of(d, where)) v.dims.push_back(*e);
      else ok = false;
    }
    return ok ? std::optional<value_type>(v) : std::nullopt;
  }

  // 896, "tokens" or "2*tokens".
  std::optional<dim_expr> dim_of(const json& d, const std::string& where) {
    if (d.is_number_integer()) {
      const auto n = integer(d, where, "shape");
      if (n && *n >= 1) return dim_expr{*n, {}};  // an empty tensor has no buffer to plan
      if (n) fail(where, "shape", "dim " + std::to_string(*n) + " must be positive");
      return std::nullopt;
    }
    if (d.is_string()) {
      const std::string& s = d.get_ref<const std::string&>();
      dim_expr e{1, s};
      if (const auto star = s.find('*'); star != std::string::npos) {
        const std::string k = s.substr(0, star);
        e.symbol = s.substr(star + 1);
        e.n = 0;
        bool digits = !k.empty() && k.size() <= 12;
        for (char c : k) digits = digits && c >= '0' && c <= '9';
        if (digits) e.n = std::stoll(k);
        if (!digits || e.n < 1) {
          fail(where, "shape", "dim \"" + s + "\" must be a symbol or K*symbol with a positive integer K");
          return std::nullopt;
        }
      }
      if (!is_identifier(e.symbol)) {
        fail(where, "shape", "dim \"" + s + "\": a symbol name is letters, digits and '_', not starting with a digit");
        return std::nullopt;
      }
      return e;
    }
    fail(where, "shape", "a dim must be a positive integer or a symbol name, got " + json_text::excerpt(d));
    return std::nullopt;
  }

  static bool known_data_field(node_type t, std::string_view k) {
    if (k == "dtype" || k == "shape") return t != node_type::output && t != node_type::conditional && t != node_type::loop;
    switch (t) {
      case node_type::input: return k == "name" || k == "state";
      case node_type::get_attr: return k == "target";
      case node_type::call: return k == "op" || k == "name" || k == "attributes";
      case node_type::output: return k == "name" || k == "carries";
      case node_type::conditional: return k == "name" || k == "then" || k == "else";
      case node_type::loop: return k == "name" || k == "body" || k == "max_trips";
      case node_type::merge: return k == "name" || k == "of";
      default: return k == "name";
    }
  }

  static bool is_identifier(std::string_view s) {
    if (s.empty() || s.size() > 64 || (s[0] >= '0' && s[0] <= '9')) return false;
    for (char c : s)
      if (!((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_')) return false;
    return true;
  }

  std::optional<node> node_of(const json& j, std::size_t index) {
    std::string where = "nodes[" + std::to_string(index) + "]";
    if (!j.is_object()) {
      fail(where, "format", "a node must be an object {\"id\", \"type\", \"data\"}, got " + json_text::excerpt(j));
      return std::nullopt;
    }
    node n{};
    const auto id = j.find("id");
    if (id == j.end()) {
      fail(where, "format", "\"id\" is missing");
      return std::nullopt;
    }
    const auto id_value = this->index(*id, where, "id");
    if (!id_value) return std::nullopt;
    n.id = *id_value;
    where = node_where(n.id);
    const std::string* type = text(j, "type", where);
    if (!type) return std::nullopt;
    bool known = false;
    for (int t = 0; t < 7; ++t)
      if (*type == node_type_names[t]) n.type = static_cast<node_type>(t), known = true;
    if (!known) {
      fail(where, "node-type", "unknown node type \"" + *type + "\" (known: Input, Call, Output, GetAttr, Conditional, Loop, Merge)");
      return std::nullopt;
    }
    static const json empty = json::object();
    const auto d = j.find("data");
    if (d != j.end() && !d->is_object()) {
      fail(where, "format", "\"data\" must be an object, got " + json_text::excerpt(*d));
      return std::nullopt;
    }
    const json& data = d == j.end() ? empty : *d;
    if (const auto m = j.find("metadata"); m != j.end()) {
      if (m->is_object()) n.metadata = *m;
      else fail(where, "format", "\"metadata\" must be an object, got " + json_text::excerpt(*m));
    }
    for (const auto& [k, v] : j.items())
      if (k != "id" && k != "type" && k != "data" && k != "metadata") fail(where, "format", "unknown node field \"" + k + "\"");
    for (const auto& [k, v] : data.items())
      if (!known_data_field(n.type, k)) fail(where, "format", std::string("unknown field \"") + k + "\" in the data of a " + name_of(n.type) + " node");
    bool ok = true;
    switch (n.type) {
      case node_type::input:
      case node_type::get_attr: {
        const char* key = n.type == node_type::input ? "name" : "target";
        const std::string* name = text(data, key, where);
        if (name) n.name = *name;
        if (name && name->empty()) fail(where, "format", std::string("\"") + key + "\" must not be empty (it names the tensor a run binds)");
        n.value = type_of(data, where, true);
        ok = name && !name->empty() && n.value;
        if (n.type == node_type::input && data.contains("state")) {
          if (data["state"].is_boolean()) n.state = data["state"].get<bool>();
          else fail(where, "format", "\"state\" must be true or false"), ok = false;
        }
        break;
      }
      case node_type::call: {
        const std::string* op = text(data, "op", where);
        if (op) n.op = *op;
        if (const std::string* name = text(data, "name", where, false)) n.name = *name;
        if (const auto a = data.find("attributes"); a != data.end()) {
          if (a->is_object()) n.attributes = *a;
          else fail(where, "format", "\"attributes\" must be an object, got " + json_text::excerpt(*a)), ok = false;
        }
        n.value = type_of(data, where, false);
        ok = ok && op;
        break;
      }
      case node_type::output: {
        const std::string* name = text(data, "name", where);
        if (name) n.name = *name;
        if (name && name->empty()) fail(where, "format", "\"name\" must not be empty (it names the tensor a run writes)");
        ok = name != nullptr && !name->empty();
        if (const auto c = data.find("carries"); c != data.end()) {
          n.carries = this->index(*c, where, "carries");
          ok = ok && n.carries;
        }
        break;
      }
      case node_type::conditional:
      case node_type::loop:
      case node_type::merge: {
        if (const std::string* name = text(data, "name", where, false)) n.name = *name;
        if (n.type == node_type::merge) {
          n.value = type_of(data, where, false);
          const auto o = data.find("of");
          if (o == data.end()) fail(where, "format", "a Merge names the Conditional or Loop it belongs to in \"of\""), ok = false;
          else ok = (n.of = this->index(*o, where, "of")).has_value();
        }
        auto ids = [&](const char* field, std::vector<std::int64_t>& into) {
          const auto f = data.find(field);
          if (f == data.end()) return fail(where, "format", std::string("a ") + name_of(n.type) + " lists its \"" + field + "\" node ids"), false;
          if (!f->is_array()) return fail(where, "format", std::string("\"") + field + "\" must be an array of node ids, got " + json_text::excerpt(*f)), false;
          for (const json& v : *f) {
            const auto member = this->index(v, where, field);
            if (!member) return false;
            into.push_back(*member);
          }
          return true;
        };
        if (n.type == node_type::conditional) ok = ids("then", n.then_body) && ids("else", n.else_body);
        if (n.type == node_type::loop) {
          ok = ids("body", n.body);
          const auto m = data.find("max_trips");
          if (m == data.end()) fail(where, "format", "a Loop states its bound, \"max_trips\" (0 .. 2^31)"), ok = false;
          else if (!m->is_number_integer() || (m->is_number_unsigned() ? m->get<std::uint64_t>() > (std::uint64_t{1} << 31) : m->get<std::int64_t>() < 0 || m->get<std::int64_t>() > (std::int64_t{1} << 31)))
            fail(where, "format", "\"max_trips\" must be an integer in 0 .. 2^31, got " + json_text::excerpt(*m)), ok = false;
          else n.max_trips = m->get<std::int64_t>();
        }
        break;
      }
    }
    if (!ok) return std::nullopt;
    return n;
  }

 private:
  std::vector<issue>& errors_;
};

inline std::optional<std::vector<std::int64_t>> id_list(reader& r, const json& doc, const char* field) {
  const auto it = doc.find(field);
  if (it == doc.end() || !it->is_array()) {
    r.fail("graph", "format", std::string("\"") + field + "\" must be an array of node ids");
    return std::nullopt;
  }
  std::vector<std::int64_t> ids;
  for (const json& v : *it)
    if (const auto id = r.index(v, "graph", field)) ids.push_back(*id);
  return ids;
}

}  // namespace detail

// The document a parsed JSON value describes.
inline read_result from_json(const json& doc) {
  read_result out;
  detail::reader r(out.errors);
  if (!doc.is_object()) {
    r.fail("graph", "format", "a graph file is an object with \"nodes\", \"edges\", \"inputs\", \"outputs\" and \"metadata\"");
    return out;
  }
  // The version first: a file of another major version is not read any further.
  const auto meta = doc.find("metadata");
  if (meta == doc.end() || !meta->is_object()) {
    r.fail("graph", "version", "\"metadata\" with a \"version\" (\"" + std::to_string(format_major) + "." + std::to_string(format_minor) + "\") is missing");
    return out;
  }
  const std::string* version = r.text(*meta, "version", "graph");
  if (!version) return out;
  const auto dot = version->find('.');
  const std::string major = version->substr(0, dot);
  // "MAJOR.MINOR", the minor a number: a later minor version reads as this one, anything else is not a version.
  const bool minor_is_number = dot != std::string::npos && dot + 1 < version->size() && version->size() - dot - 1 <= 9 &&
                               version->find_first_not_of("0123456789", dot + 1) == std::string::npos;
  if (major != std::to_string(format_major) || !minor_is_number) {
    r.fail("graph", "version", "version \"" + *version + "\" is not one this reader knows (it reads " + std::to_string(format_major) + ".x)");
    return out;
  }
  out.doc.metadata = *meta;
  // The fields fused reads (docs/GRAPH_FORMAT.md): a value it would refuse later is refused here.
  if (const auto o = meta->find("options"); o != meta->end()) {
    if (!o->is_object()) r.fail("graph", "format", "metadata.options must be an object, got " + json_text::excerpt(*o));
    else if (const auto l = o->find("logits"); l != o->end() && *l != "last" && *l != "all")
      r.fail("graph", "format", "metadata.options.logits must be \"last\" or \"all\", got " + json_text::excerpt(*l));
  }

  if (const auto s = doc.find("symbols"); s != doc.end()) {
    if (!s->is_array()) r.fail("graph", "format", "\"symbols\" must be an array of {\"name\"}");
    else
      for (const json& j : *s) {
        const std::string* name = j.is_object() ? r.text(j, "name", "graph") : nullptr;
        if (!j.is_object()) r.fail("graph", "format", "a symbol must be an object {\"name\", \"doc\"}, got " + json_text::excerpt(j));
        if (!name) continue;
        if (!detail::reader::is_identifier(*name)) r.fail("graph", "symbol", "symbol name " + json_text::excerpt(j["name"]) + " is not an identifier");
        const std::string* d = r.text(j, "doc", "graph", false);
        out.doc.symbols.push_back({*name, d ? *d : std::string()});
      }
  }
  if (const auto c = doc.find("constraints"); c != doc.end()) {
    if (!c->is_array()) r.fail("graph", "format", "\"constraints\" must be an array");
    else
      for (std::size_t i = 0; i < c->size(); ++i) {
        const json& j = (*c)[i];
        const std::string where = "constraints[" + std::to_string(i) + "]";
        const std::string* kind = j.is_object() ? r.text(j, "type", where) : nullptr;
        if (!j.is_object()) r.fail(where, "format", "a constraint must be an object, got " + json_text::excerpt(j));
        if (!kind) continue;
        constraint k{};
        int known = -1;
        for (int t = 0; t < 3; ++t)
          if (*kind == constraint_kind_names[t]) known = t;
        if (known < 0) {
          r.fail(where, "constraint", "unknown constraint \"" + *kind + "\" (known: Equal, Divisible, Range)");
          continue;
        }
        k.kind = static_cast<constraint_kind>(known);
        const auto syms = j.find("symbols");
        bool ok = syms != j.end() && syms->is_array() && syms->size() == (k.kind == constraint_kind::equal ? 2u : 1u);
        if (ok)
          for (const json& s : *syms) ok = ok && s.is_string(), k.symbols.push_back(s.is_string() ? s.get<std::string>() : "");
        if (!ok) {
          r.fail(where, "constraint", std::string(*kind) + " takes \"symbols\": " + (k.kind == constraint_kind::equal ? "two symbol names" : "one symbol name"));
          continue;
        }
        auto number = [&](const char* f) -> std::optional<std::int64_t> {
          const auto v = j.find(f);
          if (v == j.end()) {
            r.fail(where, "constraint", std::string(*kind) + " needs \"" + f + "\"");
            return std::nullopt;
          }
          return r.integer(*v, where, f);
        };
        if (k.kind == constraint_kind::divisible) {
          const auto by = number("by");
          if (!by) continue;
          k.by = *by;
        } else if (k.kind == constraint_kind::range) {
          const auto lo = number("min"), hi = number("max");
          if (!lo || !hi) continue;
          k.min = *lo, k.max = *hi;
        }
        out.doc.constraints.push_back(std::move(k));
      }
  }

  const auto nodes = doc.find("nodes");
  if (nodes == doc.end() || !nodes->is_array()) r.fail("graph", "format", "\"nodes\" must be an array of {\"id\", \"type\", \"data\"}");
  else
    for (std::size_t i = 0; i < nodes->size(); ++i)
      if (auto n = r.node_of((*nodes)[i], i)) out.doc.nodes.push_back(std::move(*n));

  const auto edges = doc.find("edges");
  if (edges == doc.end() || !edges->is_array()) r.fail("graph", "format", "\"edges\" must be an array of {\"source\", \"target\", \"name\"}");
  else
    for (std::size_t i = 0; i < edges->size(); ++i) {
      const json& j = (*edges)[i];
      const std::string where = "edges[" + std::to_string(i) + "]";
      if (!j.is_object() || !j.contains("source") || !j.contains("target")) {
        r.fail(where, "format", "an edge must be an object {\"source\", \"target\", \"name\", \"slot\"}, got " + json_text::excerpt(j));
        continue;
      }
      edge e{};
      const auto s = r.index(j["source"], where, "source"), t = r.index(j["target"], where, "target");
      if (const std::string* name = r.text(j, "name", where, false)) e.name = *name;
      std::int64_t slot = 0;  // a plain value and a flag: g++ -O1 misreads an optional<int64_t> here as uninitialized
      bool slot_ok = true;
      if (j.contains("slot")) {
        const auto v = r.index(j["slot"], where, "slot");
        slot_ok = v.has_value();
        slot = v.value_or(0);
      }
      if (slot_ok && slot > 64) r.fail(where, "format", "\"slot\" " + std::to_string(slot) + " is larger than any op's arity"), slot_ok = false;
      if (!s || !t || !slot_ok) continue;
      e.source = *s, e.target = *t, e.slot = static_cast<int>(slot);
      out.doc.edges.push_back(std::move(e));
    }
  if (auto in = detail::id_list(r, doc, "inputs")) out.doc.inputs = std::move(*in);
  if (auto outs = detail::id_list(r, doc, "outputs")) out.doc.outputs = std::move(*outs);
  for (const auto& [k, v] : doc.items())
    if (k != "metadata" && k != "symbols" && k != "constraints" && k != "nodes" && k != "edges" && k != "inputs" && k != "outputs")
      r.fail("graph", "format", "unknown top-level field \"" + k + "\"");
  return out;
}

// Parses bytes of either encoding (JSON starts with '{', or '[' or '"' for JSON that is no graph,
// after any whitespace and a UTF-8 byte-order mark, which some editors write; anything else is read
// as MessagePack, where those bytes would be a lone integer, no graph either).
inline read_result parse(std::string_view bytes) {
  const auto refused = [](std::string why) {
    read_result r;
    r.errors.push_back({"graph", "format", std::move(why)});
    return r;
  };
  // UTF-16 and UTF-32 text (their byte-order marks, or ASCII's high zero bytes) is named as such.
  if (bytes.starts_with("\xFF\xFE") || bytes.starts_with("\xFE\xFF") ||
      (bytes.size() >= 2 && (bytes[0] == '\0') != (bytes[1] == '\0') && (bytes[0] == '{' || bytes[1] == '{')))
    return refused("UTF-16 or UTF-32 text; a graph file is UTF-8 JSON or MessagePack");
  if (bytes.starts_with("\xEF\xBB\xBF")) bytes.remove_prefix(3);
  std::size_t first = 0;
  while (first < bytes.size() && (bytes[first] == ' ' || bytes[first] == '\n' || bytes[first] == '\r' || bytes[first] == '\t')) ++first;
  if (first == bytes.size()) return refused(bytes.empty() ? "the file is empty" : "the file holds only whitespace");
  const bool json_text = bytes[first] == '{' || bytes[first] == '[' || bytes[first] == '"';
  const encoding enc = json_text ? encoding::json_text : encoding::msgpack;
  detail::strict_builder b;
  bool parsed = false;
  try {
    if (enc == encoding::json_text) fused::json_text::require_no_nul(bytes);
    parsed = enc == encoding::json_text ? json::sax_parse(bytes.begin(), bytes.end(), &b, json::input_format_t::json, true)
                                   : json::sax_parse(bytes.begin(), bytes.end(), &b, json::input_format_t::msgpack, true);
  } catch (const json::exception& e) {
    if (b.error.empty()) b.error = json_text::reason(e);
  }
  if (!parsed || !b.error.empty()) {
    read_result r;
    r.errors.push_back({"graph", "format",
                        std::string(enc == encoding::json_text ? "not valid JSON" : "not a JSON or MessagePack document") + ": " +
                            (b.error.empty() ? "incomplete" : b.error)});
    return r;
  }
  return from_json(b.root);
}

// A graph file's bytes; a FIFO or device, or a file over 256 MiB, is refused.
inline std::string read_bytes(const std::filesystem::path& file) {
  std::error_code ec;
  if (std::filesystem::exists(file, ec) && !std::filesystem::is_regular_file(file, ec))
    throw std::runtime_error(file.string() + ": not a regular file");
  std::ifstream in(file, std::ios::binary);
  if (!in) throw std::runtime_error(file.string() + ": cannot open: " + std::strerror(errno));
  constexpr std::uintmax_t max_bytes = std::uintmax_t{256} << 20;
  if (const auto size = std::filesystem::file_size(file, ec); !ec && size > max_bytes)
    throw std::runtime_error(file.string() + ": is " + std::to_string(size) + " bytes, more than the " + std::to_string(max_bytes) + " a graph file may have");
  std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) throw std::runtime_error(file.string() + ": cannot read: " + std::strerror(errno));
  return bytes;
}

inline read_result read_file(const std::filesystem::path& file) { return parse(read_bytes(file)); }

// --- writing ---

inline json dim_json(const dim_expr& d) {
  if (d.symbol.empty()) return d.n;
  return d.n == 1 ? d.symbol : std::to_string(d.n) + "*" + d.symbol;
}

inline void put_type(json& data, const std::optional<value_type>& v) {
  if (!v) return;
  data["dtype"] = name_of(v->type);
  json s = json::array();
  for (const auto& d : v->dims) s.push_back(dim_json(d));
  data["shape"] = std::move(s);
}

FUSED_UNOPTIMIZED inline json to_json(const document& doc) {
  json out = json::object();
  json meta = doc.metadata;
  if (!meta.contains("version")) meta["version"] = std::to_string(format_major) + "." + std::to_string(format_minor);
  out["metadata"] = std::move(meta);
  json symbols = json::array();
  for (const auto& s : doc.symbols) {
    json j = {{"name", s.name}};
    if (!s.doc.empty()) j["doc"] = s.doc;
    symbols.push_back(std::move(j));
  }
  out["symbols"] = std::move(symbols);
  json constraints = json::array();
  for (const auto& c : doc.constraints) {
    json j = {{"type", constraint_kind_names[static_cast<int>(c.kind)]}, {"symbols", c.symbols}};
    if (c.kind == constraint_kind::divisible) j["by"] = c.by;
    if (c.kind == constraint_kind::range) j["min"] = c.min, j["max"] = c.max;
    constraints.push_back(std::move(j));
  }
  out["constraints"] = std::move(constraints);
  json nodes = json::array();
  for (const auto& n : doc.nodes) {
    json data = json::object();
    switch (n.type) {
      case node_type::input:
        data["name"] = n.name;
        if (n.state) data["state"] = true;
        break;
      case node_type::get_attr: data["target"] = n.name; break;
      case node_type::call:
        data["op"] = n.op;
        data["name"] = n.name;
        data["attributes"] = n.attributes;
        break;
      case node_type::output:
        data["name"] = n.name;
        if (n.carries) data["carries"] = *n.carries;
        break;
      case node_type::conditional:
      case node_type::loop:
      case node_type::merge:
        if (!n.name.empty()) data["name"] = n.name;
        if (n.type == node_type::conditional) data["then"] = n.then_body, data["else"] = n.else_body;
        if (n.type == node_type::loop) {
          data["body"] = n.body;
          if (n.max_trips) data["max_trips"] = *n.max_trips;
        }
        if (n.of) data["of"] = *n.of;
        break;
    }
    put_type(data, n.value);
    json j = {{"id", n.id}, {"type", name_of(n.type)}, {"data", std::move(data)}};
    if (!n.metadata.empty()) j["metadata"] = n.metadata;
    nodes.push_back(std::move(j));
  }
  out["nodes"] = std::move(nodes);
  json edges = json::array();
  for (const auto& e : doc.edges) edges.push_back({{"source", e.source}, {"target", e.target}, {"name", e.name}, {"slot", e.slot}});
  out["edges"] = std::move(edges);
  out["inputs"] = doc.inputs;
  out["outputs"] = doc.outputs;
  return out;
}

// The document's bytes: JSON (one node or edge a line, for diffs) or MessagePack.
inline std::string encode(const document& doc, encoding enc) {
  const json j = to_json(doc);
  if (enc == encoding::msgpack) {
    const std::vector<std::uint8_t> b = json::to_msgpack(j);
    return std::string(b.begin(), b.end());
  }
  return dump_plan_json(j);  // the plan printer's layout: one element of each array of objects a line
}

inline encoding encoding_for(const std::filesystem::path& file) {
  std::string lower = file.extension().string();
  for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  return lower == ".msgpack" || lower == ".mpk" ? encoding::msgpack : encoding::json_text;
}

// Writes the document to `file`, MessagePack or JSON by its extension (encoding_for); returns the bytes written.
inline std::size_t write_file(const document& doc, const std::filesystem::path& file) {
  const std::string bytes = encode(doc, encoding_for(file));
  io::replace_file(file, std::as_bytes(std::span(bytes)));
  return bytes.size();
}

}  // namespace fused::ir
