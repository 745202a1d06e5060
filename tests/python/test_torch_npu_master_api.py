"""torch_npu master's public graph API beyond the seed: the graph op handler registry, one update
stream for all graphs, debug_dump's JSON with its aligned view, Tensor.record_stream on npugraph
streams, and torch_npu's error texts (capture on the default stream, out of memory in a capture)."""
import gc
import json
import logging
import threading
import time
import weakref
from unittest import mock

import pytest
import torch

import npugraph
from npugraph import npu
from conftest import randn

fia = npugraph.npu_fused_infer_attention_score
OPTS = dict(num_heads=4, input_layout="BNSD", scale=0.25, actual_seq_lengths_kv=[8])
REGISTRY = npugraph.npu._npugraph_handlers._NPU_GRAPH_OP_HANDLERS
DEADLINE = 20.0


@pytest.fixture
def registry():
    saved = dict(REGISTRY)
    try:
        yield REGISTRY
    finally:
        REGISTRY.clear()
        REGISTRY.update(saved)


# --- the handler registry ------------------------------------------------------------------------

BUILT_IN = ["npu_fused_infer_attention_score", "npu_fused_infer_attention_score.default",
            "npu_fused_infer_attention_score.out", "npu_fused_infer_attention_score_v2",
            "npu_fused_infer_attention_score_v2.default", "npu_fused_infer_attention_score_v2.out",
            "_npu_paged_attention.default", "npu_multi_head_latent_attention.out"]


def test_built_in_handlers_and_their_update_slots():
    for name in BUILT_IN:
        assert issubclass(REGISTRY[name], npu.NpuGraphOpHandler), name
    # torch_npu's schemas: v1 (query, key, value, pse_shift, atten_mask, actual_seq_lengths, ...),
    # v2 (query, key, value, query_rope, key_rope, pse_shift, atten_mask, actual_seq_qlen, ...),
    # paged attention (..., block_table, context_lens, out), MLA (q_nope, q_rope, ctkv, k_rope,
    # block_tables, context_lens, ...)
    for name in BUILT_IN[:3]:
        assert REGISTRY[name].get_update_specs(name) == [("arg", 5, "actual_seq_lengths"),
                                                         ("arg", 6, "actual_seq_lengths_kv")]
    for name in BUILT_IN[3:6]:
        assert REGISTRY[name].get_update_specs(name) == [("arg", 7, "actual_seq_qlen"),
                                                         ("arg", 8, "actual_seq_kvlen")]
    assert REGISTRY[BUILT_IN[6]].get_update_specs(BUILT_IN[6]) == [("arg", 7, "context_lens")]
    assert REGISTRY[BUILT_IN[7]].get_update_specs(BUILT_IN[7]) == [("arg", 5, "context_lens")]
    assert REGISTRY[BUILT_IN[0]].get_update_specs("some_other_op") == []


def test_built_in_update_keys_are_keywords_npugraphs_update_takes():
    v1, v2 = set(npugraph._C._fia_keywords(False)), set(npugraph._C._fia_keywords(True))
    for name in BUILT_IN[:3]:
        assert {key for _, _, key in REGISTRY[name].get_update_specs(name)} <= v1
    for name in BUILT_IN[3:6]:
        assert {key for _, _, key in REGISTRY[name].get_update_specs(name)} <= v2


def test_register_one_name_and_several(registry):
    @npu.register_npu_graph_handler("test_op_single")
    class One(npu.NpuGraphOpHandler):
        pass

    @npu.register_npu_graph_handler(["test_op_a", "test_op_a.default"])
    class Two(npu.NpuGraphOpHandler):
        pass

    assert registry["test_op_single"] is One
    assert registry["test_op_a"] is Two and registry["test_op_a.default"] is Two


def test_registering_a_name_again_takes_it_over_with_a_warning(registry, caplog):
    @npu.register_npu_graph_handler("test_op_twice")
    class First(npu.NpuGraphOpHandler):
        pass

    with caplog.at_level(logging.WARNING, logger="npugraph.npu"):
        @npu.register_npu_graph_handler("test_op_twice")
        class Second(npu.NpuGraphOpHandler):
            pass

    assert registry["test_op_twice"] is Second
    assert "'test_op_twice' is being overridden: First -> Second" in caplog.text


def test_registration_errors_name_the_value(registry):
    for bad in (None, [], [""], ["ok", 3]):
        with pytest.raises(TypeError, match=r"register_npu_graph_handler: op_names = .*expected an op name"):
            npu.register_npu_graph_handler(bad)
    with pytest.raises(TypeError, match="is not a subclass of NpuGraphOpHandler"):
        npu.register_npu_graph_handler("test_op_plain")(object)
    assert "test_op_plain" not in registry


class _Record:
    def __init__(self, op_name, args, kwargs):
        self.op_name, self.args, self.kwargs = op_name, list(args), dict(kwargs)


def test_update_args_writes_the_declared_slots_only():
    class H(npu.NpuGraphOpHandler):
        UPDATE_SPECS = {"my_op.default": [("arg", 2, "batch"), ("kwarg", "lens", "lens"),
                                          ("arg", 9, "beyond")]}

    rec = _Record("my_op.default", ["x", "y", 1], {"lens": [3], "other": 0})
    H.update_args(rec, {"batch": 4, "lens": [5, 6], "beyond": 1, "undeclared": 7})
    assert rec.args == ["x", "y", 4]  # index 9 is past the recorded arguments: left alone
    assert rec.kwargs == {"lens": [5, 6], "other": 0}
    rec2 = _Record("another_op", [1], {})
    H.update_args(rec2, {"batch": 4})
    assert rec2.args == [1]

    class Bad(npu.NpuGraphOpHandler):
        UPDATE_SPECS = {"my_op": [("argument", 0, "k")]}

    with pytest.raises(ValueError, match=r"Bad.UPDATE_SPECS\['my_op'\]: 'argument': the location must be"):
        Bad.update_args(_Record("my_op", [1], {}), {"k": 2})


def test_the_registry_under_torch_npus_module_paths(shim):
    from torch_npu.npu import NpuGraphOpHandler, register_npu_graph_handler
    from torch_npu.npu._npugraph_handlers import NpuGraphOpHandler as again
    from torch_npu.npu._npugraph_handlers.npugraph_handler import _NPU_GRAPH_OP_HANDLERS

    assert NpuGraphOpHandler is again is npu.NpuGraphOpHandler
    assert register_npu_graph_handler is npu.register_npu_graph_handler
    assert _NPU_GRAPH_OP_HANDLERS is REGISTRY


# --- one update stream -----------------------------------------------------------------------------

def test_every_graph_updates_on_one_stream(rng):
    g1, g2 = npu.NPUGraph(), npu.NPUGraph()
    assert g1.graph_dispatch_mode.update_stream == g2.graph_dispatch_mode.update_stream
    q = randn((1, 4, 1, 16), torch.float16, rng)
    k = randn((1, 4, 8, 16), torch.float16, rng)
    with npu.graph(g1, auto_dispatch_capture=True):
        fia(q, k, k, **OPTS)
    assert g1.update_stream == g2.update_stream == g1.graph_dispatch_mode.update_stream
    assert g1.update_stream != npu.current_stream()


def test_two_threads_updating_two_graphs_share_the_stream_safely(rng):
    """Each thread updates and replays its own graph; the shared update stream serves both."""
    k = randn((1, 4, 8, 16), torch.float16, rng)
    v = randn((1, 4, 8, 16), torch.float16, rng)
    work = []
    for _ in range(2):
        q = randn((1, 4, 1, 16), torch.float16, rng)
        g = npu.NPUGraph()
        with npu.graph(g, auto_dispatch_capture=True):
            out, _ = fia(q, k, v, **OPTS)
        want = {n: fia(q, k, v, **dict(OPTS, actual_seq_lengths_kv=[n]))[0].clone() for n in range(1, 9)}
        work.append((g, out, want))
    errors = []

    def run(g, out, want, offset):
        try:
            for step in range(40):
                n = (step + offset) % 8 + 1
                g.update(cpu_update_input=[{"actual_seq_lengths_kv": [n]}])
                g.replay()
                if not torch.equal(out, want[n]):
                    errors.append(f"graph {g.id} step {step}: output differs from eager")
        except Exception as e:  # noqa: BLE001 - reported below
            errors.append(f"graph {g.id}: {type(e).__name__}: {e}")

    threads = [threading.Thread(target=run, args=(*w, i * 3)) for i, w in enumerate(work)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(DEADLINE * 3)
    assert not any(t.is_alive() for t in threads)
    assert errors == []


# --- debug_dump as JSON ------------------------------------------------------------------------------

def _fork_join_graph():
    """s0: x += 1 | side (after it): y += 2 | s0 (after both): x += y — three tasks, two streams."""
    x, y = torch.zeros(4), torch.zeros(4)
    g = npu.NPUGraph()
    side = npu.Stream()
    with npu.graph(g):
        s0 = npu.current_stream()
        x.add_(1)
        side.wait_stream(s0)
        with npu.stream(side):
            y.add_(2)
        s0.wait_stream(side)
        x.add_(y)
    return g, x


def _tasks(doc):
    return sorted((e for e in doc["traceEvents"] if e["ph"] == "X"), key=lambda e: e["args"]["Task Id"])


def test_json_dump_and_its_aligned_view(tmp_path):
    g, x = _fork_join_graph()
    path = tmp_path / "dump.json"
    assert g.debug_dump(str(path)) is None
    raw = json.loads(path.read_text())
    tasks = _tasks(raw)
    assert raw["graph"] == g.id and len(tasks) == g.num_tasks == 3
    first, forked, joined = tasks
    assert first["tid"] == joined["tid"] != forked["tid"]
    assert [t["ts"] for t in tasks] == [0, 0, 1]  # raw: each task's place on its own stream
    assert forked["args"]["deps"] == [first["args"]["Task Id"]]
    assert sorted(joined["args"]["deps"]) == [first["args"]["Task Id"], forked["args"]["Task Id"]]
    assert all(t["args"]["Task Type"] == "host_func" for t in tasks)
    aligned = json.loads((tmp_path / "dump.aligned.json").read_text())
    atasks = _tasks(aligned)
    assert [t["ts"] for t in atasks] == [0, 1, 2]  # each after its dependencies
    flows = [e for e in aligned["traceEvents"] if e["ph"] in ("s", "f")]
    assert sorted((e["ph"], e["tid"]) for e in flows) == sorted(
        [("s", first["tid"]), ("f", forked["tid"]), ("s", forked["tid"]), ("f", joined["tid"])])
    g.replay()
    assert torch.equal(x, torch.full((4,), 3.0))  # the graph itself is untouched by the dump


def test_dot_stays_the_dump_of_other_paths(tmp_path):
    g, _ = _fork_join_graph()
    g.debug_dump(str(tmp_path / "dump.dot"))
    assert (tmp_path / "dump.dot").read_text() == g.dot()
    assert not (tmp_path / "dump.aligned.dot").exists()


def test_an_uncaptured_graph_writes_nothing(tmp_path):
    path = tmp_path / "keep.json"
    path.write_text("earlier dump")
    with mock.patch.object(npugraph.npu._npugraph_utils, "align_trace_json") as align:
        assert npu.NPUGraph().debug_dump(str(path)) is None
    align.assert_not_called()
    assert path.read_text() == "earlier dump"


def test_a_failed_alignment_keeps_the_dump(tmp_path, shim):
    g, _ = _fork_join_graph()
    path = str(tmp_path / "fail.json")
    with mock.patch("torch_npu.npu._npugraph_utils.align_trace_json",
                    side_effect=RuntimeError("alignment failed")) as align:
        assert g.debug_dump(path) is None
    align.assert_called_once_with(path, None)
    assert json.loads(open(path).read())["graph"] == g.id
    assert not (tmp_path / "fail.aligned.json").exists()


def test_align_refuses_what_is_not_a_graph_dump(tmp_path):
    align = npugraph.npu._npugraph_utils.align_trace_json
    bad = tmp_path / "bad.json"
    bad.write_text("[1, 2]")
    with pytest.raises(ValueError, match="is not a Chrome-trace JSON graph dump"):
        align(str(bad))
    bad.write_text(json.dumps({"traceEvents": [
        {"ph": "X", "tid": "stream1", "ts": 0, "dur": 1, "args": {"Task Id": 0, "deps": [7]}}]}))
    with pytest.raises(ValueError, match="task 0 depends on task 7, which the dump does not have"):
        align(str(bad))
    bad.write_text(json.dumps({"traceEvents": [
        {"ph": "X", "tid": "s", "ts": 0, "dur": 1, "args": {"Task Id": 0, "deps": [1]}},
        {"ph": "X", "tid": "s", "ts": 1, "dur": 1, "args": {"Task Id": 1, "deps": [0]}}]}))
    with pytest.raises(ValueError, match="through a cycle"):
        align(str(bad))


# --- Tensor.record_stream -------------------------------------------------------------------------

def test_record_stream_keeps_the_tensor_until_the_streams_work_has_run(shim):
    gate = npu.ExternalEvent()
    gate.set_wait_deadline(DEADLINE)
    s = npu.Stream()
    gate.wait(s)  # s is held until the gate opens
    t = torch.ones(4)
    alive = weakref.ref(t)
    t.record_stream(s)
    del t
    gc.collect()
    assert alive() is not None  # s has not reached the point recorded
    gate.record(npu.Stream())
    s.synchronize()
    deadline = time.monotonic() + DEADLINE
    while alive() is not None and time.monotonic() < deadline:
        gc.collect()
        time.sleep(0.01)
    assert alive() is None  # released once s ran past it


def test_record_stream_inside_a_capture_queues_nothing(shim):
    g = npu.NPUGraph()
    t = torch.ones(2)
    with npu.graph(g):
        t.add_(1)
        t.record_stream(npu.current_stream())
    assert g.num_tasks == 1


def test_record_stream_of_other_streams_is_torchs(shim):
    with pytest.raises((TypeError, RuntimeError)):
        torch.ones(2).record_stream("not a stream")


# --- torch_npu's error texts -------------------------------------------------------------------------

def test_capture_on_the_default_stream_uses_torch_npus_text():
    with pytest.raises(RuntimeError, match="NPU graphs must be captured on a non-default stream."):
        npu.NPUGraph().capture_begin()


def test_out_of_memory_in_a_capture_uses_torch_npus_text(shim):
    with pytest.raises(RuntimeError, match="out of memory.*would exceed allowed memory"):
        with npu.graph(npu.NPUGraph()):
            torch.zeros(2 ** 40, device="npu")
    with pytest.raises(npugraph.ResourceError, match="would exceed allowed memory"):
        npugraph.empty(2 ** 44, dtype="float32")
    assert float(npugraph.zeros(3).sum()) == 0.0  # the runtime stays usable
