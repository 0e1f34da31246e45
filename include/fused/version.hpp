// The library's version: the one place it is written (CMakeLists.txt reads the three numbers here).
#pragma once

#define FUSED_VERSION_MAJOR 0
#define FUSED_VERSION_MINOR 2
#define FUSED_VERSION_PATCH 0

#define FUSED_VERSION_STRINGIFY_(x) #x
#define FUSED_VERSION_STRINGIFY(x) FUSED_VERSION_STRINGIFY_(x)
// "0.2.0"
#define FUSED_VERSION_STRING                                                                     \
  FUSED_VERSION_STRINGIFY(FUSED_VERSION_MAJOR) "." FUSED_VERSION_STRINGIFY(FUSED_VERSION_MINOR) "." \
  FUSED_VERSION_STRINGIFY(FUSED_VERSION_PATCH)
// One comparable number: 0.2.0 -> 200, 1.10.3 -> 11003.
#define FUSED_VERSION (FUSED_VERSION_MAJOR * 10000 + FUSED_VERSION_MINOR * 100 + FUSED_VERSION_PATCH)

static_assert(FUSED_VERSION_MINOR < 100 && FUSED_VERSION_PATCH < 100, "FUSED_VERSION packs minor and patch in two digits each");
