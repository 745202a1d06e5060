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
    if (auto outs = record_fia(*d, query, key, value, o, op.names)) {
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
}

// The .out form; without a workspace it uses one sized for the call (in a recorded call, the
// graph's shared one).
py::object call_fia_out(const FiaOp& op, py::handle q, py::handle k, py::handle v, py::handle workspace,
                        py::handle out, const py::kwargs& kwargs) {
  const Tensor query = to_tensor(q, "query"), key = to_tensor(k, "key"), value = to_tensor(v, "value");
  FiaOutArgs given;
  if (!workspace.is_none()) given.workspace = to_tensor(workspace, "workspace");
  std::tie(given.attention_out, given.softmax_lse) = out_arg(out, op.out_name);
  const ops::FiaOptions o = parse_options(kwargs, op.out_name, op.names);
  std::shared_ptr<DispatchRecords> d = active_dispatch();
  {
    py::gil_scoped_release release;
    if (d && record_fia(*d, query, key, value, o, op.names, &given)) {
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

std::optional<std::pair<Tensor, Tensor>> record_fia(DispatchRecords& d, const Tensor& query,
                                                    const Tensor& key, const Tensor& value,
                                                    const ops::FiaOptions& options, FiaNames names,
                                                    const FiaOutArgs* given) {
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
  r.names = names;
  if (given && given->workspace.defined()) {
    r.workspace = given->workspace;
  } else {
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
  }
  if (given) {  // a .out call: it writes the caller's outputs
    r.attention_out = given->attention_out;
    r.softmax_lse = given->softmax_lse;
  } else {
    r.attention_out = empty(plan.out_shape(), plan.out_dtype(), query.device());
    r.softmax_lse = options.softmax_lse_flag ? empty(plan.lse_shape(), DType::f32, query.device())
                                             : zeros({1}, DType::f32, query.device());
  }
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
                                          inputs[given == 1 ? 0 : i], given == 1 ? 0 : i, swaps,
                                          d.records[i].names);
      } catch (...) {
        for (FieldSwap f : swaps) d.undo.emplace_back(i, f);
        throw;
      }
      for (FieldSwap f : swaps) d.undo.emplace_back(i, f);
    }
    py::gil_scoped_release release;
    const Stream& u = d.update_stream;
    std::lock_guard shared(shared_update_mutex());  // Note [One update stream]
    try {
      if (d.last_replay) u.wait(*d.last_replay);  // Note [Updates after replays]
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
      abandon_update_on_error(u);  // before another update may take the stream
      throw;
    }
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
