#include "args.hpp"

#include <cstring>

#include "npugraph/error.hpp"

namespace npugraph::python {
namespace {

// numpy's bool scalar type: `numpy.bool_` in numpy 1, renamed `numpy.bool` in numpy 2 (bool_ stays
// an alias of the same type).
bool is_numpy_bool(PyObject* x) {
  const char* name = Py_TYPE(x)->tp_name;
  return std::strcmp(name, "numpy.bool_") == 0 || std::strcmp(name, "numpy.bool") == 0;
}

enum class IntStatus { ok, wrong_type, overflow };

// x as an int64 without raising: ints and objects with __index__ (numpy integers, 0-d integer
// tensors); bool, numpy bool_ and floats are the wrong type.
IntStatus to_int64(PyObject* x, std::int64_t& out) {
  if (PyLong_Check(x) && !PyBool_Check(x)) {
    int overflow = 0;
    const long long v = PyLong_AsLongLongAndOverflow(x, &overflow);
    if (overflow != 0) return IntStatus::overflow;
    if (v == -1 && PyErr_Occurred()) throw py::error_already_set();
    out = v;
    return IntStatus::ok;
  }
  if (PyBool_Check(x) || is_numpy_bool(x) || PyFloat_Check(x) || !PyIndex_Check(x))
    return IntStatus::wrong_type;
  const py::object index = py::reinterpret_steal<py::object>(PyNumber_Index(x));
  if (!index) {
    PyErr_Clear();
    return IntStatus::wrong_type;
  }
  return to_int64(index.ptr(), out);
}

}  // namespace

std::string type_name(py::handle v) { return py::str(py::type::handle_of(v).attr("__name__")); }

std::string short_repr(py::handle v) {
  std::string text;
  try {
    text = py::repr(v);
  } catch (const py::error_already_set&) {
    return "<" + type_name(v) + " object>";
  }
  for (char& c : text)
    if (c == '\n') c = ' ';
  constexpr std::size_t kMax = 80;
  if (text.size() > kMax) text = text.substr(0, kMax - 3) + "...";
  return text;
}

void throw_type_error(const std::string& name, py::handle v, const char* expected) {
  throw py::type_error(name + " = " + short_repr(v) + ": expected " + expected + ", got " + type_name(v));
}

std::int64_t int_arg(py::handle v, const char* name) {
  std::int64_t out = 0;
  switch (to_int64(v.ptr(), out)) {
    case IntStatus::ok: return out;
    case IntStatus::overflow:
      NG_THROW(ArgumentError, name, " = ", short_repr(v), ": out of range for int64 (-2**63 to 2**63 - 1)");
    case IntStatus::wrong_type: break;
  }
  throw_type_error(name, v, "an int");
}

std::int64_t int_element_slow(py::handle v, const char* name, std::ptrdiff_t index) {
  if (PyErr_Occurred()) throw py::error_already_set();
  std::int64_t out = 0;
  switch (to_int64(v.ptr(), out)) {
    case IntStatus::ok: return out;
    case IntStatus::overflow:
      NG_THROW(ArgumentError, name, "[", index, "] = ", short_repr(v),
               ": out of range for int64 (-2**63 to 2**63 - 1)");
    case IntStatus::wrong_type: break;
  }
  throw py::type_error(std::string(name) + "[" + std::to_string(index) + "]: expected an int, got " +
                       type_name(v) + " (" + short_repr(v) + ")");
}

double float_arg(py::handle v, const char* name) {
  PyObject* x = v.ptr();
  if (PyFloat_Check(x)) return PyFloat_AS_DOUBLE(x);
  if (PyBool_Check(x) || is_numpy_bool(x) || PyUnicode_Check(x) || PyBytes_Check(x))
    throw_type_error(name, v, "a float");
  if (PyLong_Check(x)) {
    const double d = PyLong_AsDouble(x);
    if (d == -1.0 && PyErr_Occurred()) {
      PyErr_Clear();
      NG_THROW(ArgumentError, name, " = ", short_repr(v), ": out of range for a float (a double)");
    }
    return d;
  }
  const PyNumberMethods* number = Py_TYPE(x)->tp_as_number;
  if ((number && number->nb_float) || PyIndex_Check(x)) {  // numpy floats, 0-d tensors
    const py::object f = py::reinterpret_steal<py::object>(PyNumber_Float(x));
    if (f) return PyFloat_AS_DOUBLE(f.ptr());
    PyErr_Clear();
  }
  throw_type_error(name, v, "a float");
}

bool bool_arg(py::handle v, const char* name) {
  PyObject* x = v.ptr();
  if (PyBool_Check(x)) return x == Py_True;
  if (is_numpy_bool(x)) return PyObject_IsTrue(x) == 1;
  throw_type_error(name, v, "a bool (True or False)");
}

std::string str_arg(py::handle v, const char* name) {
  if (!PyUnicode_Check(v.ptr())) throw_type_error(name, v, "a str");
  Py_ssize_t size = 0;
  const char* text = PyUnicode_AsUTF8AndSize(v.ptr(), &size);
  if (!text) throw py::error_already_set();
  return std::string(text, static_cast<std::size_t>(size));
}

Stream stream_arg(py::handle v, const char* name) {
  if (v.is_none()) return current_stream();
  return stream_required(v, name);
}

void finish_eager(Device device) {
  const Stream& s = current_stream_ref(device);
  if (!s.is_capturing() && !s.is_updating()) s.synchronize();
}

Stream stream_required(py::handle v, const char* name) {
  if (!py::isinstance<Stream>(v)) throw_type_error(name, v, "an npugraph.npu.Stream");
  return v.cast<Stream>();
}

void rethrow_with_context(const std::string& context) {
  try {
    throw;
  } catch (const py::type_error& e) {
    throw py::type_error(context + e.what());
  } catch (const py::value_error& e) {
    throw py::value_error(context + e.what());
  } catch (const ArgumentError& e) {
    throw ArgumentError(context + e.what());
  }
}

}  // namespace npugraph::python
