// npu_fused_infer_attention_score and npu_fused_infer_attention_score_v2, their .out forms and
// get_max_workspace functions, and the FIA side of auto-dispatch capture (Note [Auto-dispatch
// capture] in dispatch.hpp): a call (either form) recorded into its own group, and the recorded
// calls' update. Keyword arguments: fia_keywords.cpp.
#include <pybind11/stl.h>

#include <algorithm>
#include <memory>
#include <string>
#include <tuple>
#include <utility>

#include "args.hpp"
#include "bindings.hpp"
#include "convert.hpp"
#include "dispatch.hpp"
#include "fia_keywords.hpp"
#include "npugraph/npugraph.hpp"

namespace npugraph::python {
namespace {


// One op's names: torch_npu's v1 or v2 (the same op under other keyword names).
struct FiaOp {
  FiaNames names;
  const char* name;      // "npu_fused_infer_attention_score"
  const char* out_name;  // "npu_fused_infer_attention_score.out"
};

// A distinct C++ type per op, for pybind11's one class per type.
template <FiaNames N>
struct FiaOpOf : FiaOp {};

// out=[attention_out, softmax_lse] of the .out form.
std::pair<Tensor, Tensor> out_arg(py::handle out, const char* what) {
  if (!PyList_Check(out.ptr()) && !PyTuple_Check(out.ptr()))
    throw_type_error(std::string(what) + ": out", out, "a list [attention_out, softmax_lse]");
  const py::sequence seq = py::reinterpret_borrow<py::sequence>(out);
  if (seq.size() != 2)
    NG_THROW(ArgumentError, what, ": out has ", seq.size(), " tensors: must be [attention_out, softmax_lse]");
  return {to_tensor(seq[0], "out[0]"), to_tensor(seq[1], "out[1]")};
}

py::object call_fia(const FiaOp& op, py::handle q, py::handle k, py::handle v, const py::kwargs& kwargs) {
  const Kind kind = kind_of(q, "query");
  const Tensor query = to_tensor(q, "query"), key = to_tensor(k, "key"), value = to_tensor(v, "value");
  const ops::FiaOptions o = parse_options(kwargs, op.name, op.names);
  ops::FiaResult r;
  std::shared_ptr<DispatchRecords> d = active_dispatch();
  bool recorded = false;
  if (d) {
    py::gil_scoped_release release;  // captured into its own group and recorded
    if (auto outs = d->fia.record(d->updates, query, key, value, o, static_cast<std::uint8_t>(op.names),
                                  nullptr, op.name)) {
      r = std::move(*outs);
      recorded = true;
    }
  }
  if (!recorded) {
    py::gil_scoped_release release;
    r = ops::fused_infer_attention_score(query, key, value, o);
    finish_eager(query.device());
  }
  return py::make_tuple(from_tensor(r.attention_out, kind), from_tensor(r.softmax_lse, kind));
}

// The .out form; without a workspace it uses one sized for the call (in a recorded call, the
// graph's shared one).
py::object call_fia_out(const FiaOp& op, py::handle q, py::handle k, py::handle v, py::handle workspace,
                        py::handle out, const py::kwargs& kwargs) {
  const Tensor query = to_tensor(q, "query"), key = to_tensor(k, "key"), value = to_tensor(v, "value");
  ops::FiaOutBuffers given;
  if (!workspace.is_none()) given.workspace = to_tensor(workspace, "workspace");
  std::tie(given.attention_out, given.softmax_lse) = out_arg(out, op.out_name);
  const ops::FiaOptions o = parse_options(kwargs, op.out_name, op.names);
  std::shared_ptr<DispatchRecords> d = active_dispatch();
  {
    py::gil_scoped_release release;
    if (d && d->fia.record(d->updates, query, key, value, o, static_cast<std::uint8_t>(op.names), &given,
                           op.out_name)) {
      // recorded: its task writes `out` on every replay
    } else if (given.workspace.defined()) {
      ops::fused_infer_attention_score_out(query, key, value, o, given.workspace, given.attention_out,
                                           given.softmax_lse);
      finish_eager(query.device());
    } else {
      const ops::FiaPlan plan = ops::fia_plan(query, key, value, o);
      const Tensor ws = empty({plan.workspace_bytes()}, DType::u8, query.device());
      ops::fused_infer_attention_score_out(plan, ws, given.attention_out, given.softmax_lse);
      finish_eager(query.device());
    }
  }
  return py::reinterpret_borrow<py::object>(out);
}

template <FiaNames N>
void bind_fia_op(py::module_& m, const char* class_name, const char* attr_name, const char* get_workspace_name,
                 FiaOpOf<N> op) {
  const std::string doc = std::string("torch_npu's ") + op.name +
                          "(query, key, value, **kwargs) -> (attention_out, softmax_lse); .out(..., "
                          "workspace=None, out=[attention_out, softmax_lse])";
  const std::string out_doc =
      "out(query, key, value, *, workspace=None, out=[attention_out, softmax_lse], **keywords) -> out: "
      "writes caller-owned outputs, with the caller's workspace (" +
      std::string(get_workspace_name ? get_workspace_name : "get_max_workspace") +
      ") or, without one, a workspace sized for the call; the form task groups capture and updates "
      "re-issue, recorded like the functional form under auto_dispatch_capture. Keywords and errors: "
      "help(npugraph.npu_fused_infer_attention_score).";
  py::class_<FiaOpOf<N>>(m, class_name, doc.c_str())
      .def("__call__", [](const FiaOpOf<N>& self, py::handle q, py::handle k, py::handle v, py::kwargs kwargs) {
             return call_fia(self, q, k, v, kwargs);
           }, py::arg("query"), py::arg("key"), py::arg("value"))
      .def("out", [](const FiaOpOf<N>& self, py::handle q, py::handle k, py::handle v, py::handle workspace,
                     py::handle out, py::kwargs kwargs) {
             return call_fia_out(self, q, k, v, workspace, out, kwargs);
           }, py::arg("query"), py::arg("key"), py::arg("value"), py::kw_only(),
           py::arg("workspace") = py::none(), py::arg("out"), out_doc.c_str())
      .def("__repr__", [](const FiaOpOf<N>& self) { return std::string("<npugraph op ") + self.name + ">"; });
  m.attr(attr_name) = op;
  if (!get_workspace_name) return;
  m.def(get_workspace_name,
        [get_workspace_name](py::handle q, py::handle k, py::handle v, py::kwargs kwargs) {
          const Kind kind = kind_of(q, "query");
          const Tensor ws = ops::fia_max_workspace(to_tensor(q, "query"), to_tensor(k, "key"), to_tensor(v, "value"),
                                                   parse_options(kwargs, get_workspace_name, N));
          return from_tensor(ws, kind);
        }, py::arg("query"), py::arg("key"), py::arg("value"),
        "The workspace (uint8) the .out form needs for the worst case of these shapes.");
}

}  // namespace

void stage_fia_updates(RecordedUpdates::Update& u, py::handle cpu_update_input) {
  if (!py::isinstance<py::list>(cpu_update_input) && !py::isinstance<py::tuple>(cpu_update_input))
    throw py::type_error("NPUGraph.update: cpu_update_input must be a list of dicts, got " +
                         type_name(cpu_update_input) + " (" + short_repr(cpu_update_input) + ")");
  const py::sequence inputs = py::reinterpret_borrow<py::sequence>(cpu_update_input);
  const std::size_t n = u.size(), given = inputs.size();
  NG_CHECK_ARG(given == 1 || given == n, "NPUGraph.update: cpu_update_input has ", given,
               " dicts: pass one per recorded call (", n, ") or one for all");
  for (std::size_t i = 0; i < n; ++i) {
    auto& call = static_cast<ops::FiaCall&>(u.call(i));  // every record of this layer is an FIA call
    apply_fia_kwargs(call, inputs[given == 1 ? 0 : i], given == 1 ? 0 : i, static_cast<FiaNames>(call.tag()));
  }
}

void bind_fia(py::module_& m) {
  bind_fia_op<FiaNames::v1>(
      m, "_FusedInferAttentionScore", "npu_fused_infer_attention_score",
      "_npu_fused_infer_attention_score_get_max_workspace",
      {{FiaNames::v1, "npu_fused_infer_attention_score", "npu_fused_infer_attention_score.out"}});
  bind_fia_op<FiaNames::v2>(
      m, "_FusedInferAttentionScoreV2", "npu_fused_infer_attention_score_v2",
      "_npu_fused_infer_attention_score_v2_get_max_workspace",
      {{FiaNames::v2, "npu_fused_infer_attention_score_v2", "npu_fused_infer_attention_score_v2.out"}});
  // _npu_paged_attention (npugraph/_paged_attention.py) reaches FIA through this one: v1's keywords
  // in the call, recorded under auto_dispatch_capture with update dicts in its own (context_lens).
  bind_fia_op<FiaNames::paged>(m, "_PagedAttentionFia", "_paged_attention_fia", nullptr,
                               {{FiaNames::paged, "_npu_paged_attention", "_npu_paged_attention"}});
  m.def("_fia_keywords", [](bool v2) { return fia_keywords(v2 ? FiaNames::v2 : FiaNames::v1); },
        py::arg("v2") = false,
        "The keywords the FIA parser accepts (sorted; v2=True: npu_fused_infer_attention_score_v2's), "
        "for the docs' check.");
}

}  // namespace npugraph::python
