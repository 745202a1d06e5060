// npu_fused_infer_attention_score, its .out form and _npu_fused_infer_attention_score_get_max_workspace.
// Keyword arguments are parsed from one table (name -> setter), so each torch_npu keyword is one line.
#include <pybind11/stl.h>

#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <unordered_map>

#include "bindings.hpp"
#include "convert.hpp"
#include "dispatch.hpp"
#include "npugraph/npugraph.hpp"

namespace npugraph::python {
namespace {

std::string type_name(py::handle v) { return py::str(py::type::handle_of(v).attr("__name__")); }

// One element of an int list: a Python int (or anything with __index__, e.g. numpy integers).
long long int_element(PyObject* x, const char* name, Py_ssize_t i) {
  const long long value = PyLong_Check(x) ? PyLong_AsLongLong(x) : -1;
  if (!PyLong_Check(x)) {
    if (!PyIndex_Check(x))
      throw py::type_error(std::string(name) + "[" + std::to_string(i) + "]: expected an int, got " +
                           type_name(x));
    py::object index = py::reinterpret_steal<py::object>(PyNumber_Index(x));
    if (!index) throw py::error_already_set();
    return int_element(index.ptr(), name, i);
  }
  if (value == -1 && PyErr_Occurred()) throw py::error_already_set();
  return value;
}

// Fills `out` (reusing its storage) from an int, a list/tuple of ints, or a numpy array / torch tensor.
void assign_ints(std::vector<std::int64_t>& out, py::handle v, const char* name) {
  out.clear();
  if (v.is_none()) return;
  if (PyList_Check(v.ptr()) || PyTuple_Check(v.ptr())) {  // the common case, without iterator objects
    const bool list = PyList_Check(v.ptr());
    const Py_ssize_t n = list ? PyList_GET_SIZE(v.ptr()) : PyTuple_GET_SIZE(v.ptr());
    out.reserve(static_cast<std::size_t>(n));
    for (Py_ssize_t i = 0; i < n; ++i)
      out.push_back(int_element(list ? PyList_GET_ITEM(v.ptr(), i) : PyTuple_GET_ITEM(v.ptr(), i), name, i));
    return;
  }
  if (PyLong_Check(v.ptr())) {
    out.push_back(int_element(v.ptr(), name, 0));
    return;
  }
  if (py::hasattr(v, "tolist")) return assign_ints(out, v.attr("tolist")(), name);  // numpy / torch
  if (PyUnicode_Check(v.ptr()) || PyBytes_Check(v.ptr()) || !py::isinstance<py::sequence>(v))
    throw py::type_error(std::string(name) + ": expected a list of ints, got " + type_name(v));
  Py_ssize_t i = 0;
  for (auto x : v) out.push_back(int_element(x.ptr(), name, i++));
}

using Setter = void (*)(ops::FiaOptions&, py::handle);
// One keyword: how to parse it into options, and how to swap that field between two options.
struct Field {
  Setter set;
  FieldSwap swap;
};
#define NG_SWAP(field) [](ops::FiaOptions& a, ops::FiaOptions& b) { std::swap(a.field, b.field); }
#define NG_INT(field) \
  {#field, {[](ops::FiaOptions& o, py::handle v) { o.field = v.cast<std::int64_t>(); }, NG_SWAP(field)}}
#define NG_LIST(field) \
  {#field, {[](ops::FiaOptions& o, py::handle v) { assign_ints(o.field, v, #field); }, NG_SWAP(field)}}
#define NG_TENSOR(field)                                                                              \
  {#field, {[](ops::FiaOptions& o, py::handle v) { o.field = v.is_none() ? Tensor() : to_tensor(v, #field); }, \
            NG_SWAP(field)}}

const std::unordered_map<std::string_view, Field>& setters() {
  static const std::unordered_map<std::string_view, Field> table = {
      NG_TENSOR(pse_shift),
      NG_TENSOR(atten_mask),
      NG_LIST(actual_seq_lengths),
      NG_LIST(actual_seq_lengths_kv),
      NG_TENSOR(dequant_scale1),
      NG_TENSOR(quant_scale1),
      NG_TENSOR(dequant_scale2),
      NG_TENSOR(quant_scale2),
      NG_TENSOR(quant_offset2),
      NG_TENSOR(antiquant_scale),
      NG_TENSOR(antiquant_offset),
      NG_TENSOR(block_table),
      NG_TENSOR(query_padding_size),
      NG_TENSOR(kv_padding_size),
      NG_TENSOR(key_antiquant_scale),
      NG_TENSOR(key_antiquant_offset),
      NG_TENSOR(value_antiquant_scale),
      NG_TENSOR(value_antiquant_offset),
      NG_TENSOR(key_shared_prefix),
      NG_TENSOR(value_shared_prefix),
      NG_LIST(actual_shared_prefix_len),
      NG_TENSOR(query_rope),
      NG_TENSOR(key_rope),
      NG_TENSOR(key_rope_antiquant_scale),
      NG_INT(num_heads),
      {"scale", {[](ops::FiaOptions& o, py::handle v) { o.scale = v.cast<double>(); }, NG_SWAP(scale)}},
      NG_INT(pre_tokens),
      NG_INT(next_tokens),
      {"input_layout",
       {[](ops::FiaOptions& o, py::handle v) { o.input_layout = v.cast<std::string>(); }, NG_SWAP(input_layout)}},
      NG_INT(num_key_value_heads),
      NG_INT(sparse_mode),
      NG_INT(inner_precise),
      NG_INT(block_size),
      NG_INT(antiquant_mode),
      {"softmax_lse_flag",
       {[](ops::FiaOptions& o, py::handle v) { o.softmax_lse_flag = v.cast<bool>(); }, NG_SWAP(softmax_lse_flag)}},
      NG_INT(key_antiquant_mode),
      NG_INT(value_antiquant_mode),
  };
  return table;
}
#undef NG_INT
#undef NG_LIST
#undef NG_TENSOR
#undef NG_SWAP

// The field of keyword `key` (a str), or null. Looks the name up without copying it.
const Field* find_field(py::handle key) {
  Py_ssize_t size = 0;
  const char* text = PyUnicode_Check(key.ptr()) ? PyUnicode_AsUTF8AndSize(key.ptr(), &size) : nullptr;
  if (!text) {
    PyErr_Clear();
    return nullptr;
  }
  const auto& table = setters();
  auto it = table.find(std::string_view(text, static_cast<std::size_t>(size)));
  return it == table.end() ? nullptr : &it->second;
}


// "NPUGraph.update: cpu_update_input[3]", or the plain call's name (index < 0); built only for errors.
std::string where_text(const char* what, long index) {
  return index < 0 ? std::string(what) : std::string(what) + "[" + std::to_string(index) + "]";
}

[[noreturn]] void unexpected_keyword(const char* what, long index, py::handle key) {
  throw py::type_error(where_text(what, index) + " got an unexpected keyword argument '" +
                       std::string(py::str(key)) + "'");
}

// Applies keyword arguments to `o`; `what` and `index` name them in errors.
void apply_kwargs(ops::FiaOptions& o, py::handle dict, const char* what, long index) {
  PyObject *key, *value;
  Py_ssize_t pos = 0;
  while (PyDict_Next(dict.ptr(), &pos, &key, &value)) {
    const Field* f = find_field(key);
    if (!f) unexpected_keyword(what, index, key);
    f->set(o, value);
  }
}

ops::FiaOptions parse_options(const py::kwargs& kwargs) {
  ops::FiaOptions o;
  apply_kwargs(o, kwargs, "npu_fused_infer_attention_score()", -1);
  return o;
}

// Eager work on a normal stream returns once it ran (Note [Blocking replays from Python]).
void finish_eager() {
  const Stream s = current_stream();
  if (!s.is_capturing() && !s.is_updating()) s.synchronize();
}

struct FiaOp {};

}  // namespace

void apply_fia_kwargs(ops::FiaOptions& options, ops::FiaOptions& scratch, py::handle dict,
                      std::size_t index, std::vector<FieldSwap>& undo) {
  const char* what = "NPUGraph.update: cpu_update_input";
  const long at = static_cast<long>(index);
  if (!PyDict_Check(dict.ptr()))
    throw py::type_error(where_text(what, at) +
                         " must be a dict of fused_infer_attention_score keyword arguments, got " +
                         std::string(py::str(py::type::handle_of(dict).attr("__name__"))));
  PyObject *key, *value;
  Py_ssize_t pos = 0;
  while (PyDict_Next(dict.ptr(), &pos, &key, &value)) {
    const Field* f = find_field(key);
    if (!f) unexpected_keyword(what, at, key);
    f->set(scratch, value);    // parse first: a bad value leaves `options` as it was
    f->swap(options, scratch);  // scratch now holds the old value
    undo.push_back(f->swap);
  }
}

void bind_fia(py::module_& m) {
  py::class_<FiaOp>(m, "_FusedInferAttentionScore")
      .def("__call__", [](const FiaOp&, py::handle q, py::handle k, py::handle v, py::kwargs kwargs) {
             const Kind kind = kind_of(q, "query");
             const Tensor query = to_tensor(q, "query"), key = to_tensor(k, "key"), value = to_tensor(v, "value");
             const ops::FiaOptions o = parse_options(kwargs);
             ops::FiaResult r;
             if (DispatchRecords* d = active_dispatch(); d && current_stream().is_capturing()) {
               py::gil_scoped_release release;  // captured into its own group and recorded
               std::tie(r.attention_out, r.softmax_lse) = record_fia(*d, query, key, value, o);
             } else {
               py::gil_scoped_release release;
               r = ops::fused_infer_attention_score(query, key, value, o);
               finish_eager();
             }
             return py::make_tuple(from_tensor(r.attention_out, kind), from_tensor(r.softmax_lse, kind));
           }, py::arg("query"), py::arg("key"), py::arg("value"))
      .def("out", [](const FiaOp&, py::handle q, py::handle k, py::handle v, py::handle workspace,
                     py::sequence out, py::kwargs kwargs) {
             if (out.size() != 2)
               throw py::value_error("npu_fused_infer_attention_score.out: out must be [attention_out, softmax_lse]");
             const Tensor query = to_tensor(q, "query"), key = to_tensor(k, "key"), value = to_tensor(v, "value");
             const Tensor ws = to_tensor(workspace, "workspace");
             const Tensor attention_out = to_tensor(out[0], "out[0]"), lse = to_tensor(out[1], "out[1]");
             const ops::FiaOptions o = parse_options(kwargs);
             {
               py::gil_scoped_release release;
               ops::fused_infer_attention_score_out(query, key, value, o, ws, attention_out, lse);
               finish_eager();
             }
             return out;
           }, py::arg("query"), py::arg("key"), py::arg("value"), py::kw_only(), py::arg("workspace"),
           py::arg("out"));
  m.attr("npu_fused_infer_attention_score") = FiaOp{};
  m.def("_npu_fused_infer_attention_score_get_max_workspace",
        [](py::handle q, py::handle k, py::handle v, py::kwargs kwargs) {
          const Kind kind = kind_of(q, "query");
          const Tensor ws = ops::fia_max_workspace(to_tensor(q, "query"), to_tensor(k, "key"),
                                                   to_tensor(v, "value"), parse_options(kwargs));
          return from_tensor(ws, kind);
        }, py::arg("query"), py::arg("key"), py::arg("value"));
}

}  // namespace npugraph::python
