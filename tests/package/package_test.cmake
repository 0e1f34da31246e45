# Packaging as a user meets it (ctest runs this with cmake -P):
#   MODE=install:      `cmake --install` of this build into a fresh prefix; a consumer project built with
#                      find_package(fused) against it and run on the installed default model; two
#                      sibling directories each calling find_package(fused) configured; the
#                      installed `fused` tool run from another directory (its default model installed too).
#   MODE=subdirectory: the consumer built with add_subdirectory(<fused source>) and run.
# cmake -DMODE=install|subdirectory -DSOURCE=<fused source> -DBUILD=<fused build> -DWORK=<scratch dir> -DGENERATOR=Ninja -P package_test.cmake
function(run)
  execute_process(COMMAND ${ARGN} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0)
    list(JOIN ARGN " " cmd)
    message(FATAL_ERROR "`${cmd}` failed (${rc}):\n${out}\n${err}")
  endif()
  set(out "${out}" PARENT_SCOPE)
endfunction()

file(REMOVE_RECURSE ${WORK})
file(MAKE_DIRECTORY ${WORK})
set(consumer ${SOURCE}/tests/package/consumer)
# The consumer is built unoptimized: what it tests is finding and using the package, and an -O3
# build of its one file (the runtime, tokenizer and kernels) took 31 s of g++ against 16.
set(consumer_build_type None)
if(MODE STREQUAL "install")
  set(prefix ${WORK}/prefix)
  run(${CMAKE_COMMAND} --install ${BUILD} --prefix ${prefix})
  foreach(f include/fused/version.hpp include/fused/kernels/fk_kernels.h lib/cmake/fused/fusedConfig.cmake
            share/fused/codegen/include/fused/codegen.hpp share/fused/models/kjv-qwen2-4m/model.safetensors bin/fused)
    if(NOT EXISTS ${prefix}/${f})
      message(FATAL_ERROR "cmake --install did not install ${f}")
    endif()
  endforeach()
  # Two sibling directories that each call find_package(fused): configuring and generating is the test.
  run(${CMAKE_COMMAND} -S ${SOURCE}/tests/package/siblings -B ${WORK}/siblings -G ${GENERATOR} -DCMAKE_PREFIX_PATH=${prefix})
  run(${CMAKE_COMMAND} -S ${consumer} -B ${WORK}/build -G ${GENERATOR} -DCMAKE_BUILD_TYPE=${consumer_build_type} -DCMAKE_PREFIX_PATH=${prefix})
  run(${CMAKE_COMMAND} --build ${WORK}/build)
  run(${WORK}/build/consumer ${prefix}/share/fused/models/kjv-qwen2-4m)
  message(STATUS "consumer: ${out}")
  if(NOT out MATCHES "fused [0-9]+\\.[0-9]+\\.[0-9]+")
    message(FATAL_ERROR "unexpected output: ${out}")
  endif()
  # The installed tool finds its installed default model (not the source tree's), whatever the
  # working directory.
  run(${prefix}/bin/fused --version)
  string(FIND "${out}" "default model: ${prefix}/share/fused/models/" at)
  if(at EQUAL -1)
    message(FATAL_ERROR "the installed tool does not use its installed default model: ${out}")
  endif()
  execute_process(COMMAND ${prefix}/bin/fused run -p "In the beginning" -n 6 --temp 0 WORKING_DIRECTORY ${WORK}
                  RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE err)
  if(NOT rc EQUAL 0 OR NOT out MATCHES "of the end")
    message(FATAL_ERROR "installed fused run failed (${rc}): ${out} ${err}")
  endif()
  message(STATUS "installed fused run: ${out}")
elseif(MODE STREQUAL "subdirectory")
  run(${CMAKE_COMMAND} -S ${consumer} -B ${WORK}/build -G ${GENERATOR} -DCMAKE_BUILD_TYPE=${consumer_build_type} -DUSE_SUBDIRECTORY=ON -DFUSED_SOURCE_DIR=${SOURCE})
  run(${CMAKE_COMMAND} --build ${WORK}/build)
  run(${WORK}/build/consumer ${SOURCE}/examples/models/kjv-qwen2-4m)
  message(STATUS "consumer: ${out}")
  if(NOT out MATCHES "fused [0-9]+\\.[0-9]+\\.[0-9]+")
    message(FATAL_ERROR "unexpected output: ${out}")
  endif()
else()
  message(FATAL_ERROR "MODE must be install or subdirectory")
endif()
