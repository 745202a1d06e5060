// The keyword arguments of npu_fused_infer_attention_score and _v2, from a call or an update dict:
// one table (name -> setter) per op's names, so each torch_npu keyword is one line. v2 names the
// same options differently (actual_seq_kvlen for actual_seq_lengths_kv, softmax_scale for scale,
// ...): its table maps each v2 name to v1's field.
#include "fia_keywords.hpp"

#include <algorithm>
#include <initializer_list>
#include <string>
#include <string_view>
#include <unordered_map>
#include <utility>

#include "args.hpp"
#include "convert.hpp"

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

// v2 keywords not supported here: accepted when None (or 0 for a mode), refused otherwise.
#define NG_UNSUPPORTED(name, rule)                                                          \
  {#name, {[](ops::FiaOptions&, py::handle v) {                                             \
             if (v.is_none() || (PyLong_Check(v.ptr()) && !PyBool_Check(v.ptr()) && int_arg(v, #name) == 0)) \
               return;                                                                      \
             NG_THROW(ArgumentError, #name, " = ", short_repr(v), ": not supported by npugraph (" rule \
                      "); pass None or leave it out");                                       \
           },                                                                               \
           [](ops::FiaOptions&, ops::FiaOptions&) {}}}

// npu_fused_infer_attention_score_v2's keywords: the same options under v2's names (v1's name
// second), learnable_sink (v2 only), and those of its features npugraph does not have.
const std::unordered_map<std::string_view, Field>& v2_setters() {
  static const std::unordered_map<std::string_view, Field> table = [] {
    const auto& v1 = setters();
    std::unordered_map<std::string_view, Field> t;
    for (const auto& [v2_name, v1_name] : std::initializer_list<std::pair<std::string_view, std::string_view>>{
             {"query_rope", "query_rope"}, {"key_rope", "key_rope"}, {"pse_shift", "pse_shift"},
             {"atten_mask", "atten_mask"}, {"actual_seq_qlen", "actual_seq_lengths"},
             {"actual_seq_kvlen", "actual_seq_lengths_kv"}, {"block_table", "block_table"},
             {"dequant_scale_key", "key_antiquant_scale"}, {"dequant_offset_key", "key_antiquant_offset"},
             {"dequant_scale_value", "value_antiquant_scale"},
             {"dequant_offset_value", "value_antiquant_offset"},
             {"dequant_scale_key_rope", "key_rope_antiquant_scale"}, {"quant_scale_out", "quant_scale2"},
             {"quant_offset_out", "quant_offset2"}, {"key_shared_prefix", "key_shared_prefix"},
             {"value_shared_prefix", "value_shared_prefix"},
             {"actual_shared_prefix_len", "actual_shared_prefix_len"}, {"num_query_heads", "num_heads"},
             {"num_key_value_heads", "num_key_value_heads"}, {"softmax_scale", "scale"},
             {"pre_tokens", "pre_tokens"}, {"next_tokens", "next_tokens"}, {"input_layout", "input_layout"},
             {"sparse_mode", "sparse_mode"}, {"block_size", "block_size"},
             {"key_quant_mode", "key_antiquant_mode"}, {"value_quant_mode", "value_antiquant_mode"},
             {"inner_precise", "inner_precise"}, {"return_softmax_lse", "softmax_lse_flag"}})
      t.emplace(v2_name, v1.at(v1_name));
    for (auto&& [name, field] : std::initializer_list<std::pair<std::string_view, Field>>{
             NG_UNSUPPORTED(dequant_scale_query, "int8 query dequantisation"),
             NG_TENSOR(learnable_sink),  // v2 only (FiaOptions::learnable_sink)
             NG_UNSUPPORTED(query_quant_mode, "int8 query"),
             NG_UNSUPPORTED(query_dtype, "the dtypes are the tensors' own"),
             NG_UNSUPPORTED(key_dtype, "the dtypes are the tensors' own"),
             NG_UNSUPPORTED(value_dtype, "the dtypes are the tensors' own"),
             NG_UNSUPPORTED(query_rope_dtype, "the dtypes are the tensors' own"),
             NG_UNSUPPORTED(key_rope_dtype, "the dtypes are the tensors' own"),
             NG_UNSUPPORTED(key_shared_prefix_dtype, "the dtypes are the tensors' own"),
             NG_UNSUPPORTED(value_shared_prefix_dtype, "the dtypes are the tensors' own"),
             NG_UNSUPPORTED(out_dtype, "the output has the query's dtype")})
      t.emplace(name, field);
    return t;
  }();
  return table;
}
#undef NG_UNSUPPORTED
#undef NG_TENSOR
#undef NG_SWAP

// _npu_paged_attention's update keywords (its call reaches FIA with v1's names).
const std::unordered_map<std::string_view, Field>& paged_setters() {
  static const std::unordered_map<std::string_view, Field> table = [] {
    const auto& v1 = setters();
    return std::unordered_map<std::string_view, Field>{{"context_lens", v1.at("actual_seq_lengths_kv")},
                                                       {"block_table", v1.at("block_table")},
                                                       {"scale_value", v1.at("scale")}};
  }();
  return table;
}

using Table = std::unordered_map<std::string_view, Field>;

// The keywords of a call made with `names`...
const Table& call_table(FiaNames names) { return names == FiaNames::v2 ? v2_setters() : setters(); }
// ...and of its update dicts.
const Table& update_table(FiaNames names) {
  switch (names) {
    case FiaNames::v2: return v2_setters();
    case FiaNames::paged: return paged_setters();
    case FiaNames::v1: break;
  }
  return setters();
}

std::string_view key_text(py::handle key) {
  Py_ssize_t size = 0;
  const char* text = PyUnicode_Check(key.ptr()) ? PyUnicode_AsUTF8AndSize(key.ptr(), &size) : nullptr;
  if (!text) {
    PyErr_Clear();
    return {};
  }
  return {text, static_cast<std::size_t>(size)};
}

// The field of keyword `key` (a str) in `table`, or null. Looks the name up without copying it.
const Field* find_field(py::handle key, const Table& table) {
  const std::string_view text = key_text(key);
  if (text.empty()) return nullptr;
  auto it = table.find(text);
  return it == table.end() ? nullptr : &it->second;
}

// A keyword of one of the other ops: an update dict may carry it (torch_npu ignores the keys a
// recorded call lacks), and it is skipped.
bool other_ops_keyword(py::handle key) {
  const std::string_view text = key_text(key);
  return !text.empty() && (setters().contains(text) || v2_setters().contains(text) ||
                           paged_setters().contains(text));
}

// "NPUGraph.update: cpu_update_input[3]", or the plain call's name (index < 0); built only for errors.
std::string where_text(const char* what, long index) {
  return index < 0 ? std::string(what) : std::string(what) + "[" + std::to_string(index) + "]";
}

[[noreturn]] void unexpected_keyword(const char* what, long index, py::handle key) {
  throw py::type_error(where_text(what, index) + " got an unexpected keyword argument '" +
                       std::string(py::str(key)) + "'");
}

// "what: " for v1 (its setters name the keyword); "what: softmax_scale: " for v2, whose keyword the
// setter's message names by v1's name.
std::string context_of(const std::string& what, FiaNames names, py::handle key) {
  return names == FiaNames::v1 ? what + ": " : what + ": " + std::string(py::str(key)) + ": ";
}

}  // namespace

std::vector<std::string> fia_keywords(FiaNames names) {
  std::vector<std::string> out;
  for (const auto& [name, field] : call_table(names)) out.emplace_back(name);
  std::sort(out.begin(), out.end());
  return out;
}

ops::FiaOptions parse_options(const py::kwargs& kwargs, const char* what, FiaNames names) {
  ops::FiaOptions o;
  PyObject *key, *value;
  Py_ssize_t pos = 0;
  while (PyDict_Next(kwargs.ptr(), &pos, &key, &value)) {
    const Field* f = find_field(key, call_table(names));
    if (!f) unexpected_keyword((std::string(what) + "()").c_str(), -1, key);
    try {
      f->set(o, value);
    } catch (...) {
      rethrow_with_context(context_of(what, names, key));
    }
  }
  return o;
}

void apply_fia_kwargs(ops::FiaCall& call, py::handle dict, std::size_t index, FiaNames names) {
  const char* what = "NPUGraph.update: cpu_update_input";
  const long at = static_cast<long>(index);
  if (!PyDict_Check(dict.ptr()))
    throw py::type_error(where_text(what, at) +
                         " must be a dict of fused_infer_attention_score keyword arguments, got " +
                         type_name(dict));
  const ops::FiaOptions& options = call.options();
  ops::FiaOptions& scratch = call.staging();
  PyObject *key, *value;
  Py_ssize_t pos = 0;
  while (PyDict_Next(dict.ptr(), &pos, &key, &value)) {
    const Field* f = find_field(key, update_table(names));
    if (!f) {
      if (other_ops_keyword(key)) continue;  // as torch_npu, which ignores keys its record lacks
      unexpected_keyword(what, at, key);
    }
    try {
      f->set(scratch, value);  // parse first: a bad value leaves `options` as it was
    } catch (...) {
      rethrow_with_context(context_of(where_text(what, at), names, key));
    }
    if (f->differs && f->differs(options, scratch)) [[unlikely]]
      NG_THROW(ArgumentError, where_text(what, at), ": ", std::string(py::str(key)), " = ",
               short_repr(value), ": not updatable (captured with ", f->describe(options),
               "). An update may change actual_seq_lengths, actual_seq_lengths_kv, "
               "actual_shared_prefix_len, scale, pre_tokens and next_tokens (v2: actual_seq_qlen, "
               "actual_seq_kvlen, softmax_scale), and point a tensor argument at other memory of the "
               "same shape and dtype; capture the graph again for anything else");
    call.stage(f->swap, /*host_value=*/!f->differs);  // only the host values have no `differs`
  }
}

}  // namespace npugraph::python
