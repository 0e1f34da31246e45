# fused_generate_c(<target> CONFIG <config.json> [NAME n] [MAX_SEQ s] [MAX_CTX c] [LOGITS last|all] [OUTPUT_DIR dir]
#                  [GENERATE n [STOP_IDS id...]] [EXCLUDE_FROM_ALL])
#
# Makes a C library target <target> from a model config known at build time (any family) (docs/GENERATOR.md):
#   1. fused_config_to_cpp reads config.json with fused's own loader and writes it as a constexpr
#      preset (a C++ header);
#   2. a small generator program instantiates the static model's compile-time plans and call
#      arrays for that preset (the same ones fused::decoder::static_model runs) and prints
#      <n>.h, <n>.c, memory_layout.json, graph.json (and <n>_main.c, a scorer, with LOGITS all)
#      with the C headers they include, into OUTPUT_DIR (default: <current binary dir>/<target>);
#   3. <target> is a static C library of <n>.c; its users include <n>.h.
# Regenerated when the config, the fused headers or the generator change. NAME defaults to the
# target, MAX_SEQ to 512 (most tokens one prefill call runs), MAX_CTX to 4096 (KV positions),
# LOGITS to last (prefill returns the last position's logits). The Debug configuration compiles
# <target> and its users with FUSED_DEBUG_CANARIES (the layout with canaries, checked every step).
# GENERATE n: also <n>_generate, greedy generation of up to n tokens as one program (its loop as C),
# stopping at STOP_IDS (none by default), and <n>_generate_main.c.
# EXCLUDE_FROM_ALL: built only when something asks for it.
# Target properties: FUSED_GENERATED_DIR (the directory) and FUSED_SCORER_SOURCE (<n>_main.c, with
# LOGITS all).
include_guard(DIRECTORY)  # per directory: FUSED_CODEGEN_DIR is a directory-scoped variable

# Where the generator's sources and the kernel headers are: the source tree, or an install prefix
# (share/fused/codegen and include/fused/kernels, found above lib/cmake/fused).
if(EXISTS "${CMAKE_CURRENT_LIST_DIR}/../codegen/include/fused/codegen.hpp")
  get_filename_component(FUSED_CODEGEN_DIR "${CMAKE_CURRENT_LIST_DIR}/../codegen" ABSOLUTE)
  get_filename_component(FUSED_KERNELS_DIR "${CMAKE_CURRENT_LIST_DIR}/../kernels" ABSOLUTE)
else()
  set(_fused_up "${CMAKE_CURRENT_LIST_DIR}")
  foreach(_i RANGE 4)
    get_filename_component(_fused_up "${_fused_up}/.." ABSOLUTE)
    if(EXISTS "${_fused_up}/share/fused/codegen/include/fused/codegen.hpp")
      set(FUSED_CODEGEN_DIR "${_fused_up}/share/fused/codegen")
      set(FUSED_KERNELS_DIR "${_fused_up}/include/fused/kernels")
      break()
    endif()
  endforeach()
  if(NOT FUSED_CODEGEN_DIR)
    message(FATAL_ERROR "fused_generate_c: cannot find fused's codegen sources (share/fused/codegen) above ${CMAKE_CURRENT_LIST_DIR}")
  endif()
endif()
find_package(OpenMP QUIET COMPONENTS C)

function(fused_generate_c target)
  cmake_parse_arguments(PARSE_ARGV 1 G "EXCLUDE_FROM_ALL" "CONFIG;NAME;MAX_SEQ;MAX_CTX;LOGITS;OUTPUT_DIR;GENERATE" "STOP_IDS")
  if(G_UNPARSED_ARGUMENTS)
    message(FATAL_ERROR "fused_generate_c(${target}): unknown arguments ${G_UNPARSED_ARGUMENTS}")
  endif()
  if(NOT G_CONFIG)
    message(FATAL_ERROR "fused_generate_c(${target}): CONFIG <config.json> is required")
  endif()
  get_filename_component(config "${G_CONFIG}" ABSOLUTE BASE_DIR "${CMAKE_CURRENT_SOURCE_DIR}")
  if(IS_DIRECTORY "${config}")
    set(config "${config}/config.json")
  endif()
  if(NOT EXISTS "${config}")
    message(FATAL_ERROR "fused_generate_c(${target}): ${config} does not exist")
  endif()
  if(NOT G_NAME)
    set(G_NAME ${target})
  endif()
  if(NOT G_NAME MATCHES "^[A-Za-z_][A-Za-z0-9_]*$")
    message(FATAL_ERROR "fused_generate_c(${target}): NAME '${G_NAME}' is not a C identifier")
  endif()
  if(NOT G_MAX_SEQ)
    set(G_MAX_SEQ 512)
  endif()
  if(NOT G_MAX_CTX)
    set(G_MAX_CTX 4096)
  endif()
  if(NOT G_LOGITS)
    set(G_LOGITS last)
  endif()
  if(NOT G_LOGITS MATCHES "^(last|all)$")
    message(FATAL_ERROR "fused_generate_c(${target}): LOGITS must be last or all")
  endif()
  if(NOT G_GENERATE)
    set(G_GENERATE 0)
  endif()
  foreach(id IN LISTS G_STOP_IDS)
    if(NOT id MATCHES "^[0-9]+$")
      message(FATAL_ERROR "fused_generate_c(${target}): STOP_IDS '${id}' is not a token id")
    endif()
  endforeach()
  if(G_STOP_IDS AND G_GENERATE EQUAL 0)
    message(FATAL_ERROR "fused_generate_c(${target}): STOP_IDS needs GENERATE")
  endif()
  if(NOT G_GENERATE MATCHES "^[0-9]+$")
    message(FATAL_ERROR "fused_generate_c(${target}): GENERATE '${G_GENERATE}' is not a number of tokens")
  endif()
  foreach(n MAX_SEQ MAX_CTX)
    if(NOT G_${n} MATCHES "^[1-9][0-9]*$")
      message(FATAL_ERROR "fused_generate_c(${target}): ${n} '${G_${n}}' is not a positive integer")
    endif()
  endforeach()
  if(NOT G_OUTPUT_DIR)
    set(G_OUTPUT_DIR "${CMAKE_CURRENT_BINARY_DIR}/${target}")
  endif()
  get_filename_component(out "${G_OUTPUT_DIR}" ABSOLUTE BASE_DIR "${CMAKE_CURRENT_BINARY_DIR}")
  set(work "${CMAKE_CURRENT_BINARY_DIR}/${target}.gen")

  # Stage 1, shared by every call: config.json -> constexpr preset.
  if(NOT TARGET fused_config_to_cpp)
    add_executable(fused_config_to_cpp "${FUSED_CODEGEN_DIR}/tools/config_to_cpp.cpp")
    target_link_libraries(fused_config_to_cpp PRIVATE fused::fused)
    target_compile_features(fused_config_to_cpp PRIVATE cxx_std_20)
  endif()
  set(config_hpp "${work}/fused_config.hpp")
  add_custom_command(OUTPUT "${config_hpp}"
    COMMAND "${CMAKE_COMMAND}" -E make_directory "${work}"
    COMMAND fused_config_to_cpp "${config}" "${config_hpp}"
    DEPENDS "${config}" fused_config_to_cpp
    COMMENT "fused_generate_c(${target}): ${config} -> constexpr config"
    VERBATIM)

  # Stage 2: the generator program for this config and these limits.
  set(FUSED_GEN_CONFIG_HPP "${config_hpp}")
  set(FUSED_GEN_LOGITS ${G_LOGITS})
  set(FUSED_GEN_MAX_SEQ ${G_MAX_SEQ})
  set(FUSED_GEN_MAX_CTX ${G_MAX_CTX})
  set(FUSED_GEN_NAME ${G_NAME})
  set(FUSED_GEN_GENERATE ${G_GENERATE})
  string(REPLACE ";" ", " FUSED_GEN_STOP_IDS "${G_STOP_IDS}")
  set(FUSED_GEN_OUT "${out}")
  set(FUSED_GEN_KERNELS "${FUSED_KERNELS_DIR}")
  set(FUSED_GEN_SUPPORT "${FUSED_CODEGEN_DIR}/c")
  configure_file("${FUSED_CODEGEN_DIR}/tools/generate.cpp.in" "${work}/generate.cpp" @ONLY)
  add_executable(${target}_generator "${work}/generate.cpp" "${config_hpp}")
  target_link_libraries(${target}_generator PRIVATE fused::fused)
  target_include_directories(${target}_generator PRIVATE "${FUSED_CODEGEN_DIR}/include")
  target_compile_features(${target}_generator PRIVATE cxx_std_20)

  set(outputs "${out}/${G_NAME}.h" "${out}/${G_NAME}.c" "${out}/memory_layout.json" "${out}/graph.json")
  if(G_LOGITS STREQUAL "all")
    list(APPEND outputs "${out}/${G_NAME}_main.c")
  endif()
  if(NOT G_GENERATE EQUAL 0)
    list(APPEND outputs "${out}/${G_NAME}_generate_main.c")
  endif()
  file(GLOB support_headers "${FUSED_CODEGEN_DIR}/c/*.h")
  file(GLOB kernel_headers "${FUSED_KERNELS_DIR}/fk_*.h")
  add_custom_command(OUTPUT ${outputs}
    COMMAND ${target}_generator
    DEPENDS ${target}_generator ${support_headers} ${kernel_headers}
    COMMENT "fused_generate_c(${target}): ${G_NAME}.h, ${G_NAME}.c (prefill ${G_MAX_SEQ}, KV ${G_MAX_CTX}, logits ${G_LOGITS})"
    VERBATIM)

  set(exclude "")
  if(G_EXCLUDE_FROM_ALL)
    set(exclude EXCLUDE_FROM_ALL)
    set_target_properties(${target}_generator PROPERTIES EXCLUDE_FROM_ALL ON)
  endif()
  add_library(${target} STATIC ${exclude} "${out}/${G_NAME}.c" "${out}/${G_NAME}.h")
  target_include_directories(${target} PUBLIC "${out}")
  set_target_properties(${target} PROPERTIES C_STANDARD 11 C_STANDARD_REQUIRED ON C_EXTENSIONS OFF
                                             FUSED_GENERATED_DIR "${out}")
  target_compile_definitions(${target} PUBLIC $<$<CONFIG:Debug>:FUSED_DEBUG_CANARIES>)
  if(OpenMP_C_FOUND)
    target_link_libraries(${target} PUBLIC OpenMP::OpenMP_C)
  endif()
  find_library(FUSED_LIBM m)
  if(FUSED_LIBM)
    target_link_libraries(${target} PUBLIC ${FUSED_LIBM})
  endif()
  if(G_LOGITS STREQUAL "all")
    set_target_properties(${target} PROPERTIES FUSED_SCORER_SOURCE "${out}/${G_NAME}_main.c")
  endif()
endfunction()

# In fused's own build: install what the function needs, so find_package(fused) users have it too.
if(PROJECT_NAME STREQUAL "fused" AND CMAKE_CURRENT_LIST_DIR STREQUAL "${PROJECT_SOURCE_DIR}/cmake")
  install(FILES "${CMAKE_CURRENT_LIST_FILE}" DESTINATION ${CMAKE_INSTALL_LIBDIR}/cmake/fused)
  install(DIRECTORY "${PROJECT_SOURCE_DIR}/codegen/" DESTINATION ${CMAKE_INSTALL_DATADIR}/fused/codegen)
endif()
