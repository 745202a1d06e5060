"""The step-level engine from Python (npugraph.llm.Engine.submit / step / cancel) on the tiny model
written with the gguf package: requests submitted between steps get the tokens generate() gives
them alone; per-request sampling mixes greedy and seeded requests; stop strings cut the text
streamed and whole; cancel reports the request and frees its KV blocks; bad requests name the
field.
"""
import pathlib
import sys

import pytest

gguf = pytest.importorskip("gguf")
npugraph = pytest.importorskip("npugraph")

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from test_engine_reference import write_tiny_model  # noqa: E402


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    path = tmp_path_factory.mktemp("step") / "tiny.gguf"
    write_tiny_model(path)
    return str(path)


def alone(model, prompt, **kw):
    e = npugraph.llm.Engine(model, max_batch=1)
    e.submit(prompt, **kw)
    tokens, text = [], ""
    while not e.idle:
        for o in e.step():
            tokens += o["tokens"]
            text += o["text"]
    return tokens, text


def drain(engine):
    outs = {}
    while not engine.idle:
        for o in engine.step():
            d = outs.setdefault(o["id"], {"text": "", "tokens": [], "finish_reason": None, "result": None,
                                          "cached_tokens": o["cached_tokens"]})
            d["text"] += o["text"]
            d["tokens"] += o["tokens"]
            if o["finish_reason"] is not None:
                d["finish_reason"] = o["finish_reason"]
                d["result"] = o["result"]
    return outs


@pytest.mark.parametrize("mixed_steps", [True, False])
def test_requests_submitted_between_steps_get_what_they_get_alone(tiny, mixed_steps):
    """Those joining while the first decodes run their chunk inside its decode step (mixed steps,
    Note [Mixed steps]; the tiny model's Q4_1 weights allow them), or before it."""
    e = npugraph.llm.Engine(tiny, max_batch=4, mixed_steps=mixed_steps)
    specs = [("hello", dict(max_tokens=10)),
             ("the tall cat", dict(max_tokens=8, temperature=2.0, top_k=40, seed=5)),
             ("once upon", dict(max_tokens=9, temperature=1.5, top_p=0.9, seed=6)),
             ("ab", dict(max_tokens=7, chat=False))]
    ids = [e.submit(specs[0][0], **specs[0][1])]
    e.step()  # (its first outputs are checked through the results below)
    ids += [e.submit(p, **kw) for p, kw in specs[1:]]
    outs = drain(e)
    # the first step's output was dropped above: compare the whole results
    for i, (p, kw) in enumerate(specs):
        tokens, text = alone(tiny, p, **kw)
        r = outs[ids[i]]["result"]
        assert r["tokens"] == tokens, i
        assert r["text"] == text, i
        assert outs[ids[i]]["finish_reason"] in ("length", "stop")
        assert r["finish_reason"] == outs[ids[i]]["finish_reason"]
    assert e.load["kv_blocks_used"] == 0
    assert e.captured_graphs <= 3
    assert (e.stats["mixed_steps"] > 0) == mixed_steps


def test_stop_strings_and_messages(tiny):
    tokens, text = alone(tiny, "hello there", max_tokens=30)
    assert len(text) >= 10, text
    stop = text[5:8]
    e = npugraph.llm.Engine(tiny)
    i = e.submit("hello there", max_tokens=30, stop=[stop, "\x01never"])
    j = e.submit(messages=[{"role": "user", "content": "hello there"}], max_tokens=30, stop=stop)
    outs = drain(e)
    for k in (i, j):
        assert outs[k]["text"] == text[:text.find(stop)]
        assert outs[k]["result"]["text"] == outs[k]["text"]
        assert outs[k]["finish_reason"] == "stop"


def test_cancel_reports_the_request_and_frees_its_blocks(tiny):
    e = npugraph.llm.Engine(tiny, max_batch=2)
    a = e.submit("hello", max_tokens=50)
    b = e.submit("the tall cat", max_tokens=5)
    e.step()
    assert e.load["running"] == 2 and e.load["kv_blocks_used"] == 2
    assert e.cancel(a) is True
    assert e.cancel(12345) is False
    outs = drain(e)
    assert outs[a]["finish_reason"] == "cancelled"
    assert outs[b]["finish_reason"] == "length"
    load = e.load
    assert load == {"running": 0, "waiting": 0, "kv_blocks_used": 0, "kv_blocks_total": load["kv_blocks_total"],
                    "kv_blocks_cached": 0, "prefix_cache_queries": 0, "prefix_cache_hits": 0,
                    "mixed_steps": load["mixed_steps"]}


@pytest.mark.parametrize("kwargs, words", [
    (dict(prompt=""), "request.prompt is empty"),
    (dict(prompt="a", max_tokens=0), "request.max_tokens = 0: must be >= 1"),
    (dict(prompt="a", temperature=-1.0), "request.temperature = -1: must be finite and >= 0"),
    (dict(prompt="a", top_p=0.0), "request.top_p = 0: must be in (0, 1]"),
    (dict(prompt="a", stop=[""]), "request.stop[0] is empty"),
    (dict(messages=[{"role": "robot", "content": "x"}]), "request.messages[0].role = 'robot'"),
    (dict(messages=[{"content": "x"}]), "submit: messages[0] must have 'role' and 'content'"),
])
def test_bad_requests_name_the_field(tiny, kwargs, words):
    e = npugraph.llm.Engine(tiny)
    with pytest.raises(npugraph.ArgumentError, match=None) as info:
        e.submit(**kwargs)
    assert words in str(info.value)
    assert e.idle


@pytest.mark.parametrize("kwargs, words", [
    (dict(block_size=64), "block_size = 64: must be 128, 256, 384 or 512"),
    (dict(prefill_chunk=0), "prefill_chunk = 0: must be in [1, 2048]"),
])
def test_bad_engine_options_name_the_option(tiny, kwargs, words):
    with pytest.raises(npugraph.ArgumentError, match=None) as info:
        npugraph.llm.Engine(tiny, **kwargs)
    assert words in str(info.value)


def test_prefix_cache_takes_a_prompts_full_chunks_with_the_same_tokens(tiny):
    """prefix_cache=True (EngineOptions::prefix_cache, Note [Prefix cache]): a second identical
    prompt of 200 tokens takes its first full chunk of 128 from the cache (cached_tokens 128, the
    load's counters in prompt tokens) and gets the first one's tokens; without it nothing is cached."""
    prompt = "".join(str(i * 7 % 10) for i in range(200))  # one token per digit
    for cache in (True, False):
        e = npugraph.llm.Engine(tiny, prefix_cache=cache, prefill_chunk=128)
        runs = []
        for _ in range(2):
            e.submit(prompt, max_tokens=6, chat=False)
            outs = drain(e)
            (out,) = outs.values()
            runs.append(out)
        assert [r["cached_tokens"] for r in runs] == ([0, 128] if cache else [0, 0])
        assert runs[0]["tokens"] == runs[1]["tokens"]
        assert runs[0]["result"]["prompt_tokens"] == runs[1]["result"]["prompt_tokens"]
        load = e.load
        assert load["kv_blocks_used"] == 0
        if cache:
            assert load["prefix_cache_queries"] == 400 and load["prefix_cache_hits"] == 128, load
            assert load["kv_blocks_cached"] == 1, load
        else:
            assert load["prefix_cache_queries"] == 0 and load["prefix_cache_hits"] == 0, load
