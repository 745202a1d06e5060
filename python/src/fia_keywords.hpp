// The keyword arguments of npu_fused_infer_attention_score(_v2): parsed from a call, or applied
// from an update dict to a recorded call's options (fia_keywords.cpp).
#pragma once

#include <cstddef>
#include <string>
#include <vector>

#include <pybind11/pybind11.h>

#include "dispatch.hpp"
#include "npugraph/npugraph.hpp"

namespace npugraph::python {

namespace py = pybind11;

// Applies keyword arguments to a fresh FiaOptions; `what` names the call in errors.
ops::FiaOptions parse_options(const py::kwargs& kwargs, const char* what, FiaNames names);

// Applies one update dict (the recorded op's keyword names) to a recorded call without copying its
// options: each value is parsed into call.staging() and staged (FiaCall::stage: swapped in, undone by
// the update's rollback). Throws TypeError/ValueError for a bad key or value, and ArgumentError ("not
// updatable") for a value that changes what the captured task cannot change.
void apply_fia_kwargs(ops::FiaCall& call, py::handle dict, std::size_t index, FiaNames names);

// The keywords the parser accepts under `names`, sorted (for the docs' check).
std::vector<std::string> fia_keywords(FiaNames names);

}  // namespace npugraph::python
