// The pieces of the _C extension module.
#pragma once

#include <pybind11/pybind11.h>

namespace npugraph::python {

namespace py = pybind11;

void bind_runtime(py::module_& m, py::module_& npu);
void bind_fia(py::module_& m);

}  // namespace npugraph::python
