// Hugging Face safetensors: a validating, read-only, zero-copy reader and a small writer.
//
// File layout (https://github.com/huggingface/safetensors):
//   [8 bytes: N, u64 little-endian] [N bytes: JSON header] [data area]
// The header maps each tensor name to {"dtype", "shape", "data_offsets": [begin, end]}, offsets
// relative to the data area; an optional "__metadata__" maps strings to strings.
//
// Everything in a file is untrusted. safetensors_view::parse() checks, before any tensor is handed
// out: the header length is bounded (100 MB, as the reference implementation) and inside the file,
// the header is a JSON object no deeper than the format needs, each dtype is known, each shape is
// a list of non-negative integers whose element count times the dtype size (overflow-checked)
// equals the byte span, each span lies inside the data area, and the non-empty spans, in order,
// fill the data area exactly: no overlap, no gap, no byte past the last tensor. (The reference
// loader refuses gaps and trailing bytes too; a header length off by a few bytes shifts every
// tensor, and only the data area's size shows it.)
// Every failure is one load_error naming the file and the tensor. parse() works on a byte span so
// that the mmap path (safetensors_file::open) and the fuzz harness run exactly the same code.
//
// Weights are used in place: tensor_view::data points into the mapping. bind() is how a model
// takes its weights, once, by Hugging Face name: it checks presence, dtype, shape and alignment,
// and records the name so that unbound() can report the tensors the model did not ask for.
#pragma once
#include "../core/json_text.hpp"
#include "fused/io/file_replace.hpp"
#include "fused/io/load_error.hpp"

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include <algorithm>
#include <array>
#include <bit>
#include <cerrno>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <functional>
#include <initializer_list>
#include <limits>
#include <map>
#include <optional>
#include <span>
#include <stdexcept>
#include <string>
#include <string_view>
#include <unordered_set>
#include <utility>
#include <vector>

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

namespace fused::io {

// ---- dtypes -------------------------------------------------------------------------------------
// Enumerators are spelled as in the file format, so a message can print them as they appear there.
enum class dtype : std::uint8_t {
  BOOL, U8, I8, F8_E5M2, F8_E4M3, F8_E8M0, I16, U16, F16, BF16, I32, U32, F32, F64, I64, U64
};

namespace detail {
struct dtype_info {
  dtype type;
  std::string_view name;
  std::size_t size;
};
inline constexpr std::array<dtype_info, 16> dtype_table{{
    {dtype::BOOL, "BOOL", 1},     {dtype::U8, "U8", 1},   {dtype::I8, "I8", 1},
    {dtype::F8_E5M2, "F8_E5M2", 1}, {dtype::F8_E4M3, "F8_E4M3", 1}, {dtype::F8_E8M0, "F8_E8M0", 1},
    {dtype::I16, "I16", 2},       {dtype::U16, "U16", 2}, {dtype::F16, "F16", 2},
    {dtype::BF16, "BF16", 2},     {dtype::I32, "I32", 4}, {dtype::U32, "U32", 4},
    {dtype::F32, "F32", 4},       {dtype::F64, "F64", 8}, {dtype::I64, "I64", 8},
    {dtype::U64, "U64", 8},
}};
}  // namespace detail

constexpr std::size_t dtype_size(dtype t) noexcept {
  return detail::dtype_table[static_cast<std::size_t>(t)].size;
}
constexpr std::string_view dtype_name(dtype t) noexcept {
  return detail::dtype_table[static_cast<std::size_t>(t)].name;
}
constexpr std::optional<dtype> parse_dtype(std::string_view name) noexcept {
  for (const auto& info : detail::dtype_table)
    if (info.name == name) return info.type;
  return std::nullopt;
}
static_assert(std::ranges::all_of(detail::dtype_table, [](const detail::dtype_info& info) {
  return dtype_name(info.type) == info.name;  // the table is indexed by the enum: keep them in step
}));

// ---- the parsed file ----------------------------------------------------------------------------
// One tensor of a parsed file. `data` points into the caller's bytes (the mapping), `bytes` long.
struct tensor_view {
  std::string name;
  io::dtype dtype;
  std::vector<std::int64_t> shape;
  const std::byte* data;
  std::size_t bytes;
  std::uint64_t file_offset;  // of the first byte, from the start of the file (for messages)

  std::int64_t numel() const noexcept { return static_cast<std::int64_t>(bytes / dtype_size(dtype)); }
};

// Formats a shape the way messages print it: [896, 256].
inline std::string shape_string(std::span<const std::int64_t> shape) {
  return fmt::format("[{}]", fmt::join(shape, ", "));
}

// The header of a safetensors file parsed over bytes the caller keeps alive. Tensors are kept
// sorted by name (find is a binary search). Copyable; a copy points into the same bytes, so it must
// not outlive them (nor, when sliced from a safetensors_file, that file).
class safetensors_view {
 public:
  // The reference implementation's limit: a larger header is a corrupt or hostile file.
  static constexpr std::uint64_t max_header_bytes = 100'000'000;

  // Parses and validates `file` (the whole file's bytes). `file_name` starts every message.
  static safetensors_view parse(std::span<const std::byte> file, std::string file_name);

  const std::string& file_name() const noexcept { return file_name_; }
  std::span<const tensor_view> tensors() const noexcept { return tensors_; }
  const std::map<std::string, std::string>& metadata() const noexcept { return metadata_; }
  // Bytes from the start of the file to the data area (8 + header length).
  std::uint64_t data_offset() const noexcept { return data_offset_; }

  // The tensor called `name`, or nullptr.
  const tensor_view* find(std::string_view name) const noexcept {
    auto it = std::ranges::lower_bound(tensors_, name, {}, &tensor_view::name);
    return it != tensors_.end() && it->name == name ? &*it : nullptr;
  }

  // Takes the tensor `name` for use in place as `type` with `shape`: throws a load_error if it is
  // missing, of another dtype or shape, or not aligned to its element size in memory (kernels read
  // it as e.g. uint16_t). Marks it bound.
  const tensor_view& bind(std::string_view name, dtype type, std::span<const std::int64_t> shape) {
    const tensor_view& t = checked(name, shape);
    if (t.dtype != type)
      throw_load_error(file_name_, "tensor \"{}\" has dtype {}, the model needs {}", name,
                       dtype_name(t.dtype), dtype_name(type));
    if (t.bytes != 0 && reinterpret_cast<std::uintptr_t>(t.data) % dtype_size(type) != 0)
      throw_load_error(file_name_,
                       "tensor \"{}\" ({}) starts at file offset {}, which is not a multiple of its "
                       "element size {}; it cannot be used in place",
                       name, dtype_name(type), t.file_offset, dtype_size(type));
    return mark_bound(t);
  }
  const tensor_view& bind(std::string_view name, dtype type, std::initializer_list<std::int64_t> shape) {
    return bind(name, type, std::span<const std::int64_t>(shape.begin(), shape.size()));
  }
  // The same without a dtype requirement, for weights that will be converted (to_bf16_owned).
  const tensor_view& bind(std::string_view name, std::span<const std::int64_t> shape) {
    return mark_bound(checked(name, shape));
  }
  const tensor_view& bind(std::string_view name, std::initializer_list<std::int64_t> shape) {
    return bind(name, std::span<const std::int64_t>(shape.begin(), shape.size()));
  }

  // Names of the tensors never bound, in name order: after a model has bound all its weights,
  // these are the tensors it does not use (another architecture, a stray lm_head, ...).
  std::vector<std::string> unbound() const {
    std::vector<std::string> names;
    for (std::size_t i = 0; i < tensors_.size(); ++i)
      if (!bound_[i]) names.push_back(tensors_[i].name);
    return names;
  }
  // Throws a load_error listing the unbound tensors (at most 10 by name), if there are any.
  void require_all_bound() const {
    const std::vector<std::string> names = unbound();
    if (names.empty()) return;
    constexpr std::size_t shown = 10;
    std::string list = fmt::format("\"{}\"", fmt::join(names.begin(), names.begin() + static_cast<std::ptrdiff_t>(
                                                           std::min(names.size(), shown)), "\", \""));
    if (names.size() > shown) list += fmt::format(" and {} more", names.size() - shown);
    throw_load_error(file_name_, "{} unexpected tensor{} the model does not use: {}", names.size(),
                     names.size() == 1 ? "" : "s", list);
  }

 private:
  const tensor_view& checked(std::string_view name, std::span<const std::int64_t> shape) const {
    const tensor_view* t = find(name);
    if (t == nullptr)
      throw_load_error(file_name_, "tensor \"{}\" is missing; the model needs it with shape {}", name,
                       shape_string(shape));
    if (!std::ranges::equal(t->shape, shape))
      throw_load_error(file_name_, "tensor \"{}\" has shape {}, the model needs {}", name,
                       shape_string(t->shape), shape_string(shape));
    return *t;
  }
  const tensor_view& mark_bound(const tensor_view& t) {
    bound_[static_cast<std::size_t>(&t - tensors_.data())] = true;
    return t;
  }

  std::string file_name_;
  std::vector<tensor_view> tensors_;
  std::vector<bool> bound_;
  std::map<std::string, std::string> metadata_;
  std::uint64_t data_offset_ = 0;
};

namespace detail {

inline std::uint64_t read_u64_le(const std::byte* p) noexcept {
  std::uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | std::to_integer<std::uint64_t>(p[i]);
  return v;
}

// Bytes of a tensor of `shape` (dimensions >= 0) and `type`, or nullopt if that overflows 64 bits.
// A zero dimension makes the tensor empty whatever the others are, as in the reference
// implementation, so it is looked for before multiplying.
inline std::optional<std::uint64_t> byte_count(std::span<const std::int64_t> shape, dtype type) noexcept {
  if (std::ranges::find(shape, 0) != shape.end()) return 0;
  std::uint64_t bytes = dtype_size(type);
  for (std::int64_t d : shape)
    if (__builtin_mul_overflow(bytes, static_cast<std::uint64_t>(d), &bytes)) return std::nullopt;
  return bytes;
}

// A JSON non-negative integer as uint64, or nullopt (negative, fractional, not a number).
inline std::optional<std::uint64_t> json_uint(const nlohmann::json& j) {
  if (!j.is_number_unsigned()) return std::nullopt;  // nlohmann stores every integer >= 0 as unsigned
  return j.get<std::uint64_t>();
}

}  // namespace detail

inline safetensors_view safetensors_view::parse(std::span<const std::byte> file, std::string file_name) {
  using nlohmann::json;
  safetensors_view result;
  result.file_name_ = std::move(file_name);
  const std::string& fname = result.file_name_;

  if (file.size() < 8)
    throw_load_error(fname, "file is {} bytes, shorter than the 8-byte header length of a safetensors file",
                     file.size());
  const std::uint64_t header_bytes = detail::read_u64_le(file.data());
  if (header_bytes > max_header_bytes)
    throw_load_error(fname, "header length {} exceeds the {}-byte limit (not a safetensors file, or corrupt)",
                     header_bytes, max_header_bytes);
  if (header_bytes > file.size() - 8)
    throw_load_error(fname, "header length {} exceeds the {} bytes that follow it (truncated file?)",
                     header_bytes, file.size() - 8);
  const char* header = reinterpret_cast<const char*>(file.data() + 8);
  // nlohmann::json ends its input at a NUL, so a header padded with NULs (or cut short by one)
  // would parse: the reference loader refuses it, as must we.
  if (const void* nul = std::memchr(header, 0, static_cast<std::size_t>(header_bytes)))
    throw_load_error(fname,
                     "the header holds a NUL byte at file offset {}; a header is JSON, padded with spaces (the "
                     "reference loader refuses this file too)",
                     8 + (static_cast<const char*>(nul) - header));
  const std::span<const std::byte> data_area = file.subspan(8 + static_cast<std::size_t>(header_bytes));
  result.data_offset_ = 8 + header_bytes;

  // A valid header nests three containers deep ({name: {"shape": [...]}}); refusing deeper input
  // while parsing bounds the work a hostile header can cause. Duplicate names are refused too:
  // the JSON parser would silently keep the last one.
  std::unordered_set<std::string> names;
  const auto guard = [&](int depth, json::parse_event_t event, json& parsed) {
    if ((event == json::parse_event_t::object_start || event == json::parse_event_t::array_start) && depth > 2)
      throw_load_error(fname, "header nests deeper than a safetensors header can");
    if (event == json::parse_event_t::key && depth == 1 && !names.insert(parsed.get<std::string>()).second)
      throw_load_error(fname, "header lists tensor \"{}\" twice", parsed.get<std::string>());
    return true;
  };
  json root;
  try {
    root = json_text::parse(std::string_view(header, header_bytes), guard);
  } catch (const json::exception& e) {
    throw_load_error(fname, "header is not valid JSON: {}", json_text::reason(e));
  }
  if (!root.is_object()) throw_load_error(fname, "header is not a JSON object");

  struct span_ref {
    std::uint64_t begin, end;
    std::size_t tensor;
  };
  std::vector<span_ref> spans;
  result.tensors_.reserve(root.size());
  for (const auto& [name, entry] : root.items()) {
    if (name == "__metadata__") {
      if (!entry.is_object()) throw_load_error(fname, "\"__metadata__\" is not a JSON object");
      for (const auto& [key, value] : entry.items()) {
        if (!value.is_string())
          throw_load_error(fname, "\"__metadata__\" entry \"{}\" is not a string", key);
        result.metadata_.emplace(key, value.get<std::string>());
      }
      continue;
    }
    if (!entry.is_object()) throw_load_error(fname, "tensor \"{}\": entry is not a JSON object", name);

    const auto dt = entry.find("dtype");
    if (dt == entry.end() || !dt->is_string())
      throw_load_error(fname, "tensor \"{}\": \"dtype\" is missing or not a string", name);
    const std::optional<dtype> type = parse_dtype(dt->get_ref<const std::string&>());
    if (!type) throw_load_error(fname, "tensor \"{}\": unknown dtype {}", name, json_text::excerpt(*dt));

    const auto sh = entry.find("shape");
    if (sh == entry.end() || !sh->is_array())
      throw_load_error(fname, "tensor \"{}\": \"shape\" is missing or not a list", name);
    std::vector<std::int64_t> shape;
    shape.reserve(sh->size());
    for (const json& d : *sh) {
      const std::optional<std::uint64_t> dim = detail::json_uint(d);
      if (!dim || *dim > static_cast<std::uint64_t>(std::numeric_limits<std::int64_t>::max()))
        throw_load_error(fname, "tensor \"{}\": shape {} holds {}, not a non-negative 64-bit integer", name,
                         json_text::excerpt(*sh), json_text::excerpt(d));
      shape.push_back(static_cast<std::int64_t>(*dim));
    }
    const std::optional<std::uint64_t> expected = detail::byte_count(shape, *type);
    if (!expected)
      throw_load_error(fname, "tensor \"{}\": shape {} of {} holds more bytes than 2^64", name,
                       shape_string(shape), dtype_name(*type));
    const std::uint64_t expected_bytes = *expected;

    const auto off = entry.find("data_offsets");
    if (off == entry.end() || !off->is_array() || off->size() != 2)
      throw_load_error(fname, "tensor \"{}\": \"data_offsets\" is missing or not a list [begin, end]", name);
    const std::optional<std::uint64_t> begin = detail::json_uint((*off)[0]);
    const std::optional<std::uint64_t> end = detail::json_uint((*off)[1]);
    if (!begin || !end)
      throw_load_error(fname, "tensor \"{}\": data_offsets {} are not non-negative integers", name,
                       json_text::excerpt(*off));
    if (*end < *begin)
      throw_load_error(fname, "tensor \"{}\": data_offsets [{}, {}] end before they begin", name, *begin, *end);
    if (*end - *begin != expected_bytes)
      throw_load_error(fname, "tensor \"{}\": data_offsets [{}, {}] span {} bytes, but shape {} of {} needs {}",
                       name, *begin, *end, *end - *begin, shape_string(shape), dtype_name(*type), expected_bytes);
    if (*end > data_area.size())
      throw_load_error(fname, "tensor \"{}\": data_offsets [{}, {}] reach past the data area of {} bytes", name,
                       *begin, *end, data_area.size());

    spans.push_back({*begin, *end, result.tensors_.size()});
    result.tensors_.push_back(tensor_view{name, *type, std::move(shape),
                                          data_area.data() + static_cast<std::size_t>(*begin),
                                          static_cast<std::size_t>(expected_bytes), 8 + header_bytes + *begin});
  }

  // Sorted by begin, each non-empty span must start where the one before it ended (the first at 0),
  // and the last end where the data area does. Empty spans hold no bytes: they cannot alias anything.
  std::ranges::sort(spans, {}, [](const span_ref& s) { return std::pair(s.begin, s.end); });
  const span_ref* previous = nullptr;
  for (const span_ref& s : spans) {
    if (s.begin == s.end) continue;
    const std::uint64_t filled = previous != nullptr ? previous->end : 0;
    if (s.begin < filled)
      throw_load_error(fname, "tensor \"{}\": data_offsets [{}, {}] overlap those of tensor \"{}\" [{}, {}]",
                       result.tensors_[s.tensor].name, s.begin, s.end, result.tensors_[previous->tensor].name,
                       previous->begin, previous->end);
    if (s.begin > filled)
      throw_load_error(fname, "tensor \"{}\": data_offsets [{}, {}] leave {} bytes unused before it ({}); the tensors "
                       "must fill the data area in order (the reference loader refuses this file too)",
                       result.tensors_[s.tensor].name, s.begin, s.end, s.begin - filled,
                       previous != nullptr ? fmt::format("after tensor \"{}\" [{}, {}]", result.tensors_[previous->tensor].name,
                                                         previous->begin, previous->end)
                                           : std::string("at the data area's start"));
    previous = &s;
  }
  const std::uint64_t filled = previous != nullptr ? previous->end : 0;
  if (filled != data_area.size())
    throw_load_error(fname, "the data area holds {} bytes, but the tensors end at byte {}: {} bytes past the last tensor "
                     "(a header length that is off, or bytes appended; the reference loader refuses this file too)",
                     data_area.size(), filled, data_area.size() - filled);

  // nlohmann's object iterates in key order, so tensors_ is already sorted by name for find().
  result.bound_.assign(result.tensors_.size(), false);
  return result;
}

// ---- the mapped file ----------------------------------------------------------------------------
// A read-only private mapping of a whole file; unmapped when destroyed. Movable, not copyable.
// The mapping's address never changes, so pointers into it survive moves of this object.
// (As with any mmap, a file truncated by another process while mapped faults on access.)
class mapped_file {
 public:
  static mapped_file open(const std::filesystem::path& path) {
    const std::string name = path.string();
    // Without blocking: a FIFO (nothing to map) is refused below, not waited on for a writer.
    const int fd = ::open(name.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
    if (fd < 0) throw_load_error(name, "cannot open: {}", std::strerror(errno));
    struct stat st {};
    if (::fstat(fd, &st) != 0) {
      const int err = errno;
      ::close(fd);
      throw_load_error(name, "cannot stat: {}", std::strerror(err));
    }
    if (!S_ISREG(st.st_mode)) {
      ::close(fd);
      throw_load_error(name, "not a regular file");
    }
    mapped_file m;
    m.size_ = static_cast<std::size_t>(st.st_size);
    if (m.size_ > 0) {  // mmap of length 0 fails; an empty file maps to an empty span
      void* p = ::mmap(nullptr, m.size_, PROT_READ, MAP_PRIVATE, fd, 0);
      if (p == MAP_FAILED) {
        const int err = errno;
        ::close(fd);
        throw_load_error(name, "cannot map {} bytes: {}", m.size_, std::strerror(err));
      }
      m.data_ = static_cast<const std::byte*>(p);
    }
    ::close(fd);  // the mapping keeps the file alive
    return m;
  }

  mapped_file() noexcept = default;
  mapped_file(mapped_file&& other) noexcept
      : data_(std::exchange(other.data_, nullptr)), size_(std::exchange(other.size_, 0)) {}
  mapped_file& operator=(mapped_file&& other) noexcept {
    if (this != &other) {
      unmap();
      data_ = std::exchange(other.data_, nullptr);
      size_ = std::exchange(other.size_, 0);
    }
    return *this;
  }
  mapped_file(const mapped_file&) = delete;
  mapped_file& operator=(const mapped_file&) = delete;
  ~mapped_file() { unmap(); }

  std::span<const std::byte> bytes() const noexcept { return {data_, size_}; }

 private:
  void unmap() noexcept {
    if (data_ != nullptr) ::munmap(const_cast<std::byte*>(data_), size_);
    data_ = nullptr;
    size_ = 0;
  }
  const std::byte* data_ = nullptr;
  std::size_t size_ = 0;
};

// A safetensors file mapped into memory and validated: the view's tensors point into the mapping,
// which lives exactly as long as this object (or whatever it is moved into).
class safetensors_file : public safetensors_view {
 public:
  static safetensors_file open(const std::filesystem::path& path) {
    mapped_file map = mapped_file::open(path);
    safetensors_view view = safetensors_view::parse(map.bytes(), path.string());
    return safetensors_file(std::move(map), std::move(view));
  }
  std::span<const std::byte> bytes() const noexcept { return map_.bytes(); }

 private:
  safetensors_file(mapped_file map, safetensors_view view)
      : safetensors_view(std::move(view)), map_(std::move(map)) {}
  mapped_file map_;
};

// ---- conversions --------------------------------------------------------------------------------
namespace detail {

inline float half_to_float(std::uint16_t h) noexcept {
  const std::uint32_t sign = static_cast<std::uint32_t>(h & 0x8000u) << 16;
  const std::uint32_t exponent = (h >> 10) & 0x1Fu;
  std::uint32_t mantissa = h & 0x3FFu;
  std::uint32_t bits;
  if (exponent == 0x1F) {
    bits = sign | 0x7F800000u | (mantissa << 13);  // inf / NaN (payload kept)
  } else if (exponent != 0) {
    bits = sign | ((exponent + 112) << 23) | (mantissa << 13);  // rebias 15 -> 127
  } else if (mantissa == 0) {
    bits = sign;
  } else {  // subnormal half: normalize, every one is a normal float
    std::uint32_t e = 113;
    while ((mantissa & 0x400u) == 0) mantissa <<= 1, --e;
    bits = sign | (e << 23) | ((mantissa & 0x3FFu) << 13);
  }
  return std::bit_cast<float>(bits);
}

// float -> bf16, round to nearest, ties to even; NaN stays NaN (quiet), infinities stay infinite.
inline std::uint16_t float_to_bf16(float f) noexcept {
  const std::uint32_t bits = std::bit_cast<std::uint32_t>(f);
  if ((bits & 0x7FFFFFFFu) > 0x7F800000u) return static_cast<std::uint16_t>((bits >> 16) | 0x0040u);
  const std::uint32_t rounding = 0x7FFFu + ((bits >> 16) & 1u);
  return static_cast<std::uint16_t>((bits + rounding) >> 16);
}

inline float bf16_to_float(std::uint16_t b) noexcept {
  return std::bit_cast<float>(static_cast<std::uint32_t>(b) << 16);
}

// Element i of a view as T, read with memcpy: a view's data need not be aligned for T.
template <class T>
T load(const tensor_view& t, std::size_t i) noexcept {
  T v;
  std::memcpy(&v, t.data + i * sizeof(T), sizeof(T));
  return v;
}

}  // namespace detail

// The tensor as bf16 bit patterns (what the kernels read), from BF16 (copied), F32 or F16 (rounded
// to nearest even). For checkpoints stored in another float type than the kernels use.
inline std::vector<std::uint16_t> to_bf16_owned(const tensor_view& t) {
  const auto n = static_cast<std::size_t>(t.numel());
  std::vector<std::uint16_t> out(n);
  switch (t.dtype) {
    case dtype::BF16:
      if (n != 0) std::memcpy(out.data(), t.data, t.bytes);
      break;
    case dtype::F32:
      for (std::size_t i = 0; i < n; ++i) out[i] = detail::float_to_bf16(detail::load<float>(t, i));
      break;
    case dtype::F16:
      for (std::size_t i = 0; i < n; ++i)
        out[i] = detail::float_to_bf16(detail::half_to_float(detail::load<std::uint16_t>(t, i)));
      break;
    default:
      throw load_error(fmt::format("tensor \"{}\" has dtype {}; only BF16, F16 and F32 convert to BF16", t.name,
                                   dtype_name(t.dtype)));
  }
  return out;
}

// The tensor as float, from F32, BF16 or F16 (exact). For reference data and tests.
inline std::vector<float> to_f32_owned(const tensor_view& t) {
  const auto n = static_cast<std::size_t>(t.numel());
  std::vector<float> out(n);
  switch (t.dtype) {
    case dtype::F32:
      if (n != 0) std::memcpy(out.data(), t.data, t.bytes);
      break;
    case dtype::BF16:
      for (std::size_t i = 0; i < n; ++i) out[i] = detail::bf16_to_float(detail::load<std::uint16_t>(t, i));
      break;
    case dtype::F16:
      for (std::size_t i = 0; i < n; ++i) out[i] = detail::half_to_float(detail::load<std::uint16_t>(t, i));
      break;
    default:
      throw load_error(fmt::format("tensor \"{}\" has dtype {}; only F32, BF16 and F16 convert to F32", t.name,
                                   dtype_name(t.dtype)));
  }
  return out;
}

// The tensor as int64, from any integer dtype (exact). For token ids in reference data.
inline std::vector<std::int64_t> to_i64_owned(const tensor_view& t) {
  const auto n = static_cast<std::size_t>(t.numel());
  std::vector<std::int64_t> out(n);
  const auto convert = [&]<class T>(T) {
    for (std::size_t i = 0; i < n; ++i) out[i] = static_cast<std::int64_t>(detail::load<T>(t, i));
  };
  switch (t.dtype) {
    case dtype::I8: convert(std::int8_t{}); break;
    case dtype::U8: convert(std::uint8_t{}); break;
    case dtype::I16: convert(std::int16_t{}); break;
    case dtype::U16: convert(std::uint16_t{}); break;
    case dtype::I32: convert(std::int32_t{}); break;
    case dtype::U32: convert(std::uint32_t{}); break;
    case dtype::I64: convert(std::int64_t{}); break;
    default:  // U64 is left out: its values need not fit
      throw load_error(fmt::format("tensor \"{}\" has dtype {}; only signed integers and U8..U32 convert to I64",
                                   t.name, dtype_name(t.dtype)));
  }
  return out;
}

// ---- the writer ---------------------------------------------------------------------------------
// One tensor to write: `bytes` must hold exactly numel(shape) * dtype_size(dtype) bytes.
struct tensor_data {
  std::string name;
  io::dtype dtype;
  std::vector<std::int64_t> shape;
  std::span<const std::byte> bytes;
};

// A whole safetensors file in memory, laid out as Hugging Face does it so that every tensor can be
// used in place: the header is padded with spaces to a multiple of 8 bytes, which keeps the data
// area 8-aligned, and tensors are stored contiguously by decreasing element size (then in the
// given order), so each starts at a multiple of its own element size. Throws
// std::invalid_argument for a malformed request (duplicate or reserved name, negative dimension,
// wrong byte count).
inline std::vector<std::byte> serialize_safetensors(std::span<const tensor_data> tensors,
                                                    const std::map<std::string, std::string>& metadata = {}) {
  std::vector<const tensor_data*> layout;
  for (const tensor_data& t : tensors) layout.push_back(&t);
  std::ranges::stable_sort(layout, std::greater<>{}, [](const tensor_data* t) { return dtype_size(t->dtype); });

  nlohmann::json header = nlohmann::json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  std::uint64_t offset = 0;
  for (const tensor_data* tp : layout) {
    const tensor_data& t = *tp;
    if (t.name == "__metadata__" || header.contains(t.name))
      throw std::invalid_argument(fmt::format("write_safetensors: tensor name \"{}\" is reserved or repeated", t.name));
    if (std::ranges::any_of(t.shape, [](std::int64_t d) { return d < 0; }))
      throw std::invalid_argument(fmt::format("write_safetensors: tensor \"{}\" has a negative dimension in {}",
                                              t.name, shape_string(t.shape)));
    const std::optional<std::uint64_t> bytes = detail::byte_count(t.shape, t.dtype);
    if (!bytes || *bytes != t.bytes.size())
      throw std::invalid_argument(fmt::format("write_safetensors: tensor \"{}\" has {} bytes, shape {} of {} needs {}",
                                              t.name, t.bytes.size(), shape_string(t.shape), dtype_name(t.dtype),
                                              bytes ? fmt::to_string(*bytes) : std::string("more than 2^64")));
    header[t.name] = {{"dtype", dtype_name(t.dtype)},
                      {"shape", t.shape},
                      {"data_offsets", {offset, offset + t.bytes.size()}}};
    offset += t.bytes.size();
  }
  std::string text = json_text::dump(header);
  text.resize((text.size() + 7) / 8 * 8, ' ');

  std::vector<std::byte> file(8 + text.size() + static_cast<std::size_t>(offset));
  for (std::size_t i = 0; i < 8; ++i)
    file[i] = static_cast<std::byte>((static_cast<std::uint64_t>(text.size()) >> (8 * i)) & 0xFFu);
  std::memcpy(file.data() + 8, text.data(), text.size());
  std::byte* out = file.data() + 8 + text.size();
  for (const tensor_data* t : layout) {
    if (!t->bytes.empty()) std::memcpy(out, t->bytes.data(), t->bytes.size());
    out += t->bytes.size();
  }
  return file;
}

// Writes serialize_safetensors(tensors, metadata) to `path`, replacing a file there only once it is
// all written (replace_file); throws std::runtime_error naming the path if it cannot be written.
inline void write_safetensors(const std::filesystem::path& path, std::span<const tensor_data> tensors,
                              const std::map<std::string, std::string>& metadata = {}) {
  replace_file(path, serialize_safetensors(tensors, metadata));
}
inline void write_safetensors(const std::filesystem::path& path, std::initializer_list<tensor_data> tensors,
                              const std::map<std::string, std::string>& metadata = {}) {
  write_safetensors(path, std::span<const tensor_data>(tensors.begin(), tensors.size()), metadata);
}

}  // namespace fused::io
