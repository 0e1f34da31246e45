// nlohmann::json's parser and serializer compiled once, for a C++ program whose other units define
// FUSED_JSON_EXTERN (fused/core/json_text.hpp): CMake's FUSED_KERNELS_ONCE builds it as the library
// fused_json_once, beside the kernels.
#define FUSED_JSON_IMPLEMENTATION
#include <fused/core/json_text.hpp>
