// The exception for a program that cannot run or cannot be planned as given (run time only; at
// compile time the same mistakes are static_assert sentences, fused/graph/diagnose.hpp). Its own
// header so that the run-time planner can throw it without the cut-wire report's includes.
#pragma once
#include <stdexcept>

namespace fused {

// A program that cannot run as given. what() is the full (possibly multi-line) report.
struct graph_error : std::runtime_error {
  using std::runtime_error::runtime_error;
};

}  // namespace fused
