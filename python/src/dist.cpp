// npugraph._C.dist: the collectives of npugraph::dist (docs/dist.md) for npugraph.dist
// (python/npugraph/dist.py, torch.distributed's names). Built only when the library has
// npugraph::dist (cmake/Dist.cmake defines NPUGRAPH_HAVE_DIST); otherwise _C has no `dist`.
// Communicators come from an mpi4py communicator's handle (MPI._handleof), so MPI is initialized
// by mpi4py (MPI_THREAD_MULTIPLE, its default). Eager calls finish before they return; calls on a
// capturing stream are only recorded; the GIL is released around the launch.
#include "bindings.hpp"

#if defined(NPUGRAPH_HAVE_DIST)
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>

#include "args.hpp"
#include "convert.hpp"
#include "npugraph/dist.hpp"
#include "npugraph/error.hpp"

namespace npugraph::python {
namespace {

template <class F>
void run(F&& f) {
  py::gil_scoped_release release;
  f();
  const Stream s = current_stream();
  if (!s.is_capturing() && !s.is_updating()) s.synchronize();
}

dist::Communicator from_handle(py::handle h) {
  const std::int64_t v = int_arg(h, "handle");
  NG_CHECK_ARG(v != 0, "dist.Communicator: handle = 0: must be an MPI communicator handle "
               "(mpi4py.MPI._handleof(comm))");
  // mpi4py's handle is the MPI_Comm's value as an int: Open MPI's pointer (MPICH's int).
  static_assert(sizeof(MPI_Comm) <= sizeof(std::intptr_t));
  const auto raw = static_cast<std::intptr_t>(v);
  MPI_Comm comm;
  std::memcpy(&comm, &raw, sizeof comm);
  py::gil_scoped_release release;
  return dist::Communicator(comm);
}

}  // namespace

void bind_dist(py::module_& m) {
  py::module_ d = m.def_submodule("dist", "collectives on MPI (npugraph::dist)");
  py::class_<dist::Communicator>(d, "Communicator")
      .def(py::init(&from_handle), py::arg("handle"),
           "A duplicate of the MPI communicator whose handle is given (collective over it).")
      .def_property_readonly("rank", &dist::Communicator::rank)
      .def_property_readonly("size", &dist::Communicator::size)
      .def_property_readonly("broken", &dist::Communicator::broken)
      .def_property("timeout",
                    [](const dist::Communicator& c) { return static_cast<double>(c.timeout().count()) / 1000.0; },
                    [](dist::Communicator& c, py::handle s) {
                      const double sec = float_arg(s, "timeout");
                      NG_CHECK_ARG(sec > 0 && sec < 1e9, "Communicator.timeout = ", sec, ": must be seconds > 0");
                      c.set_timeout(std::chrono::milliseconds(std::max<std::int64_t>(1, static_cast<std::int64_t>(sec * 1000))));
                    },
                    "Seconds a collective may wait for the other ranks before its task fails.")
      .def("__repr__", &dist::Communicator::str);
  d.def(
      "all_reduce",
      [](const dist::Communicator& c, py::handle tensor) {
        const Tensor t = to_tensor(tensor, "tensor");
        run([&] { dist::all_reduce(c, t); });
      },
      py::arg("comm"), py::arg("tensor"), "tensor = the sum over the ranks of tensor, in place.");
  d.def(
      "all_gather",
      [](const dist::Communicator& c, py::handle output, py::handle input) {
        const Tensor o = to_tensor(output, "output"), i = to_tensor(input, "input");
        run([&] { dist::all_gather_out(c, i, o); });
      },
      py::arg("comm"), py::arg("output"), py::arg("input"),
      "output [size*m, ...] = every rank's input [m, ...] in rank order.");
  d.def(
      "reduce_scatter",
      [](const dist::Communicator& c, py::handle output, py::handle input) {
        const Tensor o = to_tensor(output, "output"), i = to_tensor(input, "input");
        run([&] { dist::reduce_scatter_out(c, i, o); });
      },
      py::arg("comm"), py::arg("output"), py::arg("input"),
      "output [m, ...] = this rank's rows of the sum over the ranks of input [size*m, ...].");
}

}  // namespace npugraph::python
#else
namespace npugraph::python {
void bind_dist(py::module_&) {}
}  // namespace npugraph::python
#endif
