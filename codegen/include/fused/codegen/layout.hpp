// The facts the C emitter prints about a c_program's layout: C names for tensors, the layout
// fingerprints, and the debug layout with canaries.
//
// Fingerprints (FNV-1a, 64 bits) let a caller tell layouts apart without comparing files:
//   layout_fingerprint   config, limits, every tensor (name, role, dtype, shape), every step (op,
//                        operands, attributes, kernel per mode), control flow (a loop's bound) and
//                        every buffer (region, offset, bytes);
//   weights_fingerprint  the weights region only (names, dtypes, shapes, offsets): a weights blob
//                        packed for one build fits every build that shares it (other MAX_SEQ/MAX_CTX).
//
// Debug layout: a canary of `canary_bytes` after every state and activation buffer, by the spine's
// transform (fused/plan/canaries.hpp: buffers moved apart, not re-planned).
#pragma once
#include <algorithm>
#include <bit>
#include <cstdint>
#include <cstdio>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include <fused/models/decoder_config_fields.hpp>
#include <fused/plan/canaries.hpp>

#include "c_program.hpp"

namespace fused::codegen {

inline std::string hex64(std::uint64_t v) {
  char buf[24];
  std::snprintf(buf, sizeof buf, "0x%016llx", static_cast<unsigned long long>(v));
  return buf;
}

inline std::string tensor_name(const tensor_info& t) { return to_string(t.name); }

// A name as text inside a C comment: a graph file may name a tensor with any UTF-8, and the
// generated C must neither break nor run what a name holds, so "*/", "/*" and "??" (a trigraph)
// are split by a space and control bytes become '?'.
inline std::string c_comment(std::string_view name) {
  std::string out;
  for (const char ch : name) {
    const auto byte = static_cast<unsigned char>(ch);
    const char prev = out.empty() ? '\0' : out.back();
    if ((prev == '*' && ch == '/') || (prev == '/' && ch == '*') || (prev == '?' && ch == '?')) out += ' ';
    out += byte < 0x20 || byte == 0x7F ? '?' : ch;
  }
  return out;
}

// A name as a C string literal, quotes included: '"', '\\' and '?' (trigraphs) escaped, and every
// byte outside printable ASCII as a three-digit octal escape (so that no digit after it joins it).
inline std::string c_string(std::string_view name) {
  std::string out = "\"";
  for (const char ch : name) {
    const auto byte = static_cast<unsigned char>(ch);
    if (ch == '"' || ch == '\\' || ch == '?') {
      out += '\\';
      out += ch;
    } else if (byte < 0x20 || byte >= 0x7F) {
      const char octal[5] = {'\\', static_cast<char>('0' + (byte >> 6)), static_cast<char>('0' + ((byte >> 3) & 7)),
                             static_cast<char>('0' + (byte & 7)), '\0'};
      out += octal;
    } else {
      out += ch;
    }
  }
  return out + "\"";
}

// The C macro holding a tensor's offset in its region (mode: activations of prefill or decode).
inline std::string offset_macro(const c_program& p, const mode_plan& m, tensor_id id) {
  const std::string pre = upper_ident(p.name);
  const buffer& b = m.of(id);
  const std::string& t = m.idents[static_cast<std::size_t>(id)];
  switch (b.where) {
    case region::weights: return pre + "_W_" + t;
    case region::state: return pre + "_STATE_" + t;
    case region::activations: return pre + "_" + upper_ident(m.mode) + "_" + t;
  }
  return {};
}

// The macro of a tensor's bytes: its offset_macro, but for the generate mode's state tensors, which
// are named by the prefill state feed on the same bytes (the KV cache's own macros).
inline std::string bytes_macro(const c_program& p, const mode_plan& m, tensor_id t) {
  const buffer& b = m.of(t);
  if (m.mode == std::string_view("generate") && b.where == region::state) return offset_macro(p, p.prefill, p.state_feed_at(b.offset));
  return offset_macro(p, m, t);
}

// The dims of a tensor as the mode binds them, e.g. "[64, 896]".
inline std::string bound_shape(const tensor_info& t, const binding& b) {
  std::string s = "[";
  for (int i = 0; i < t.shp.rank; ++i) s += (i ? ", " : "") + std::to_string(b(t.shp[i]));
  return s + "]";
}

// The config's fields as (name, value text) pairs, through Hana reflection: no second list. A
// feature a model does not use is left out (decoder::for_each_printed_field).
namespace detail {
inline std::string field_text(bool v) { return std::string(1, v ? '1' : '0'); }
inline std::string field_text(int v) { return std::to_string(v); }
inline std::string field_text(decoder::rope_kind v) { return std::to_string(static_cast<int>(v)); }
inline std::string field_text(double v) {
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}
}  // namespace detail

inline std::vector<std::pair<std::string, std::string>> config_fields(const decoder::config& c) {
  std::vector<std::pair<std::string, std::string>> out;
  decoder::for_each_printed_field(c, [&](const char* name, auto value) { out.emplace_back(name, detail::field_text(value)); });
  return out;
}

struct fnv1a {
  std::uint64_t h = 0xcbf29ce484222325ull;
  void byte(unsigned char c) { h = (h ^ c) * 0x100000001b3ull; }
  void str(std::string_view s) {
    for (char ch : s) byte(static_cast<unsigned char>(ch));
    byte(0);
  }
  void num(std::int64_t v) {
    for (int i = 0; i < 8; ++i) byte(static_cast<unsigned char>((static_cast<std::uint64_t>(v) >> (8 * i)) & 0xFF));
  }
};

namespace detail {
inline void hash_tensor(fnv1a& f, const tensor_info& t) {
  f.str(tensor_name(t));
  f.str(name_of(t.kind));
  f.str(name_of(t.type));
  f.num(t.shp.rank);
  for (int i = 0; i < t.shp.rank; ++i) {
    f.num(t.shp[i].n);
    f.num(t.shp[i].symbol);
  }
}
}  // namespace detail

inline std::uint64_t weights_fingerprint(const c_program& p) {
  fnv1a f;
  f.str("fused weights v1");
  f.num(p.weights_bytes());
  for (const auto& t : p.prefill.tensors)
    if (t.kind == role::weight) {
      detail::hash_tensor(f, t);
      f.num(p.prefill.of(t.id).offset);
    }
  return f.h;
}

inline std::uint64_t layout_fingerprint(const c_program& p) {
  fnv1a f;
  f.str("fused layout v2");
  for (const auto& [k, v] : config_fields(p.cfg)) {
    f.str(k);
    f.str(v);
  }
  f.num(p.max_seq);
  f.num(p.max_ctx);
  f.num(p.all_rows());
  for (const mode_plan* m : p.modes()) {
    f.str(m->mode);
    for (const auto& t : m->tensors) {
      detail::hash_tensor(f, t);
      const buffer& b = m->of(t.id);
      f.str(name_of(b.where));
      f.num(b.offset);
      f.num(b.bytes);
    }
    for (std::size_t i = 0; i < m->steps.size(); ++i) {
      const step& s = m->steps[i];
      f.num(s.id);
      f.str(s.op->name);
      for (int k = 0; k < s.n_inputs; ++k) f.num(s.inputs[static_cast<std::size_t>(k)]);
      f.num(s.result);
      f.str(m->kernels[i] ? m->kernels[i] : "");
      // Its attributes: a generation's stop ids live here, an eps or a rope theta too.
      for (const std::int64_t v : s.at.i) f.num(v);
      for (const double v : {s.at.f, s.at.extra[0], s.at.extra[1], s.at.extra[2]}) f.num(std::bit_cast<std::int64_t>(v));
    }
    for (const region_info& r : m->regions) {  // control flow: a loop's bound is the most tokens generated
      f.num(static_cast<std::int64_t>(r.kind));
      f.num(r.parent);
      f.num(r.condition);
      f.num(r.max_trips);
      f.num(r.first);
      f.num(r.count);
      f.num(r.header);
    }
    for (std::int64_t r : m->region_bytes) f.num(r);
  }
  return f.h;
}

// The debug layout of one region of one mode: every tensor's offset (-1 outside the region). The
// transform is the spine's (fused/plan/canaries.hpp), so a C++ executor gets the same layout.
using debug_region = canary_region;

inline debug_region with_canaries(const mode_plan& m, region r) { return canary_layout(m.buffers.data(), m.buffers.size(), r); }

}  // namespace fused::codegen
