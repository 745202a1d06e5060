// npugraph._C.dist: the collectives of npugraph::dist (docs/dist.md) for npugraph.dist
// (python/npugraph/dist.py, torch.distributed's names). The module has the same names in every
// build (so the type stubs do not depend on the build); without npugraph::dist (cmake/Dist.cmake
// defines NPUGRAPH_HAVE_DIST when it is built) is_available() is False and the rest raises
// UnsupportedError. Communicators come from an mpi4py communicator's handle (MPI._handleof), so
// MPI is initialized by mpi4py (MPI_THREAD_MULTIPLE, its default). Eager calls finish before they
// return; calls on a capturing stream are only recorded; the GIL is released around the launch.
#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstring>
#include <memory>

#include "args.hpp"
#include "bindings.hpp"
#include "convert.hpp"
#include "npugraph/error.hpp"
#if defined(NPUGRAPH_HAVE_DIST)
#include "npugraph/dist.hpp"
#endif

namespace npugraph::python {
namespace {

#if defined(NPUGRAPH_HAVE_DIST)
constexpr bool kAvailable = true;
using Comm = dist::Communicator;

template <class F>
void run(const Tensor& on, F&& f) {
  py::gil_scoped_release release;
  f();
  finish_eager(on.device());  // Note [Eager calls finish on their device]
}

std::shared_ptr<Comm> make_comm(py::handle h) {
  const std::int64_t v = int_arg(h, "handle");
  NG_CHECK_ARG(v != 0, "dist.Communicator: handle = 0: must be an MPI communicator handle "
               "(mpi4py.MPI._handleof(comm))");
  // mpi4py's handle is the MPI_Comm's value as an int: Open MPI's pointer (MPICH's int).
  static_assert(sizeof(MPI_Comm) <= sizeof(std::intptr_t));
  const auto raw = static_cast<std::intptr_t>(v);
  MPI_Comm comm;
  std::memcpy(&comm, &raw, sizeof comm);
  py::gil_scoped_release release;
  return std::make_shared<Comm>(comm);
}
int rank_of(const Comm& c) { return c.rank(); }
int size_of(const Comm& c) { return c.size(); }
bool broken_of(const Comm& c) { return c.broken(); }
std::string repr_of(const Comm& c) { return c.str(); }
double timeout_of(const Comm& c) { return static_cast<double>(c.timeout().count()) / 1000.0; }
void set_timeout_of(Comm& c, double sec) {
  c.set_timeout(std::chrono::milliseconds(std::max<std::int64_t>(1, static_cast<std::int64_t>(sec * 1000))));
}
void py_all_reduce(const Comm& c, const Tensor& t) { run(t, [&] { dist::all_reduce(c, t); }); }
void py_all_gather(const Comm& c, const Tensor& o, const Tensor& i) { run(o, [&] { dist::all_gather_out(c, i, o); }); }
void py_reduce_scatter(const Comm& c, const Tensor& o, const Tensor& i) {
  run(o, [&] { dist::reduce_scatter_out(c, i, o); });
}
#else
constexpr bool kAvailable = false;
struct Comm {};

[[noreturn]] void unsupported() {
  NG_THROW(UnsupportedError, "npugraph.dist: this npugraph was built without MPI (Open MPI: "
           "libopenmpi-dev, installed by make setup; CMake option NPUGRAPH_MPI=AUTO or ON)");
}
std::shared_ptr<Comm> make_comm(py::handle) { unsupported(); }
int rank_of(const Comm&) { unsupported(); }
int size_of(const Comm&) { unsupported(); }
bool broken_of(const Comm&) { unsupported(); }
std::string repr_of(const Comm&) { unsupported(); }
double timeout_of(const Comm&) { unsupported(); }
void set_timeout_of(Comm&, double) { unsupported(); }
void py_all_reduce(const Comm&, const Tensor&) { unsupported(); }
void py_all_gather(const Comm&, const Tensor&, const Tensor&) { unsupported(); }
void py_reduce_scatter(const Comm&, const Tensor&, const Tensor&) { unsupported(); }
#endif

}  // namespace

void bind_dist(py::module_& m) {
  py::module_ d = m.def_submodule("dist", "collectives on MPI (npugraph::dist, docs/dist.md)");
  d.def("is_available", [] { return kAvailable; }, "Whether this build has npugraph::dist (MPI).");
  py::class_<Comm, std::shared_ptr<Comm>>(d, "Communicator")
      .def(py::init([](py::handle handle) { return make_comm(handle); }), py::arg("handle"),
           "A duplicate of the MPI communicator whose handle is given (collective over it).")
      .def_property_readonly("rank", [](const Comm& c) -> int { return rank_of(c); })
      .def_property_readonly("size", [](const Comm& c) -> int { return size_of(c); })
      .def_property_readonly("broken", [](const Comm& c) -> bool { return broken_of(c); },
                             "Whether a collective on it timed out (later ones fail at once).")
      .def_property(
          "timeout", [](const Comm& c) -> double { return timeout_of(c); },
          [](Comm& c, py::handle s) {
            const double sec = float_arg(s, "timeout");
            NG_CHECK_ARG(sec > 0 && sec < 1e9, "Communicator.timeout = ", sec, ": must be seconds > 0");
            set_timeout_of(c, sec);
          },
          "Seconds a collective may wait for the other ranks before its task fails.")
      .def("__repr__", [](const Comm& c) -> std::string { return repr_of(c); });
  d.def(
      "all_reduce",
      [](const Comm& c, py::handle tensor) { py_all_reduce(c, to_tensor(tensor, "tensor")); },
      py::arg("comm"), py::arg("tensor"), "tensor = the sum over the ranks of tensor, in place.");
  d.def(
      "all_gather",
      [](const Comm& c, py::handle output, py::handle input) {
        py_all_gather(c, to_tensor(output, "output"), to_tensor(input, "input"));
      },
      py::arg("comm"), py::arg("output"), py::arg("input"),
      "output [size*m, ...] = every rank's input [m, ...] in rank order.");
  d.def(
      "reduce_scatter",
      [](const Comm& c, py::handle output, py::handle input) {
        py_reduce_scatter(c, to_tensor(output, "output"), to_tensor(input, "input"));
      },
      py::arg("comm"), py::arg("output"), py::arg("input"),
      "output [m, ...] = this rank's rows of the sum over the ranks of input [size*m, ...].");
}

}  // namespace npugraph::python
