// npugraph._C: the thin pybind11 layer over the C++ library (names mirror torch_npu).
#include "bindings.hpp"
#include "npugraph/error.hpp"

PYBIND11_MODULE(_C, m) {
  namespace py = pybind11;
  using namespace npugraph;
  m.doc() = "npugraph: NPUGraph capture, task groups and task update on the CPU";

  // Errors keep their C++ message; argument errors are ValueErrors, the rest RuntimeErrors.
  // pybind11 tries the most recently registered translator first: the base class goes first.
  py::register_exception<Error>(m, "Error", PyExc_RuntimeError);
  py::register_exception<ArgumentError>(m, "ArgumentError", PyExc_ValueError);
  py::register_exception<StateError>(m, "StateError", PyExc_RuntimeError);
  py::register_exception<TimeoutError>(m, "WaitTimeoutError", PyExc_RuntimeError);
  py::register_exception<TaskError>(m, "TaskError", PyExc_RuntimeError);
  py::register_exception<UnsupportedError>(m, "UnsupportedError", PyExc_NotImplementedError);
  py::register_exception<ResourceError>(m, "ResourceError", PyExc_MemoryError);

  py::module_ npu = m.def_submodule("npu", "streams, events, graphs, task groups (torch.npu names)");
  python::bind_runtime(m, npu);
  python::bind_fia(m);
}
