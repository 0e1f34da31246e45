// fused.hpp: the whole library in one include -- every public header of include/fused/ and the C
// kernels (fk_kernels.h).
//
// Every header under include/fused/ is listed here by name, including the ones another header
// already pulls in: scripts/amalgamate.py builds single_include/fused.hpp from this file, and it (and
// ctest's `umbrella_lists_every_header`) fails when a header is missing, so a new header cannot
// silently drop out of the single header. Add new headers to their group, keep each group sorted.
#pragma once

// the version
#include "fused/version.hpp"
// core: dtypes, shapes, constexpr sorting, text and vectors
#include "fused/core/checked_size.hpp"
#include "fused/core/dtype.hpp"
#include "fused/core/json_text.hpp"
#include "fused/core/non_finite.hpp"
#include "fused/core/shape.hpp"
#include "fused/core/shape_text.hpp"
#include "fused/core/sort.hpp"
#include "fused/core/text.hpp"
#include "fused/core/text_string.hpp"
#include "fused/core/vector.hpp"

// graph: the constexpr builder, the program, the scheduler, diagnostics
#include "fused/graph/builder.hpp"
#include "fused/graph/control.hpp"
#include "fused/graph/control_walk.hpp"
#include "fused/graph/cut_wire.hpp"
#include "fused/graph/diagnose.hpp"
#include "fused/graph/graph_error.hpp"
#include "fused/graph/program.hpp"
#include "fused/graph/reverse.hpp"
#include "fused/graph/schedule.hpp"

// ops: one header per op kind
#include "fused/ops.hpp"
#include "fused/ops/attention.hpp"
#include "fused/ops/common.hpp"
#include "fused/ops/elementwise.hpp"
#include "fused/ops/embed.hpp"
#include "fused/ops/graph_ops.hpp"
#include "fused/ops/sequence_ops.hpp"
#include "fused/ops/kv_write.hpp"
#include "fused/ops/linear.hpp"
#include "fused/ops/registry.hpp"
#include "fused/ops/adamw.hpp"
#include "fused/ops/sgd.hpp"
#include "fused/ops/causal_attention.hpp"
#include "fused/ops/cross_entropy.hpp"
#include "fused/ops/dropout.hpp"
#include "fused/ops/rms_norm.hpp"
#include "fused/ops/rope.hpp"
#include "fused/ops/take_last.hpp"

// plan: memory planning, verification, and the plan printers (JSON, text, SVG)

// train: a train step appended to a model's forward pass (loss, backward, optimizer); data-parallel sums
#include "fused/train/step.hpp"
#include "fused/train/shards.hpp"

#include "fused/plan/canaries.hpp"
#include "fused/plan/json.hpp"
#include "fused/plan/memory_plan.hpp"
#include "fused/plan/planner.hpp"
#include "fused/plan/print.hpp"
#include "fused/plan/size_check.hpp"
#include "fused/plan/static_plan.hpp"
#include "fused/plan/static_program.hpp"
#include "fused/plan/svg.hpp"
#include "fused/plan/text.hpp"
#include "fused/plan/verifier.hpp"

// ir: graph files (JSON / MessagePack), validated, lowered to programs, exported from them
#include "fused/ir/document.hpp"
#include "fused/ir/export.hpp"
#include "fused/ir/format.hpp"
#include "fused/ir/lower.hpp"
#include "fused/ir/plan.hpp"
#include "fused/ir/validate.hpp"
// runtime: plans lowered to kernel calls, sessions, weights bound by name
#include "fused/runtime/calls.hpp"
#include "fused/runtime/execute.hpp"
#include "fused/runtime/invoke.hpp"
#include "fused/runtime/session.hpp"
#include "fused/runtime/static_run.hpp"
#include "fused/runtime/weights.hpp"

// models: a generic decoder and its families (fused/<family>.hpp gathers what a user needs)
#include "fused/models/decoder_config.hpp"
#include "fused/models/decoder_config_fields.hpp"
#include "fused/models/decoder_generate.hpp"
#include "fused/models/decoder_graph.hpp"
#include "fused/models/decoder_graph_file.hpp"
#include "fused/models/decoder_limits.hpp"
#include "fused/models/decoder_mode.hpp"
#include "fused/models/decoder_model.hpp"
#include "fused/models/decoder_plan.hpp"
#include "fused/models/decoder_static_plan.hpp"
#include "fused/models/decoder_static_train.hpp"
#include "fused/models/decoder_train.hpp"
#include "fused/models/family.hpp"
#include "fused/models/hf_config.hpp"
#include "fused/models/llama.hpp"
#include "fused/models/mistral.hpp"
#include "fused/models/qwen2.hpp"
#include "fused/models/qwen2_presets.hpp"
#include "fused/models/qwen3.hpp"
#include "fused/models/registry.hpp"
#include "fused/llama.hpp"
#include "fused/mistral.hpp"
#include "fused/qwen2.hpp"
#include "fused/qwen3.hpp"

// io: Hugging Face config.json, safetensors, tokenizer.json
#include "fused/io/chat_template.hpp"
#include "fused/io/file_replace.hpp"
#include "fused/io/json_config.hpp"
#include "fused/io/load_error.hpp"
#include "fused/io/read_bounded.hpp"
#include "fused/io/safetensors.hpp"
#include "fused/io/tokenizer.hpp"
#include "fused/io/tokenizer/added_tokens.hpp"
#include "fused/io/tokenizer/bpe.hpp"
#include "fused/io/tokenizer/byte_fallback.hpp"
#include "fused/io/tokenizer/byte_level.hpp"
#include "fused/io/tokenizer/normalizer.hpp"
#include "fused/io/tokenizer/split_regex.hpp"
#include "fused/io/tokenizer/utf8.hpp"

// kernels: the C11/C++20 BF16 kernels (kernels/ on the include path)
#include <fk_kernels.h>
