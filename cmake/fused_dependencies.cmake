# What fused::fused needs from the system, found the same way when fused builds and when a consumer
# calls find_package(fused) (fusedConfig.cmake includes this file). Nothing here is fatal: each
# missing dependency is appended to FUSED_MISSING_DEPENDENCIES, and the caller decides (the build
# stops with the list; find_package(fused) reports fused as not found, with the list, so that
# `find_package(fused)` without REQUIRED can fall back).
#
# PCRE2 and utf8proc are looked up with pkg-config when it is installed, else by header and library
# name: a consumer needs neither pkg-config nor a C compiler enabled. OpenMP is optional (without it
# the kernels run on one thread, with the same results) and is looked up for CXX only, so that a
# project(app LANGUAGES CXX) consumer finds fused.
# No include guard: imported targets are visible in the directory that found them only, so each
# directory that calls find_package(fused) runs the lookup (fused_find_c_library skips known targets).
set(FUSED_MISSING_DEPENDENCIES "")

find_package(Threads QUIET)
if(NOT Threads_FOUND)
  list(APPEND FUSED_MISSING_DEPENDENCIES "Threads")
endif()
find_package(nlohmann_json 3.10 QUIET)
if(NOT nlohmann_json_FOUND)
  list(APPEND FUSED_MISSING_DEPENDENCIES "nlohmann_json >= 3.10 (Debian: nlohmann-json3-dev)")
endif()
find_package(fmt 9 QUIET)
if(NOT fmt_FOUND)
  list(APPEND FUSED_MISSING_DEPENDENCIES "fmt >= 9 (Debian: libfmt-dev)")
endif()
find_package(Boost 1.75 QUIET CONFIG)  # header-only parts: Hana, PFR; Boost's own config first (CMP0167)
if(NOT Boost_FOUND)
  find_package(Boost 1.75 QUIET MODULE)
endif()
if(NOT Boost_FOUND)
  list(APPEND FUSED_MISSING_DEPENDENCIES "Boost >= 1.75 headers (Debian: libboost1.81-dev)")
endif()

# fused_find_c_library(<target> <pkg-config module> <header> <library> <Debian package>)
function(fused_find_c_library target module header library package)
  if(TARGET ${target})
    return()
  endif()
  find_package(PkgConfig QUIET)
  if(PKG_CONFIG_FOUND)
    pkg_check_modules(_fused_${library} QUIET ${module})
  endif()
  find_path(FUSED_${library}_INCLUDE_DIR ${header} HINTS ${_fused_${library}_INCLUDE_DIRS})
  find_library(FUSED_${library}_LIBRARY NAMES ${library} HINTS ${_fused_${library}_LIBRARY_DIRS})
  if(NOT FUSED_${library}_INCLUDE_DIR OR NOT FUSED_${library}_LIBRARY)
    set(FUSED_MISSING_DEPENDENCIES ${FUSED_MISSING_DEPENDENCIES} "${module} (Debian: ${package})" PARENT_SCOPE)
    return()
  endif()
  add_library(${target} UNKNOWN IMPORTED)
  set_target_properties(${target} PROPERTIES IMPORTED_LOCATION "${FUSED_${library}_LIBRARY}"
                                             INTERFACE_INCLUDE_DIRECTORIES "${FUSED_${library}_INCLUDE_DIR}")
endfunction()
fused_find_c_library(fused::pcre2 libpcre2-8 pcre2.h pcre2-8 libpcre2-dev)
fused_find_c_library(fused::utf8proc libutf8proc utf8proc.h utf8proc libutf8proc-dev)

find_package(OpenMP QUIET COMPONENTS CXX)
