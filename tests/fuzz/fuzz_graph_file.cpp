// libFuzzer harness: arbitrary bytes -> a graph file (JSON or MessagePack, fused/ir/format.hpp).
// Every input must end in defects of form, validation issues, or a lowered program that plans;
// anything else escaping (an exception the readers do not document, a crash, an ASan/UBSan report)
// is a bug. A document that validates must lower (the validator and the lowering agree), and
// under a binding its constraints accept, plan with a verified plan or an oversize refusal, and
// lower to kernel calls.
#include "fused/ir/format.hpp"
#include "fused/ir/lower.hpp"
#include "fused/ir/plan.hpp"
#include "fused/runtime/calls.hpp"

#include <cstddef>
#include <cstdint>
#include <map>
#include <stdexcept>
#include <string_view>

#include "harness.hpp"

namespace fuzz::graph_file {

int one_input(const std::uint8_t* data, std::size_t size) {
  const fused::ir::read_result r = fused::ir::parse(std::string_view(reinterpret_cast<const char*>(data), size));
  if (!r.ok()) {
    for (const auto& e : r.errors) check(!e.rule.empty() && !e.where.empty());
    return 0;
  }
  if (!fused::ir::validate(r.doc).empty()) return 0;
  const fused::ir::lowered g = fused::ir::lower(r.doc);  // must not throw once validated
  check(g.prog.ok());
  for (const std::int64_t value : {1, 7, 64}) {
    std::map<std::string, std::int64_t> values;
    for (const auto& s : r.doc.symbols) values[s.name] = value;
    fused::binding b{};
    try {
      b = fused::ir::bind(r.doc, values);
    } catch (const std::invalid_argument&) {
      continue;
    }
    try {
      const fused::memory_plan m = fused::ir::plan(g.prog, b);
      check(m.buffers.size() == g.prog.tensors.size());
      check(m.arena_bytes() >= m.lower_bound);
      // Every step lowers to a kernel call (an op's kernel choice and the lowering agree, e.g. on
      // which broadcasts fk_binary_f32 reads as spans).
      const auto calls = fused::runtime::lower_calls(g.prog.tensors, g.prog.steps, m.buffers, m.kernels, m.bind, g.prog.training, 0);
      check(calls.size() == g.prog.steps.size());
    } catch (const std::invalid_argument&) {
      // a tensor or region over max_region_bytes under this binding
    }
  }
  // What was read writes back and reads again as the same document.
  const std::string text = fused::ir::encode(r.doc, fused::ir::encoding::json_text);
  const fused::ir::read_result again = fused::ir::parse(text);
  check(again.ok() && fused::ir::encode(again.doc, fused::ir::encoding::json_text) == text);
  return 0;
}

}  // namespace fuzz::graph_file
