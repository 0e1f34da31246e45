// A memory plan as a picture (SVG): the activation arena over the schedule.
//   x = schedule position (a step per column), y = offset in the arena (0 at the bottom);
//   one box per activation buffer, spanning the positions [first, last] it is live and the bytes
//   [offset, offset + bytes) it holds, colored by the category of the op that writes it
//   (op_def::category; "input" for buffers the caller fills); a <title> on each box gives its name,
//   size, offset and live steps (a tooltip in browsers);
//   a dashed line at the lower bound (the most bytes live at any one step), a legend, axis labels.
// Buffers of one in-place chain are drawn one after the other at the same offset.
// Weights and state are not drawn: they live for the whole call, their sizes are in the caption.
// Control flow (program::regions): each branch or loop body is a faint band behind the buffers over
// the positions of its steps, labelled ("loop 0, at most 11 trips", "then 1", "else 2") and titled
// with its condition.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <fmt/format.h>

#include "../core/text_string.hpp"
#include "memory_plan.hpp"

namespace fused {

// Text safe inside an XML element or a double-quoted attribute.
inline std::string xml_escape(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  for (const char c : s) {
    switch (c) {
      case '&': out += "&amp;"; break;
      case '<': out += "&lt;"; break;
      case '>': out += "&gt;"; break;
      case '"': out += "&quot;"; break;
      case '\'': out += "&apos;"; break;
      default:
        // Control characters other than tab/newline are not allowed in XML 1.0 at all.
        if (static_cast<unsigned char>(c) < 0x20 && c != '\t' && c != '\n') out += ' ';
        else out += c;
    }
  }
  return out;
}

namespace detail {

// The category a buffer is colored by: its writer's op category, or "input" for a caller-filled one.
inline const char* svg_category(const program& p, const scratch<int>& position_of_step, tensor_id t) {
  const auto& ti = p.tensor(t);
  if (ti.producer < 0) return "input";
  return p.steps[static_cast<std::size_t>(position_of_step[static_cast<std::size_t>(ti.producer)])].op->category;
}

inline const char* svg_color(std::string_view category, std::size_t fallback_index) {
  if (category == "matmul") return "#4e79a7";
  if (category == "attention") return "#e15759";
  if (category == "norm") return "#59a14f";
  if (category == "elementwise") return "#f28e2b";
  if (category == "memory") return "#b07aa1";
  if (category == "input") return "#9c755f";
  constexpr const char* others[] = {"#76b7b2", "#edc948", "#ff9da7", "#bab0ac"};
  return others[fallback_index % 4];
}

// A round tick step (1, 2 or 5 times a power of ten) giving about `want` ticks over [0, max].
inline double svg_tick(double max, int want) {
  if (max <= 0) return 1;
  const double raw = max / want;
  const double p10 = std::pow(10.0, std::floor(std::log10(raw)));
  for (const double f : {1.0, 2.0, 5.0})
    if (raw <= f * p10) return f * p10;
  return 10 * p10;
}

// Bytes in the axis unit: KiB below 1 MiB of arena, MiB otherwise.
struct svg_unit {
  double scale;
  const char* name;
};
inline svg_unit svg_unit_for(std::int64_t arena) {
  return arena >= (std::int64_t{1} << 20) ? svg_unit{1 << 20, "MiB"} : svg_unit{1 << 10, "KiB"};
}

}  // namespace detail

// @pre m is the (verified) plan of p. `title` is drawn above the plot when not empty.
FUSED_UNOPTIMIZED inline std::string plan_to_svg(const program& p, const memory_plan& m, std::string_view title = {}) {
  constexpr double width = 1280, height = 720, left = 90, right = 190, top = 56, bottom = 64;
  constexpr double plot_w = width - left - right, plot_h = height - top - bottom;
  const std::size_t ns = std::max<std::size_t>(p.steps.size(), 1);
  const std::int64_t arena = std::max<std::int64_t>(m.arena_bytes(), 1);
  const double sx = plot_w / static_cast<double>(ns);
  const double sy = plot_h / static_cast<double>(arena);
  const detail::svg_unit unit = detail::svg_unit_for(arena);
  auto y_of = [&](std::int64_t offset) { return top + plot_h - static_cast<double>(offset) * sy; };

  std::string o;
  auto add = [&](std::string s) { o += s; o += '\n'; };
  add(fmt::format(R"(<svg xmlns="http://www.w3.org/2000/svg" width="{}" height="{}" viewBox="0 0 {} {}" font-family="sans-serif" font-size="12">)",
                  width, height, width, height));
  add(R"(<rect x="0" y="0" width="100%" height="100%" fill="white"/>)");
  if (!title.empty()) add(fmt::format(R"(<text x="{}" y="22" font-size="16" font-weight="bold">{}</text>)", left, xml_escape(title)));
  const double ratio = m.lower_bound > 0 ? static_cast<double>(m.arena_bytes()) / static_cast<double>(m.lower_bound) : 0.0;
  add(fmt::format(R"(<text x="{}" y="42">activation arena {} B, lower bound {} B (arena / lower bound = {:.4f}, {}); weights {} B, state {} B (not drawn)</text>)",
                  left, m.arena_bytes(), m.lower_bound, ratio, name_of(m.chosen), m.region_bytes[static_cast<std::size_t>(region::weights)],
                  m.region_bytes[static_cast<std::size_t>(region::state)]));

  // Axes, ticks and grid.
  add(fmt::format(R"(<g stroke="#dddddd" stroke-width="0.5">)"));
  const double ytick = detail::svg_tick(static_cast<double>(arena) / unit.scale, 8);
  std::string ylabels;
  for (double v = 0; v * unit.scale <= static_cast<double>(arena) + 0.5; v += ytick) {
    const double y = y_of(static_cast<std::int64_t>(v * unit.scale));
    add(fmt::format(R"(<line x1="{:.1f}" y1="{:.1f}" x2="{:.1f}" y2="{:.1f}"/>)", left, y, left + plot_w, y));
    ylabels += fmt::format(R"(<text x="{:.1f}" y="{:.1f}" text-anchor="end">{:g}</text>)", left - 6, y + 4, v) + "\n";
  }
  const double xtick = detail::svg_tick(static_cast<double>(ns), 10);
  std::string xlabels;
  for (double v = 0; v <= static_cast<double>(ns) + 0.5; v += xtick) {
    const double x = left + v * sx;
    add(fmt::format(R"(<line x1="{:.1f}" y1="{:.1f}" x2="{:.1f}" y2="{:.1f}"/>)", x, top, x, top + plot_h));
    xlabels += fmt::format(R"(<text x="{:.1f}" y="{:.1f}" text-anchor="middle">{:g}</text>)", x, top + plot_h + 16, v) + "\n";
  }
  add("</g>");
  o += ylabels;
  o += xlabels;
  add(fmt::format(R"(<rect x="{}" y="{}" width="{}" height="{}" fill="none" stroke="#444444" stroke-width="1"/>)", left, top, plot_w, plot_h));
  add(fmt::format(R"(<text x="{:.1f}" y="{:.1f}" text-anchor="middle">schedule position (step)</text>)", left + plot_w / 2, height - 22));
  add(fmt::format(R"~(<text x="{:.1f}" y="{:.1f}" text-anchor="middle" transform="rotate(-90 {:.1f} {:.1f})">offset in the activation arena ({})</text>)~",
                  24.0, top + plot_h / 2, 24.0, top + plot_h / 2, unit.name));

  // Control flow: a band per region over its positions, behind the buffers; nested labels stack.
  for (std::size_t r = 0; r < p.regions.size(); ++r) {
    const region_info& reg = p.regions[r];
    if (reg.count == 0) continue;
    int depth = 0;
    for (int a = reg.parent; a >= 0; a = p.regions[static_cast<std::size_t>(a)].parent) ++depth;
    const bool loop = reg.kind == region_kind::loop_body;
    const char* color = loop ? "#4e79a7" : reg.kind == region_kind::then_branch ? "#59a14f" : "#e15759";
    const std::string label = loop ? fmt::format("loop {}, at most {} trips", r, reg.max_trips)
                                   : fmt::format("{} {}", reg.kind == region_kind::then_branch ? "then" : "else", r);
    const std::string condition = reg.condition >= 0 ? ", condition '" + std::string(p.tensor(reg.condition).name.str().view()) + "'" : std::string();
    const double x = left + static_cast<double>(reg.first) * sx, w = static_cast<double>(reg.count) * sx;
    add(fmt::format(R"(<rect class="region" x="{:.2f}" y="{}" width="{:.2f}" height="{}" fill="{}" fill-opacity="0.08" stroke="{}" stroke-dasharray="3 3"><title>{}: positions {}..{}{}</title></rect>)",
                    x, top, w, plot_h, color, color, xml_escape(label), reg.first, reg.end() - 1, xml_escape(condition)));
    add(fmt::format(R"(<text x="{:.2f}" y="{:.1f}" font-size="10" fill="{}">{}</text>)", x + 3, top + 12 + 12 * depth, color, xml_escape(label)));
  }

  // Buffers.
  std::vector<std::string> categories;  // in order of first appearance, for the legend
  auto category_index = [&](std::string_view c) {
    for (std::size_t i = 0; i < categories.size(); ++i)
      if (categories[i] == c) return i;
    categories.emplace_back(c);
    return categories.size() - 1;
  };
  const scratch<int> pos = p.position_of_step();
  add(R"(<g stroke="white" stroke-width="0.25">)");
  for (const auto& b : m.buffers) {
    if (b.where != region::activations) continue;
    const auto& t = p.tensor(b.tensor);
    const char* cat = detail::svg_category(p, pos, b.tensor);
    const std::size_t ci = category_index(cat);
    const double x = left + static_cast<double>(b.first) * sx, w = static_cast<double>(b.last - b.first + 1) * sx;
    const double y = y_of(b.offset + b.bytes), h = std::max(static_cast<double>(b.bytes) * sy, 0.5);
    add(fmt::format(R"(<rect class="buffer" x="{:.2f}" y="{:.2f}" width="{:.2f}" height="{:.2f}" fill="{}"><title>{} ({}): {} B at offset {}, live at positions {}..{}</title></rect>)",
                    x, y, w, h, detail::svg_color(cat, ci), xml_escape(t.name.str().view()), xml_escape(cat), b.bytes, b.offset, b.first, b.last));
  }
  add("</g>");

  // The lower bound: no plan can use fewer bytes than are live at the busiest step.
  const double ylb = y_of(m.lower_bound);
  add(fmt::format(R"(<line x1="{}" y1="{:.2f}" x2="{}" y2="{:.2f}" stroke="black" stroke-width="1.2" stroke-dasharray="6 4"><title>lower bound: {} B</title></line>)",
                  left, ylb, left + plot_w, ylb, m.lower_bound));
  add(fmt::format(R"(<text x="{:.1f}" y="{:.2f}" font-size="11">lower bound</text>)", left + plot_w + 6, ylb + 4));

  // Legend.
  const double lx = left + plot_w + 24;
  double ly = top + 30;
  add(fmt::format(R"(<text x="{}" y="{}" font-weight="bold">written by</text>)", lx, ly));
  for (std::size_t i = 0; i < categories.size(); ++i) {
    ly += 20;
    add(fmt::format(R"(<rect class="legend" x="{}" y="{}" width="14" height="14" fill="{}"/>)", lx, ly - 11, detail::svg_color(categories[i], i)));
    add(fmt::format(R"(<text x="{}" y="{}">{}</text>)", lx + 20, ly, xml_escape(categories[i])));
  }
  ly += 26;
  add(fmt::format(R"(<line x1="{}" y1="{}" x2="{}" y2="{}" stroke="black" stroke-width="1.2" stroke-dasharray="6 4"/>)", lx, ly - 4, lx + 14, ly - 4));
  add(fmt::format(R"(<text x="{}" y="{}">lower bound</text>)", lx + 20, ly));
  add("</svg>");
  return o;
}

}  // namespace fused
