// The pieces of the _C extension module.
#pragma once

#include <string>

#include <pybind11/pybind11.h>

namespace npugraph::python {

namespace py = pybind11;

// npugraph.Error and its subclasses, and the translator that raises them (errors.cpp).
void bind_errors(py::module_& m);
// A library message with C++ advice rewritten for Python (Note [C++ advice in Python errors]).
std::string python_message(std::string message);

void bind_runtime(py::module_& m, py::module_& npu);  // streams, events, memory (runtime.cpp)
void bind_graph(py::module_& m, py::module_& npu);    // NPUGraph, graph(), task groups (graph.cpp)
void bind_host_func(py::module_& m, py::module_& npu);  // launch_host_func (host_func.cpp)
void bind_fia(py::module_& m);
void bind_llm_ops(py::module_& m);  // the decode engine's ops, QuantWeight (llm_ops.cpp)
void bind_llm(py::module_& m);  // npugraph.llm: the decode engine (llm.cpp)
void bind_dist(py::module_& m);  // _C.dist, when built with npugraph::dist (dist.cpp)

}  // namespace npugraph::python
