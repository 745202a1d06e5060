// Tensors across the Python boundary, without copies: numpy arrays through the buffer protocol,
// torch tensors through DLPack; npugraph tensors go back as the same kind.
#pragma once

#include <pybind11/pybind11.h>

#include "npugraph/tensor.hpp"

namespace npugraph::python {

namespace py = pybind11;

// torch_npu: a torch tensor on the npu device of npugraph.compat.install(npu_device=True) (Note [The
// npu device] in npugraph/_npu_device.py): read through its host data, results given back on npu.
enum class Kind { numpy, torch, torch_npu };

// The kind of a Python tensor object; throws TypeError naming `arg` for anything else.
Kind kind_of(py::handle obj, const char* arg);
// A view of a numpy array or torch tensor (it stays alive while the view does).
Tensor to_tensor(py::handle obj, const char* arg);
// `t` as a numpy array or torch tensor sharing its memory (which stays alive while it does).
py::object from_tensor(const Tensor& t, Kind kind);
// A dtype given as a numpy dtype, a torch dtype or a name ("float16", "bfloat16", ...).
DType to_dtype(py::handle obj);
// Whether this thread is inside one of npugraph's own torch calls (from_tensor / to_tensor), which
// the capture's torch-op check ignores.
bool in_internal_torch();
// The kind a dtype object implies: torch dtypes give torch tensors, anything else numpy arrays.
Kind kind_of_dtype(py::handle obj);

}  // namespace npugraph::python
