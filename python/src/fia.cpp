// npu_fused_infer_attention_score, its .out form and _npu_fused_infer_attention_score_get_max_workspace,
// and the FIA side of auto-dispatch capture (Note [Auto-dispatch capture] in dispatch.hpp): a call
// recorded into its own group, and the recorded calls' update. Keyword arguments are parsed from
// one table (name -> setter), so each torch_npu keyword is one line, whether it comes from a call
// or from an update dict.
#include <pybind11/stl.h>

#include <algorithm>
#include <memory>
#include <string>
#include <string_view>
#include <tuple>
#include <utility>
#include <unordered_map>

#include "args.hpp"
#include "bindings.hpp"
#include "convert.hpp"
#include "dispatch.hpp"
#include "npugraph/npugraph.hpp"

namespace npugraph::python {
namespace {

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
  if (PyLong_Check(v.ptr()) && !PyBool_Check(v.ptr())) {
    out.push_back(int_arg(v, name));
    return;
  }
  if (py::hasattr(v, "tolist")) {  // numpy / torch
    py::object values = v.attr("tolist")();
    if (PyList_Check(values.ptr())) return assign_ints(out, values, name);
    out.push_back(int_arg(values, name));  // a 0-d array
    return;
  }
  if (PyUnicode_Check(v.ptr()) || PyBytes_Check(v.ptr()) || !py::isinstance<py::sequence>(v))
    throw py::type_error(std::string(name) + ": expected a list of ints, got " + type_name(v) + " (" +
                         short_repr(v) + ")");
  Py_ssize_t i = 0;
  for (auto x : v) out.push_back(int_element(x, name, i++));
}

using Setter = void (*)(ops::FiaOptions&, py::handle);
// Whether a and b differ in the field in a way an update cannot install; the captured value as text.
using Differs = bool (*)(const ops::FiaOptions& a, const ops::FiaOptions& b);
using Describe = std::string (*)(const ops::FiaOptions&);
// One keyword: how to parse it into options, how to swap that field between two options, and for
// what an update may not change (Update rules in npugraph/ops/fia.hpp), how to tell and show it.
struct Field {
  Setter set;
  FieldSwap swap;
  Differs differs = nullptr;  // null: any value is updatable
  Describe describe = nullptr;
};

std::string tensor_text(const Tensor& t) { return t.defined() ? t.str() : "None"; }
// A tensor argument may point at other memory, not change its presence, dtype or shape.
bool tensor_differs(const Tensor& a, const Tensor& b) {
  if (a.defined() != b.defined()) return true;
  return a.defined() && (a.dtype() != b.dtype() || !(a.shape() == b.shape()));
}

#define NG_SWAP(field) [](ops::FiaOptions& a, ops::FiaOptions& b) { std::swap(a.field, b.field); }
#define NG_DIFFERS(field) [](const ops::FiaOptions& a, const ops::FiaOptions& b) { return a.field != b.field; }
#define NG_INT(field) \
  {#field, {[](ops::FiaOptions& o, py::handle v) { o.field = int_arg(v, #field); }, NG_SWAP(field)}}
#define NG_FIXED_INT(field)                                                                          \
  {#field, {[](ops::FiaOptions& o, py::handle v) { o.field = int_arg(v, #field); }, NG_SWAP(field), \
            NG_DIFFERS(field), [](const ops::FiaOptions& o) { return std::to_string(o.field); }}}
#define NG_LIST(field) \
  {#field, {[](ops::FiaOptions& o, py::handle v) { assign_ints(o.field, v, #field); }, NG_SWAP(field)}}
#define NG_TENSOR(field)                                                                              \
  {#field, {[](ops::FiaOptions& o, py::handle v) { o.field = v.is_none() ? Tensor() : to_tensor(v, #field); }, \
            NG_SWAP(field),                                                                           \
            [](const ops::FiaOptions& a, const ops::FiaOptions& b) { return tensor_differs(a.field, b.field); }, \
            [](const ops::FiaOptions& o) { return tensor_text(o.field); }}}

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
      NG_FIXED_INT(num_heads),
      {"scale", {[](ops::FiaOptions& o, py::handle v) { o.scale = float_arg(v, "scale"); }, NG_SWAP(scale)}},
      NG_INT(pre_tokens),
      NG_INT(next_tokens),
      {"input_layout",
       {[](ops::FiaOptions& o, py::handle v) { o.input_layout = str_arg(v, "input_layout"); },
        NG_SWAP(input_layout), NG_DIFFERS(input_layout),
        [](const ops::FiaOptions& o) { return "'" + o.input_layout + "'"; }}},
      NG_FIXED_INT(num_key_value_heads),
      NG_FIXED_INT(sparse_mode),
      NG_FIXED_INT(inner_precise),
      NG_FIXED_INT(block_size),
      NG_FIXED_INT(antiquant_mode),
      {"softmax_lse_flag",
       {[](ops::FiaOptions& o, py::handle v) { o.softmax_lse_flag = bool_arg(v, "softmax_lse_flag"); },
        NG_SWAP(softmax_lse_flag), NG_DIFFERS(softmax_lse_flag),
        [](const ops::FiaOptions& o) { return std::string(o.softmax_lse_flag ? "True" : "False"); }}},
      NG_FIXED_INT(key_antiquant_mode),
      NG_FIXED_INT(value_antiquant_mode),
  };
  return table;
}
#undef NG_INT
#undef NG_FIXED_INT
#undef NG_DIFFERS
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

// Applies keyword arguments to `o`; `what` names the call in errors.
ops::FiaOptions parse_options(const py::kwargs& kwargs, const char* what) {
  ops::FiaOptions o;
  PyObject *key, *value;
  Py_ssize_t pos = 0;
  while (PyDict_Next(kwargs.ptr(), &pos, &key, &value)) {
    const Field* f = find_field(key);
    if (!f) unexpected_keyword((std::string(what) + "()").c_str(), -1, key);
    try {
      f->set(o, value);
    } catch (...) {
      rethrow_with_context(std::string(what) + ": ");
    }
  }
  return o;
}

constexpr const char* kFia = "npu_fused_infer_attention_score";
constexpr const char* kFiaOut = "npu_fused_infer_attention_score.out";
constexpr const char* kFiaWorkspace = "_npu_fused_infer_attention_score_get_max_workspace";

// out=[attention_out, softmax_lse] of the .out form.
std::pair<Tensor, Tensor> out_arg(py::handle out) {
  if (!PyList_Check(out.ptr()) && !PyTuple_Check(out.ptr()))
    throw_type_error(std::string(kFiaOut) + ": out", out, "a list [attention_out, softmax_lse]");
  const py::sequence seq = py::reinterpret_borrow<py::sequence>(out);
  if (seq.size() != 2)
    NG_THROW(ArgumentError, kFiaOut, ": out has ", seq.size(),
             " tensors: must be [attention_out, softmax_lse]");
  return {to_tensor(seq[0], "out[0]"), to_tensor(seq[1], "out[1]")};
}

struct FiaOp {};

// Applies one update dict (FIA keyword names) to `options` without copying them: each value is
// parsed into `scratch` and swapped in, and the swap is appended to `undo` — applying it again to
// (options, scratch) restores the old value. Throws TypeError/ValueError for a bad key or value, and
// ArgumentError ("not updatable") for a value that changes what the captured task cannot change.
// Returns whether it set host values only (no tensor, no static option).
bool apply_fia_kwargs(ops::FiaOptions& options, ops::FiaOptions& scratch, py::handle dict,
                      std::size_t index, std::vector<FieldSwap>& undo) {
  const char* what = "NPUGraph.update: cpu_update_input";
  const long at = static_cast<long>(index);
  if (!PyDict_Check(dict.ptr()))
    throw py::type_error(where_text(what, at) +
                         " must be a dict of fused_infer_attention_score keyword arguments, got " +
                         type_name(dict));
  PyObject *key, *value;
  Py_ssize_t pos = 0;
  bool host_only = true;
  while (PyDict_Next(dict.ptr(), &pos, &key, &value)) {
    const Field* f = find_field(key);
    if (!f) unexpected_keyword(what, at, key);
    host_only = host_only && !f->differs;  // only the host values have no `differs`
    try {
      f->set(scratch, value);  // parse first: a bad value leaves `options` as it was
    } catch (...) {
      rethrow_with_context(where_text(what, at) + ": ");
    }
    if (f->differs && f->differs(options, scratch)) [[unlikely]]
      NG_THROW(ArgumentError, where_text(what, at), ": ", std::string(py::str(key)), " = ",
               short_repr(value), ": not updatable (captured with ", f->describe(options),
               "). An update may change actual_seq_lengths, actual_seq_lengths_kv, "
               "actual_shared_prefix_len, scale, pre_tokens and next_tokens, and point a tensor argument "
               "at other memory of the same shape and dtype; capture the graph again for anything else");
    f->swap(options, scratch);  // scratch now holds the old value
    undo.push_back(f->swap);
  }
  return host_only;
}

}  // namespace

std::optional<std::pair<Tensor, Tensor>> record_fia(DispatchRecords& d, const Tensor& query,
                                                    const Tensor& key, const Tensor& value,
                                                    const ops::FiaOptions& options) {
  std::lock_guard lock(d.mutex);
  mark_busy(d, "recording a call into");
  NG_CHECK_STATE(!d.dead, "npu_fused_infer_attention_score: graph ", d.graph_id,
                 " was reset (g.reset()) during its auto-dispatch capture, which ended it; the call is "
                 "not recorded (capture the graph again)");
  const Stream s = current_stream(query.device());
  if (!s.is_capturing()) return std::nullopt;  // e.g. inside `with npugraph.npu.stream(other):`
  // One plan for the workspace size, the outputs and the launch.
  const ops::FiaPlan plan = ops::fia_plan(query, key, value, options);
  FiaRecord r{query, key, value, options, {}, {}, {}, {}, ExternalEvent("fia record " + std::to_string(d.records.size()))};
  const std::int64_t need = plan.workspace_bytes();
  auto it = std::find_if(d.workspaces.begin(), d.workspaces.end(),
                         [&](const auto& w) { return w.first == s.id(); });
  if (it == d.workspaces.end()) {
    d.workspaces.emplace_back(s.id(), Tensor());
    it = d.workspaces.end() - 1;
  }
  if (!it->second.defined() || it->second.numel() < need)  // earlier calls keep their smaller one
    it->second = empty({need}, DType::u8, query.device());
  r.workspace = it->second;
  r.attention_out = empty(plan.out_shape(), plan.out_dtype(), query.device());
  r.softmax_lse = options.softmax_lse_flag ? empty(plan.lse_shape(), DType::f32, query.device())
                                           : zeros({1}, DType::f32, query.device());
  r.event.wait(s);
  r.event.reset(s);
  task_group_begin(s);
  ops::fused_infer_attention_score_out(plan, r.workspace, r.attention_out, r.softmax_lse);
  r.handle = task_group_end(s);
  d.handles.push_back(r.handle);
  d.events.push_back(r.event);
  d.records.push_back(std::move(r));
  d.count.store(d.records.size());
  return std::pair{d.records.back().attention_out, d.records.back().softmax_lse};
}

void update_fia_records(DispatchRecords& d, py::handle cpu_update_input) {
  if (!py::isinstance<py::list>(cpu_update_input) && !py::isinstance<py::tuple>(cpu_update_input))
    throw py::type_error("NPUGraph.update: cpu_update_input must be a list of dicts, got " +
                         type_name(cpu_update_input) + " (" + short_repr(cpu_update_input) + ")");
  const py::sequence inputs = py::reinterpret_borrow<py::sequence>(cpu_update_input);
  const std::size_t n = d.records.size(), given = inputs.size();
  NG_CHECK_ARG(given == 1 || given == n, "NPUGraph.update: cpu_update_input has ", given,
               " dicts: pass one per recorded call (", n, ") or one for all");
  // The new values are swapped into the records' options field by field (no copies); on any error
  // the same swaps, undone in reverse, restore every recorded argument.
  d.staging.resize(n);
  d.host_only.assign(n, 1);
  d.undo.clear();
  std::vector<FieldSwap>& swaps = d.swaps;
  auto rollback = [&] {
    for (auto it = d.undo.rbegin(); it != d.undo.rend(); ++it)
      it->second(d.records[it->first].options, d.staging[it->first]);
    d.undo.clear();
  };
  try {
    for (std::size_t i = 0; i < n; ++i) {
      swaps.clear();
      try {
        d.host_only[i] = apply_fia_kwargs(d.records[i].options, d.staging[i],
                                          inputs[given == 1 ? 0 : i], given == 1 ? 0 : i, swaps);
      } catch (...) {
        for (FieldSwap f : swaps) d.undo.emplace_back(i, f);
        throw;
      }
      for (FieldSwap f : swaps) d.undo.emplace_back(i, f);
    }
    py::gil_scoped_release release;
    const Stream& u = d.update_stream;
    StreamGuard on(u);
    task_update_begin(u, d.handles);
    for (std::size_t i = 0; i < n; ++i) {
      const FiaRecord& r = d.records[i];
      if (r.captured_inputs && d.host_only[i])
        ops::fused_infer_attention_score_update(u, ops::FiaHostValues::of(r.options));
      else
        ops::fused_infer_attention_score_out(r.query, r.key, r.value, r.options, r.workspace,
                                             r.attention_out, r.softmax_lse);
    }
    // One stream task installs every call's parameters, then sets every call's event.
    task_update_end(u, d.events);
  } catch (...) {
    abandon_update_on_error(d.update_stream);  // a failed call installs nothing
    rollback();
    throw;
  }
  d.undo.clear();
  for (std::size_t i = 0; i < n; ++i)
    if (!d.host_only[i]) d.records[i].captured_inputs = false;
}

void bind_fia(py::module_& m) {
  py::class_<FiaOp>(m, "_FusedInferAttentionScore",
                    "torch_npu's npu_fused_infer_attention_score(query, key, value, **kwargs) -> "
                    "(attention_out, softmax_lse); .out(..., workspace=, out=[attention_out, softmax_lse])")
      .def("__call__", [](const FiaOp&, py::handle q, py::handle k, py::handle v, py::kwargs kwargs) {
             const Kind kind = kind_of(q, "query");
             const Tensor query = to_tensor(q, "query"), key = to_tensor(k, "key"), value = to_tensor(v, "value");
             const ops::FiaOptions o = parse_options(kwargs, kFia);
             ops::FiaResult r;
             std::shared_ptr<DispatchRecords> d = active_dispatch();
             bool recorded = false;
             if (d) {
               py::gil_scoped_release release;  // captured into its own group and recorded
               if (auto outs = record_fia(*d, query, key, value, o)) {
                 std::tie(r.attention_out, r.softmax_lse) = *outs;
                 recorded = true;
               }
             }
             if (!recorded) {
               py::gil_scoped_release release;
               r = ops::fused_infer_attention_score(query, key, value, o);
               finish_eager(query.device());
             }
             return py::make_tuple(from_tensor(r.attention_out, kind), from_tensor(r.softmax_lse, kind));
           }, py::arg("query"), py::arg("key"), py::arg("value"))
      .def("out", [](const FiaOp&, py::handle q, py::handle k, py::handle v, py::handle workspace,
                     py::handle out, py::kwargs kwargs) {
             const Tensor query = to_tensor(q, "query"), key = to_tensor(k, "key"), value = to_tensor(v, "value");
             const Tensor ws = to_tensor(workspace, "workspace");
             const auto [attention_out, lse] = out_arg(out);
             const ops::FiaOptions o = parse_options(kwargs, kFiaOut);
             {
               py::gil_scoped_release release;
               ops::fused_infer_attention_score_out(query, key, value, o, ws, attention_out, lse);
               finish_eager(query.device());
             }
             return py::reinterpret_borrow<py::object>(out);
           }, py::arg("query"), py::arg("key"), py::arg("value"), py::kw_only(), py::arg("workspace"),
           py::arg("out"),
           "out(query, key, value, *, workspace, out=[attention_out, softmax_lse], **keywords) -> out: "
           "writes caller-owned outputs with a caller-owned workspace "
           "(_npu_fused_infer_attention_score_get_max_workspace); the form task groups capture and "
           "updates re-issue. Keywords and errors: help(npugraph.npu_fused_infer_attention_score).")
      .def("__repr__", [](const FiaOp&) { return std::string("<npugraph op npu_fused_infer_attention_score>"); });
  m.attr("npu_fused_infer_attention_score") = FiaOp{};
  m.def("_fia_keywords", [] {
    std::vector<std::string> names;
    for (const auto& [name, field] : setters()) names.emplace_back(name);
    std::sort(names.begin(), names.end());
    return names;
  }, "The keywords the FIA parser accepts (sorted), for the docs' check.");
  m.def(kFiaWorkspace,
        [](py::handle q, py::handle k, py::handle v, py::kwargs kwargs) {
          const Kind kind = kind_of(q, "query");
          const Tensor ws = ops::fia_max_workspace(to_tensor(q, "query"), to_tensor(k, "key"),
                                                   to_tensor(v, "value"), parse_options(kwargs, kFiaWorkspace));
          return from_tensor(ws, kind);
        }, py::arg("query"), py::arg("key"), py::arg("value"),
        "The workspace (uint8) the .out form needs for the worst case of these shapes.");
}

}  // namespace npugraph::python
