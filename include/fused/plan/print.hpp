// Printers of a (program, memory_plan) pair: JSON (the documented exchange format), a text table,
// and an SVG picture of the activation arena. `fused plan` prints whichever the user asks for.
#pragma once
#include "json.hpp"
#include "svg.hpp"
#include "text.hpp"
