// The C generator: a Qwen2 program planned by fused, printed as standalone C11 (docs/GENERATOR.md).
#pragma once
#include "codegen/c_program.hpp"
#include "codegen/layout.hpp"
#include "codegen/emit_c.hpp"
#include "codegen/emit_json.hpp"
#include "codegen/write.hpp"
#include "codegen/emit_program_c.hpp"
#include "codegen/emit_train_c.hpp"
