// npugraph._C: the thin pybind11 layer over the C++ library (names mirror torch_npu).
#include "bindings.hpp"
#include "convert.hpp"

PYBIND11_MODULE(_C, m) {
  namespace py = pybind11;
  m.doc() = "npugraph: NPUGraph capture, task groups and task update on the CPU";
  npugraph::python::bind_errors(m);
  py::module_ npu = m.def_submodule("npu", "streams, events, graphs, task groups (torch.npu names)");
  npugraph::python::bind_runtime(m, npu);
  npugraph::python::bind_graph(m, npu);
  npugraph::python::bind_host_func(m, npu);
  npugraph::python::bind_fia(m);
  npugraph::python::bind_llm_ops(m);
  npugraph::python::bind_llm(m);
  npugraph::python::bind_dist(m);
  m.def("_in_internal_torch", &npugraph::python::in_internal_torch,
        "Whether this thread is inside npugraph's own use of torch (the capture's torch-op check skips it).");
}
