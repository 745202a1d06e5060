// npu_fused_infer_attention_score, its .out form and _npu_fused_infer_attention_score_get_max_workspace.
// Keyword arguments are parsed from one table (name -> setter), so each torch_npu keyword is one line.
#include <pybind11/stl.h>

#include <string_view>
#include <unordered_map>

#include "bindings.hpp"
#include "convert.hpp"
#include "npugraph/npugraph.hpp"

namespace npugraph::python {
namespace {

std::vector<std::int64_t> int_list(py::handle v, const char* name) {
  std::vector<std::int64_t> out;
  if (v.is_none()) return out;
  if (py::isinstance<py::int_>(v)) return {v.cast<std::int64_t>()};
  if (py::hasattr(v, "tolist")) return int_list(v.attr("tolist")(), name);  // numpy / torch
  if (!py::isinstance<py::sequence>(v))
    throw py::type_error(std::string(name) + ": expected a list of ints, got " +
                         std::string(py::str(py::type::handle_of(v).attr("__name__"))));
  for (auto x : v) out.push_back(x.cast<std::int64_t>());
  return out;
}

using Setter = void (*)(ops::FiaOptions&, py::handle);
#define NG_INT(field) {#field, [](ops::FiaOptions& o, py::handle v) { o.field = v.cast<std::int64_t>(); }}
#define NG_LIST(field) {#field, [](ops::FiaOptions& o, py::handle v) { o.field = int_list(v, #field); }}
#define NG_TENSOR(field) \
  {#field, [](ops::FiaOptions& o, py::handle v) { o.field = v.is_none() ? Tensor() : to_tensor(v, #field); }}

const std::unordered_map<std::string_view, Setter>& setters() {
  static const std::unordered_map<std::string_view, Setter> table = {
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
      {"scale", [](ops::FiaOptions& o, py::handle v) { o.scale = v.cast<double>(); }},
      NG_INT(pre_tokens),
      NG_INT(next_tokens),
      {"input_layout", [](ops::FiaOptions& o, py::handle v) { o.input_layout = v.cast<std::string>(); }},
      NG_INT(num_key_value_heads),
      NG_INT(sparse_mode),
      NG_INT(inner_precise),
      NG_INT(block_size),
      NG_INT(antiquant_mode),
      {"softmax_lse_flag", [](ops::FiaOptions& o, py::handle v) { o.softmax_lse_flag = v.cast<bool>(); }},
      NG_INT(key_antiquant_mode),
      NG_INT(value_antiquant_mode),
  };
  return table;
}
#undef NG_INT
#undef NG_LIST
#undef NG_TENSOR

ops::FiaOptions parse_options(const py::kwargs& kwargs) {
  ops::FiaOptions o;
  const auto& table = setters();
  for (auto [key, value] : kwargs) {
    const std::string name = py::str(key);
    auto it = table.find(name);
    if (it == table.end())
      throw py::type_error("npu_fused_infer_attention_score() got an unexpected keyword argument '" + name + "'");
    it->second(o, value);
  }
  return o;
}

// Eager work on a normal stream returns once it ran (Note [Blocking replays from Python]).
void finish_eager() {
  const Stream s = current_stream();
  if (!s.is_capturing() && !s.is_updating()) s.synchronize();
}

struct FiaOp {};

}  // namespace

void bind_fia(py::module_& m) {
  py::class_<FiaOp>(m, "_FusedInferAttentionScore")
      .def("__call__", [](const FiaOp&, py::handle q, py::handle k, py::handle v, py::kwargs kwargs) {
             const Kind kind = kind_of(q, "query");
             const Tensor query = to_tensor(q, "query"), key = to_tensor(k, "key"), value = to_tensor(v, "value");
             const ops::FiaOptions o = parse_options(kwargs);
             ops::FiaResult r;
             {
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
