"""What a user sees of a graph from Python: the DOT dump with current parameter values, g.groups(),
npugraph.profile's Chrome trace (parsed as JSON), set_log_level."""
import json

import numpy as np
import pytest
import torch

import npugraph
from npugraph import npu

fia = npugraph.npu_fused_infer_attention_score
OPTS = dict(num_heads=2, input_layout="BNSD", scale=0.5)


def tensors():
    rng = np.random.default_rng(3)
    r = lambda *s: torch.from_numpy(rng.standard_normal(s).astype(np.float32)).half()  # noqa: E731
    return r(1, 2, 1, 16), r(1, 2, 64, 16), r(1, 2, 64, 16)


def captured():
    q, k, v = tensors()
    g = npu.NPUGraph()
    with npu.graph(g, auto_dispatch_capture=True):
        out = fia(q, k, v, actual_seq_lengths_kv=[29], **OPTS)[0]
    return g, out, (q, k, v)


def test_dot_shows_the_values_the_next_replay_uses(tmp_path):
    g, _, _ = captured()
    before = g.dot()
    assert "actual_seq_lengths_kv [29]" in before and "query float16[1, 2, 1, 16]" in before
    assert "ExternalEvent 'recorded npu_fused_infer_attention_score call 0'" in before and "task group 0 (handle index 0)" in before
    g.update(cpu_update_input=[dict(actual_seq_lengths_kv=[50])])
    npu.synchronize()
    after = g.dot()
    assert "actual_seq_lengths_kv [50]" in after and after != before
    g.debug_dump(str(tmp_path / "g.dot"))
    assert (tmp_path / "g.dot").read_text() == after


def test_groups_are_the_graphs_handles():
    g, _, _ = captured()
    (h,) = g.groups()
    assert h.index == 0 and h.valid and h == g.groups()[0] and hash(h) == hash(g.groups()[0])
    g.reset()
    assert g.groups() == [] and not h.valid


def test_profile_records_a_chrome_trace(tmp_path):
    g, out, (q, k, v) = captured()
    path = tmp_path / "trace.json"
    with npugraph.profile(str(path)) as p:
        g.update(cpu_update_input=[dict(actual_seq_lengths_kv=[40])])
        g.replay()
    trace = json.loads(path.read_text())
    assert trace == p.trace
    events = [e for e in trace["traceEvents"] if e["ph"] == "X"]
    names = {e["name"] for e in events}
    assert {"fused_infer_attention_score", "replay (host)", "task_update_end (host)", "graph_launch",
            "external_event_wait"} <= names, names
    replayed = [e for e in events if e["name"] == "fused_infer_attention_score" and "graph" in e["args"]]
    assert replayed and replayed[0]["args"]["graph"] == g.id and replayed[0]["args"]["task_group"] == 0
    assert all(e["dur"] >= 0 for e in events)
    lanes = {e["args"]["name"] for e in trace["traceEvents"] if e["name"] == "thread_name"}
    assert any(lane.startswith("cpu stream") for lane in lanes)
    assert torch.equal(out, fia(q, k, v, actual_seq_lengths_kv=[40], **OPTS)[0])


def test_profile_and_trace_errors():
    with pytest.raises(npugraph.StateError, match="no trace is being recorded"):
        npugraph.stop_trace()
    with npugraph.profile() as p:
        with pytest.raises(npugraph.StateError, match="already being recorded"):
            npugraph.start_trace()
    assert isinstance(p.trace, dict)
    with pytest.raises(TypeError, match="profile: path = 3"):
        npugraph.profile(3)
    with pytest.raises(npugraph.ArgumentError, match="level = 'loud'"):
        npugraph.set_log_level("loud")


def test_log_level_info_prints_captures_and_updates(capfd):
    npugraph.set_log_level("info")
    try:
        g, _, _ = captured()
        g.update(cpu_update_input=[{}])
    finally:
        npugraph.set_log_level("off")
    err = capfd.readouterr().err
    assert "npugraph[info]: graph" in err and "capture ended" in err and "task update on" in err, err


def test_render_draws_the_graph_with_graphviz(tmp_path):
    import shutil

    g, _, _ = captured()
    if shutil.which("dot") is None:
        with pytest.raises(npugraph.UnsupportedError, match="Graphviz's `dot` is not installed"):
            g.render(str(tmp_path / "g.svg"))
        return
    path = g.render(str(tmp_path / "g.svg"))
    text = open(path, encoding="utf-8").read()
    assert "<svg" in text and "fused_infer_attention_score" in text
    with pytest.raises(npugraph.ArgumentError, match="suffix must be .svg, .png or .pdf"):
        g.render(str(tmp_path / "g.txt"))
