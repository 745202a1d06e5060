"""Bad arguments from Python: a TypeError or npugraph.ArgumentError (a ValueError) that names the
argument, the value given and what was expected — never pybind11's "Unable to cast Python instance
to C++ type" or a bare OverflowError — and Python advice, not C++ syntax, in library messages."""
import numpy as np
import pytest
import torch

import npugraph
from npugraph import npu
from conftest import randn

fia = npugraph.npu_fused_infer_attention_score
get_ws = npugraph._npu_fused_infer_attention_score_get_max_workspace
OPTS = dict(num_heads=2, input_layout="BNSD")

INT_KEYWORDS = ["num_heads", "pre_tokens", "next_tokens", "num_key_value_heads", "sparse_mode",
                "inner_precise", "block_size", "antiquant_mode", "key_antiquant_mode", "value_antiquant_mode"]
LIST_KEYWORDS = ["actual_seq_lengths", "actual_seq_lengths_kv", "actual_shared_prefix_len"]
TENSOR_KEYWORDS = ["pse_shift", "atten_mask", "dequant_scale1", "quant_scale1", "dequant_scale2", "quant_scale2",
                   "quant_offset2", "antiquant_scale", "antiquant_offset", "block_table", "query_padding_size",
                   "kv_padding_size", "key_antiquant_scale", "key_antiquant_offset", "value_antiquant_scale",
                   "value_antiquant_offset", "key_shared_prefix", "value_shared_prefix", "query_rope",
                   "key_rope", "key_rope_antiquant_scale"]
TOO_BIG = 2**63


@pytest.fixture
def q(rng):
    return randn((1, 2, 1, 8), torch.float16, rng)


# (keyword, value, exception, message) for the scalar keywords.
SCALAR_CASES = [
    ("num_heads", "2", TypeError, "num_heads = '2': expected an int, got str"),
    ("num_heads", 2.5, TypeError, "num_heads = 2.5: expected an int, got float"),
    ("num_heads", True, TypeError, "num_heads = True: expected an int, got bool"),
    ("num_heads", None, TypeError, "num_heads = None: expected an int, got NoneType"),
    ("num_heads", TOO_BIG, npugraph.ArgumentError,
     r"num_heads = 9223372036854775808: out of range for int64"),
    ("num_heads", -TOO_BIG - 1, npugraph.ArgumentError, r"num_heads = -9223372036854775809: out of range"),
    ("scale", "x", TypeError, "scale = 'x': expected a float, got str"),
    ("scale", True, TypeError, "scale = True: expected a float, got bool"),
    ("scale", 10**400, npugraph.ArgumentError, r"scale = 1000.*: out of range for a float"),
    ("scale", [1.0], TypeError, r"scale = \[1.0\]: expected a float, got list"),
    ("softmax_lse_flag", "yes", TypeError, r"softmax_lse_flag = 'yes': expected a bool \(True or False\), got str"),
    ("softmax_lse_flag", 1, TypeError, r"softmax_lse_flag = 1: expected a bool \(True or False\), got int"),
    ("input_layout", None, TypeError, "input_layout = None: expected a str, got NoneType"),
    ("input_layout", 3, TypeError, "input_layout = 3: expected a str, got int"),
    ("actual_seq_lengths_kv", [2**64], npugraph.ArgumentError,
     r"actual_seq_lengths_kv\[0\] = 18446744073709551616: out of range for int64"),
    ("actual_seq_lengths_kv", [1, True], TypeError, r"actual_seq_lengths_kv\[1\]: expected an int, got bool"),
    ("actual_seq_lengths_kv", 2**64, npugraph.ArgumentError,
     r"actual_seq_lengths_kv = 18446744073709551616: out of range for int64"),
    ("actual_seq_lengths_kv", "x", TypeError, r"actual_seq_lengths_kv: expected a list of ints, got str \('x'\)"),
]


@pytest.mark.parametrize("key,value,exc,message", SCALAR_CASES, ids=[f"{c[0]}={c[1]!r}"[:40] for c in SCALAR_CASES])
def test_fia_scalar_keywords_name_argument_value_and_expectation(q, key, value, exc, message):
    with pytest.raises(exc, match=f"npu_fused_infer_attention_score: {message}"):
        fia(q, q, q, **dict(OPTS, **{key: value}))


@pytest.mark.parametrize("key", INT_KEYWORDS)
def test_every_int_keyword_is_checked(q, key):
    with pytest.raises(TypeError, match=f"{key} = '2': expected an int, got str"):
        fia(q, q, q, **dict(OPTS, **{key: "2"}))
    with pytest.raises(npugraph.ArgumentError, match=f"{key} = 9223372036854775808: out of range for int64"):
        fia(q, q, q, **dict(OPTS, **{key: TOO_BIG}))


@pytest.mark.parametrize("key", LIST_KEYWORDS)
def test_every_int_list_keyword_is_checked(q, key):
    with pytest.raises(TypeError, match=rf"{key}: expected a list of ints, got str \('x'\)"):
        fia(q, q, q, **dict(OPTS, **{key: "x"}))
    with pytest.raises(TypeError, match=rf"{key}\[0\]: expected an int, got float \(1.5\)"):
        fia(q, q, q, **dict(OPTS, **{key: [1.5]}))
    with pytest.raises(npugraph.ArgumentError, match=rf"{key}\[1\] = 18446744073709551616: out of range for int64"):
        fia(q, q, q, **dict(OPTS, **{key: (1, 2**64)}))


@pytest.mark.parametrize("key", TENSOR_KEYWORDS)
def test_every_tensor_keyword_is_checked(q, key):
    with pytest.raises(TypeError, match=rf"{key}: expected a numpy array or a torch tensor, got list \(\[1, 2\]\)"):
        fia(q, q, q, **dict(OPTS, **{key: [1, 2]}))
    with pytest.raises(npugraph.ArgumentError, match=rf"{key}: torch dtype torch.float64 is not supported"):
        fia(q, q, q, **dict(OPTS, **{key: torch.zeros(2, dtype=torch.float64)}))


def test_accepted_scalar_forms(q):
    expected, _ = fia(q, q, q, **OPTS, scale=0.5, actual_seq_lengths_kv=[1])
    same = [dict(num_heads=np.int64(2), scale=np.float32(0.5), actual_seq_lengths_kv=np.array([1])),
            dict(num_heads=2, scale=torch.tensor(0.5), actual_seq_lengths_kv=torch.tensor([1])),
            dict(num_heads=2, scale=0.5, actual_seq_lengths_kv=1, softmax_lse_flag=np.bool_(False))]
    for kw in same:
        out, _ = fia(q, q, q, **dict(OPTS, **kw))
        assert torch.equal(out, expected), kw
    _, lse = fia(q, q, q, **OPTS, softmax_lse_flag=np.bool_(True))
    assert tuple(lse.shape) == (1, 2, 1, 1)


def test_unsupported_dtypes_get_the_same_message_from_torch_and_numpy(q):
    supported = r"\(supported: float32, float16, bfloat16 \(torch tensors only\), int8, uint8, int32, int64, bool\)"
    with pytest.raises(npugraph.ArgumentError, match="query: torch dtype torch.float64 is not supported " + supported):
        fia(q.double(), q, q, **OPTS)
    with pytest.raises(npugraph.ArgumentError, match="query: numpy dtype float64 is not supported " + supported):
        fia(q.numpy().astype(np.float64), q, q, **OPTS)
    with pytest.raises(npugraph.ArgumentError, match="key: torch dtype torch.complex64 is not supported"):
        fia(q, torch.zeros(1, 2, 1, 8, dtype=torch.complex64), q, **OPTS)
    with pytest.raises(TypeError, match=r"value: expected a numpy array or a torch tensor, got NoneType \(None\)"):
        fia(q, q, None, **OPTS)


def test_out_form_and_get_max_workspace_arguments(q):
    ws = get_ws(q, q, q, **OPTS)
    out, lse = torch.empty_like(q), torch.empty(1)
    with pytest.raises(TypeError, match=r"npu_fused_infer_attention_score.out: out = 3: expected a list "
                                        r"\[attention_out, softmax_lse\], got int"):
        fia.out(q, q, q, workspace=ws, out=3, **OPTS)
    with pytest.raises(npugraph.ArgumentError, match=r"out has 1 tensors: must be \[attention_out, softmax_lse\]"):
        fia.out(q, q, q, workspace=ws, out=[out], **OPTS)
    with pytest.raises(TypeError, match=r"out\[1\]: expected a numpy array or a torch tensor, got str"):
        fia.out(q, q, q, workspace=ws, out=[out, "lse"], **OPTS)
    with pytest.raises(TypeError, match=r"workspace: expected a numpy array or a torch tensor, got str"):
        fia.out(q, q, q, workspace="ws", out=[out, lse], **OPTS)
    with pytest.raises(TypeError, match="npu_fused_infer_attention_score.out: num_heads = '2': expected an int"):
        fia.out(q, q, q, workspace=ws, out=[out, lse], **dict(OPTS, num_heads="2"))
    with pytest.raises(TypeError, match="npu_fused_infer_attention_score.out\\(\\) got an unexpected keyword "
                                        "argument 'heads'"):
        fia.out(q, q, q, workspace=ws, out=[out, lse], heads=2)
    with pytest.raises(TypeError, match="_npu_fused_infer_attention_score_get_max_workspace: scale = 'x': "
                                        "expected a float, got str"):
        get_ws(q, q, q, **dict(OPTS, scale="x"))
    fia.out(q, q, q, workspace=ws, out=(out, lse), **OPTS)  # a tuple is fine too
    assert torch.equal(out, fia(q, q, q, **OPTS)[0])
    out2 = torch.empty_like(q)
    fia.out(q, q, q, workspace=None, out=[out2, lse], **OPTS)  # optional, as in torch_npu: sized per call
    fia.out(q, q, q, out=[out, lse], **OPTS)
    assert torch.equal(out2, out) and torch.equal(out, fia(q, q, q, **OPTS)[0])


def test_update_dict_values_are_checked(q):
    g = npu.NPUGraph()
    with npu.graph(g, auto_dispatch_capture=True):
        out, _ = fia(q, q, q, **OPTS)
    cases = [({"num_heads": "2"}, TypeError, r"cpu_update_input\[0\]: num_heads = '2': expected an int, got str"),
             ({"scale": "x"}, TypeError, r"cpu_update_input\[0\]: scale = 'x': expected a float, got str"),
             ({"pre_tokens": TOO_BIG}, npugraph.ArgumentError,
              r"cpu_update_input\[0\]: pre_tokens = 9223372036854775808: out of range for int64"),
             ({"actual_seq_lengths_kv": [2**64]}, npugraph.ArgumentError,
              r"cpu_update_input\[0\]: actual_seq_lengths_kv\[0\] = 18446744073709551616: out of range"),
             ({"softmax_lse_flag": "no"}, TypeError, r"cpu_update_input\[0\]: softmax_lse_flag = 'no': expected a bool"),
             ({"block_table": "t"}, TypeError, r"cpu_update_input\[0\]: block_table: expected a numpy array")]
    for update, exc, message in cases:
        with pytest.raises(exc, match=message):
            g.update(cpu_update_input=[update])
    g.update(cpu_update_input=[{}])  # nothing above changed the recorded arguments
    g.replay()
    assert torch.equal(out, fia(q, q, q, **OPTS)[0])


def test_stream_event_and_graph_arguments():
    g = npu.NPUGraph()
    s = npu.Stream()
    cases = [
        (lambda: g.replay(stream=3), TypeError, "stream = 3: expected an npugraph.npu.Stream, got int"),
        (lambda: g.replay(blocking="x"), TypeError, r"blocking = 'x': expected a bool \(True or False\), got str"),
        (lambda: npu.Stream(priority="x"), TypeError, "priority = 'x': expected an int, got str"),
        (lambda: npu.Stream(device=TOO_BIG), npugraph.ArgumentError, "device = 9223372036854775808: out of range"),
        (lambda: npu.Stream(device=True), TypeError, r"device = True: expected an int, a str \('cpu', 'npu:0'\) or a "
                                                     r"torch.device, got bool"),
        (lambda: npu.Stream(device=1.5), TypeError, "device = 1.5: expected an int, a str"),
        (lambda: npu.set_device("npu:1"), npugraph.ArgumentError, "device = 'npu:1': this build has one device"),
        (lambda: npu.current_stream(device=[0]), TypeError, r"device = \[0\]: expected an int"),
        (lambda: npu.Event(enable_timing="yes"), TypeError, "enable_timing = 'yes': expected a bool"),
        (lambda: npu.Event().record(stream="s"), TypeError, "stream = 's': expected an npugraph.npu.Stream, got str"),
        (lambda: npu.Event().wait(stream=1), TypeError, "stream = 1: expected an npugraph.npu.Stream"),
        (lambda: npu.Event().elapsed_time(3), TypeError, "end_event = 3: expected an npugraph.npu.Event, got int"),
        (lambda: s.wait_event(3), TypeError, "event = 3: expected an npugraph.npu.Event, got int"),
        (lambda: s.wait_stream(3), TypeError, "stream = 3: expected an npugraph.npu.Stream, got int"),
        (lambda: s.record_event(3), TypeError, "event = 3: expected an npugraph.npu.Event"),
        (lambda: npu.set_stream(None), TypeError, "stream = None: expected an npugraph.npu.Stream, got NoneType"),
        (lambda: npu.stream(3), TypeError, "stream = 3: expected an npugraph.npu.Stream"),
        (lambda: npu.ExternalEvent(name=3), TypeError, "name = 3: expected a str, got int"),
        (lambda: npu.ExternalEvent().wait(stream=3), TypeError, "stream = 3: expected an npugraph.npu.Stream"),
        (lambda: npu.ExternalEvent().set_wait_deadline("x"), TypeError,
         "ExternalEvent.set_wait_deadline: deadline = 'x': expected a float, got str"),
        (lambda: npu.graph(3), TypeError, "npu_graph = 3: expected an npugraph.npu.NPUGraph, got int"),
        (lambda: npu.graph(g, pool=3), TypeError, r"pool = 3: expected a pool handle \(npugraph.npu.graph_pool_handle"),
        (lambda: npu.graph(g, stream=3), TypeError, "stream = 3: expected an npugraph.npu.Stream"),
        (lambda: npu.graph(g, capture_error_mode=3), TypeError, "capture_error_mode = 3: expected a str, got int"),
        (lambda: npu.graph(g, capture_error_mode="strict"), npugraph.ArgumentError,
         "capture_error_mode = 'strict': must be 'global', 'thread_local' or 'relaxed'"),
        (lambda: npu.graph(g, auto_dispatch_capture="yes"), TypeError, "auto_dispatch_capture = 'yes': expected a bool"),
        (lambda: g.capture_begin(pool="p"), TypeError, "pool = 'p': expected a pool handle"),
        (lambda: g.capture_begin(capture_error_mode=None), TypeError, "capture_error_mode = None: expected a str"),
        (lambda: g.debug_dump(3), TypeError, "debug_path = 3: expected a str"),
        (lambda: npu.graph_task_group_begin(3), TypeError, "stream = 3: expected an npugraph.npu.Stream"),
        (lambda: npu.graph_task_group_end(None), TypeError, "stream = None: expected an npugraph.npu.Stream"),
        (lambda: npu.graph_task_update_end("s"), TypeError, "stream = 's': expected an npugraph.npu.Stream"),
        (lambda: npu.graph_task_update_abort(3), TypeError, "stream = 3: expected an npugraph.npu.Stream"),
        (lambda: npu.graph_task_update_begin(s, 3), TypeError,
         "graph_task_update_begin: handle = 3: expected a task group handle or a list of them, got int"),
        (lambda: npu.graph_task_update_begin(s, [3]), TypeError,
         r"graph_task_update_begin: handle\[0\] = 3: expected a task group handle \(graph_task_group_end returns one\)"),
    ]
    for call, exc, message in cases:
        with pytest.raises(exc, match=message):
            call()


def test_empty_and_zeros_sizes_and_dtypes():
    cases = [
        (lambda: npugraph.empty(TOO_BIG), npugraph.ArgumentError,
         r"empty: size\[0\] = 9223372036854775808: out of range for int64"),
        (lambda: npugraph.empty("a"), TypeError, "empty: size = 'a': expected ints or one sequence of ints, got str"),
        (lambda: npugraph.empty(2, "a"), TypeError, r"empty: size\[1\]: expected an int, got str \('a'\)"),
        (lambda: npugraph.zeros([2, 2.5]), TypeError, r"zeros: size\[1\]: expected an int, got float \(2.5\)"),
        (lambda: npugraph.zeros(2.5), TypeError, "zeros: size = 2.5: expected ints or one sequence of ints, got float"),
        (lambda: npugraph.zeros(True), TypeError, r"zeros: size\[0\]: expected an int, got bool"),
        (lambda: npugraph.empty(2, dtype=3), npugraph.ArgumentError,
         "dtype = 3: must be float32, float16, bfloat16, int8, uint8, int32, int64 or bool"),
        (lambda: npugraph.empty(2, dtype=np.float64), npugraph.ArgumentError, "dtype = .*float64.*: must be"),
        (lambda: npugraph.zeros(2, dtype=torch.complex64), npugraph.ArgumentError, "dtype = torch.complex64: must be"),
        (lambda: npugraph.empty(2, device="tpu"), npugraph.ArgumentError, "device = 'tpu'"),
    ]
    for call, exc, message in cases:
        with pytest.raises(exc, match=message):
            call()
    assert npugraph.empty(np.int64(2), torch.tensor(3)).shape == (2, 3)
    assert tuple(npugraph.zeros(torch.Size([2, 1]), dtype=torch.int32).shape) == (2, 1)


def test_library_messages_give_python_advice():
    """C++ spellings (EventOptions{...}, Stream::create(), StreamGuard, task_update_end) are rewritten
    into the Python names where they reach Python."""
    a, b = npu.Event(), npu.Event(enable_timing=True)
    s = npu.Stream()
    a.record(s)
    b.record(s)
    s.synchronize()
    with pytest.raises(npugraph.ArgumentError) as info:
        a.elapsed_time(b)
    assert "Event.elapsed_time: both events need npugraph.npu.Event(enable_timing=True)" in str(info.value)
    assert "EventOptions" not in str(info.value) and "::" not in str(info.value)
    with pytest.raises(npugraph.StateError) as info:
        npu.NPUGraph().capture_begin()
    text = str(info.value)
    assert "`with npugraph.npu.graph(g):` makes one current for you" in text, text
    assert "npugraph.npu.Stream()" in text and "`with npugraph.npu.stream(s):`" in text, text
    assert "Stream::create" not in text and "StreamGuard" not in text and "CaptureScope" not in text, text
    with pytest.raises(npugraph.StateError) as info:
        npu.graph_task_update_end(s)
    assert "graph_task_update_end: " in str(info.value) and "call graph_task_update_begin first" in str(info.value)
    with pytest.raises(npugraph.StateError, match="graph_task_group_end: no task group is open"):
        g = npu.NPUGraph()
        with npu.graph(g):
            npu.graph_task_group_end(npu.current_stream())
