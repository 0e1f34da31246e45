# Runs one compile of a compile-fail (or control) source and checks the compiler's verdict.
#   cmake -DCXX=<compiler> -DSRC=<file.cpp> -DINCLUDES=<dir|dir> -DEXPECT=<regex|regex> -DSHOULD_FAIL=ON|OFF -P compile_check.cmake
# The output is normalized before matching, so one expected sentence fits every compiler: g++ and
# clang escape quotes in template arguments (\'), and clang prints a long message as word-wrapped
# diagnostic_line{"..."} pieces (fused/graph/diagnose.hpp), which are joined back into one line.
string(REPLACE "|" ";" _includes "${INCLUDES}")
set(_args -std=c++20 -fsyntax-only)
foreach(dir IN LISTS _includes)
  list(APPEND _args -I${dir})
endforeach()
execute_process(COMMAND ${CXX} ${_args} ${SRC} RESULT_VARIABLE rc OUTPUT_VARIABLE out ERROR_VARIABLE out)
if(SHOULD_FAIL)
  if(rc EQUAL 0)
    message(FATAL_ERROR "${SRC} compiled with ${CXX}, but it must not")
  endif()
elseif(NOT rc EQUAL 0)
  message(FATAL_ERROR "${SRC} must compile with ${CXX}, but:\n${out}")
endif()
string(REPLACE "\\'" "'" norm "${out}")
string(REGEX REPLACE " *\"}, diagnostic_line{\"" " " norm "${norm}")
string(REGEX REPLACE "  +" " " norm "${norm}")
string(REPLACE "|" ";" _expect "${EXPECT}")
foreach(re IN LISTS _expect)
  if(NOT norm MATCHES "${re}")
    message(FATAL_ERROR "${SRC} with ${CXX}: the output lacks /${re}/:\n${out}")
  endif()
endforeach()
message(STATUS "${SRC} with ${CXX}: as expected")
