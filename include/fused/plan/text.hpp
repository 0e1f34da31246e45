// A memory plan as a table people read: the figures (arena, lower bound, their ratio, what each
// planning strategy needed), the regions, then the schedule with one row per step: schedule
// position, step id, level, op, kernel, the result's name, dtype, bound shape, bytes, region,
// offset and live range (schedule positions, inclusive). `fused plan --format text` prints it.
#pragma once
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include <fmt/format.h>

#include "../core/text_string.hpp"
#include "memory_plan.hpp"

namespace fused {

// 1234567 -> "1,234,567"
inline std::string grouped_digits(std::int64_t v) {
  const std::string d = std::to_string(v < 0 ? -v : v);
  std::string out;
  for (std::size_t i = 0; i < d.size(); ++i) {
    if (i && (d.size() - i) % 3 == 0) out += ',';
    out += d[i];
  }
  return v < 0 ? "-" + out : out;
}

// 23592960 -> "22.50 MiB"
inline std::string human_bytes(std::int64_t v) {
  const double x = static_cast<double>(v);
  if (v >= (std::int64_t{1} << 30)) return fmt::format("{:.2f} GiB", x / (1 << 30));
  if (v >= (std::int64_t{1} << 20)) return fmt::format("{:.2f} MiB", x / (1 << 20));
  if (v >= (std::int64_t{1} << 10)) return fmt::format("{:.2f} KiB", x / (1 << 10));
  return fmt::format("{} B", v);
}

// @pre m is the (verified) plan of p. `title` heads the table when not empty.
FUSED_UNOPTIMIZED inline std::string plan_to_text(const program& p, const memory_plan& m, std::string_view title = {}) {
  std::string out;
  auto line = [&](std::string_view s) { out.append(s); out += '\n'; };
  if (!title.empty()) line(fmt::format("fused plan: {}", title));
  const double ratio = m.lower_bound > 0 ? static_cast<double>(m.arena_bytes()) / static_cast<double>(m.lower_bound) : 0.0;
  line(fmt::format("activation arena {} B ({}), lower bound {} B ({}), arena / lower bound = {:.4f}", grouped_digits(m.arena_bytes()),
                   human_bytes(m.arena_bytes()), grouped_digits(m.lower_bound), human_bytes(m.lower_bound), ratio));
  const std::string first_use = m.arena_by_strategy[1] < 0 ? std::string(" = the lower bound, so greedy_by_first_use was not tried")
                                                             : fmt::format(", greedy_by_first_use {} B", grouped_digits(m.arena_by_strategy[1]));
  line(fmt::format("strategy {} (greedy_by_size {} B{}); every offset {}-byte aligned", name_of(m.chosen), grouped_digits(m.arena_by_strategy[0]),
                   first_use, mem_align));
  line("");
  line("regions");
  std::int64_t total = 0;
  for (int r = 0; r < region_count; ++r) {
    const std::int64_t b = m.region_bytes[static_cast<std::size_t>(r)];
    total += b;
    int count = 0, chains = 0;  // buffers, and in-place continuations among them (they share bytes)
    for (const auto& buf : m.buffers)
      if (buf.where == static_cast<region>(r)) {
        ++count;
        chains += buf.group != buf.tensor;
      }
    line(fmt::format("  {:<12} {:>16} B  {:>11}  {:>5} buffers ({} written in place)", name_of(static_cast<region>(r)), grouped_digits(b),
                     human_bytes(b), count, chains));
  }
  line(fmt::format("  {:<12} {:>16} B  {:>11}", "total", grouped_digits(total), human_bytes(total)));
  line("");

  // Column widths from the data, so long kernel and tensor names stay aligned.
  std::size_t w_op = 2, w_kernel = 6, w_name = 6, w_shape = 5;
  auto shape_of = [&](const tensor_info& t) {
    std::string s = "[";
    for (int i = 0; i < t.shp.rank; ++i) s += (i ? ", " : "") + std::to_string(m.bind(t.shp[i]));
    return s + "]";
  };
  for (std::size_t s = 0; s < p.steps.size(); ++s) {
    const auto& st = p.steps[s];
    const auto& t = p.tensor(st.result);
    w_op = std::max(w_op, std::string_view(st.op->name).size());
    w_kernel = std::max(w_kernel, std::string_view(s < m.kernels.size() && m.kernels[s] ? m.kernels[s] : "-").size());
    w_name = std::max(w_name, t.name.str().size());
    w_shape = std::max(w_shape, shape_of(t).size());
  }
  line(fmt::format("schedule: {} steps; live = schedule positions [first, last] of the result's buffer", p.steps.size()));
  line(fmt::format("{:>5} {:>5} {:>5}  {:<{}}  {:<{}}  {:<{}}  {:<5} {:<{}}  {:>11}  {:<11} {:>14}  {}", "pos", "step", "level", "op", w_op,
                   "kernel", w_kernel, "result", w_name, "dtype", "shape", w_shape, "bytes", "region", "offset", "live"));
  for (std::size_t s = 0; s < p.steps.size(); ++s) {
    const auto& st = p.steps[s];
    const auto& t = p.tensor(st.result);
    const auto& b = m.of(st.result);
    std::string live = fmt::format("{}..{}", b.first, b.last);
    if (b.group != b.tensor) live += fmt::format(" (in place of {})", p.tensor(b.group).name.str().view());
    line(fmt::format("{:>5} {:>5} {:>5}  {:<{}}  {:<{}}  {:<{}}  {:<5} {:<{}}  {:>11}  {:<11} {:>14}  {}", s, st.id, st.level, st.op->name,
                     w_op, s < m.kernels.size() && m.kernels[s] ? m.kernels[s] : "-", w_kernel, t.name.str().view(), w_name,
                     name_of(t.type), shape_of(t), w_shape, human_bytes(b.bytes), name_of(b.where), grouped_digits(b.offset), live));
  }
  if (!p.regions.empty()) {
    line("");
    line(fmt::format("control flow: {} region{} (a branch or a loop body each), by schedule position", p.regions.size(), p.regions.size() == 1 ? "" : "s"));
    for (std::size_t r = 0; r < p.regions.size(); ++r) {
      const region_info& g = p.regions[r];
      std::string what = fmt::format("  region {} {} at {}..{}", r, name_of(g.kind), g.first, g.end() - 1);
      if (g.parent >= 0) what += fmt::format(" in region {}", g.parent);
      const std::string condition = g.condition >= 0 ? fmt::format("'{}'", p.tensor(g.condition).name.str().view()) : std::string("-");
      if (g.kind == region_kind::then_branch) what += " if " + condition;
      if (g.kind == region_kind::loop_body) {
        what += fmt::format(" (header {} step{}) while {}, at most {} trips", g.header, g.header == 1 ? "" : "s", condition, g.max_trips);
        for (const loop_carry& c : p.carries)
          if (c.loop == static_cast<int>(r)) what += fmt::format("; '{}' <- '{}'", p.tensor(c.value).name.str().view(), p.tensor(c.next).name.str().view());
      }
      line(what);
    }
  }
  return out;
}

}  // namespace fused
