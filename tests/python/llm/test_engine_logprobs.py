"""Logprobs and logit adjustments from Python (npugraph.llm.Engine.submit's logprobs,
prompt_logprobs, presence / frequency / repetition penalties, logit_bias) on the tiny model written
with the gguf package. The logprobs are checked against numpy's float64 log-softmax of the raw
logits rows the engine keeps (keep_full_logits), the greedy tokens under adjustments against the
argmax of the rows adjusted here as npugraph::llm::Request's comment says.
"""
import pathlib
import sys

import pytest

np = pytest.importorskip("numpy")
gguf = pytest.importorskip("gguf")
npugraph = pytest.importorskip("npugraph")

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
from test_engine_reference import write_tiny_model  # noqa: E402


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    path = tmp_path_factory.mktemp("logprobs") / "tiny.gguf"
    write_tiny_model(path)
    return str(path)


def run(engine, prompt, **kw):
    rid = engine.submit(prompt, **kw)
    steps = []
    while not engine.idle:
        for o in engine.step():
            assert o["id"] == rid
            steps.append(o)
    return steps, steps[-1]["result"]


def log_softmax(row):
    z = row.astype(np.float64)
    m = z.max()
    return z - m - np.log(np.exp(z - m).sum())


@pytest.mark.parametrize("mode", ["graph", "eager"])
def test_logprobs_are_numpys_float64_log_softmax_of_the_raw_logits(tiny, mode):
    e = npugraph.llm.Engine(tiny, max_batch=2, mode=mode, keep_full_logits=True)
    steps, r = run(e, "hello there", chat=False, max_tokens=8, temperature=0.9, seed=5, logprobs=6,
                   frequency_penalty=0.5, logit_bias={7: 2.0})  # raw: before the adjustments
    assert len(r["logprobs"]) == len(r["tokens"]) == r["logits"].shape[0]
    assert [t for o in steps for t in o["logprobs"]] == r["logprobs"]
    for lp, token, row in zip(r["logprobs"], r["tokens"], r["logits"]):
        ref = log_softmax(row)
        assert lp["token"] == token
        assert lp["logprob"] == pytest.approx(ref[token], abs=1e-4)
        order = np.lexsort((np.arange(row.size), -row))  # logit descending, then id ascending
        assert [i for i, _ in lp["top"]] == list(order[:6])
        assert [x for _, x in lp["top"]] == pytest.approx(list(ref[order[:6]]), abs=1e-4)


def test_prompt_logprobs_start_with_none_and_follow_the_prompt(tiny):
    e = npugraph.llm.Engine(tiny, prefill_chunk=4)
    _, r = run(e, "abcdfgijk", chat=False, max_tokens=2, prompt_logprobs=2)
    lps = r["prompt_logprobs"]
    assert [t["token"] for t in lps] == r["prompt_tokens"]
    assert np.isnan(lps[0]["logprob"]) and lps[0]["top"] == []
    assert all(t["logprob"] <= 0 and len(t["top"]) == 2 for t in lps[1:])


def adjusted(row, prompt, before, presence=0.0, frequency=0.0, repetition=1.0, bias=None):
    z = row.astype(np.float32).copy()
    seen = set(prompt) | set(before)
    for t in range(z.size):
        if repetition != 1 and t in seen:
            z[t] = z[t] / np.float32(repetition) if z[t] > 0 else z[t] * np.float32(repetition)
        c = before.count(t)
        add = np.float32((bias or {}).get(t, 0.0) - c * frequency - (presence if c else 0.0))
        z[t] = z[t] + add
    return z


@pytest.mark.parametrize("kw", [dict(frequency_penalty=2.0), dict(repetition_penalty=2.5),
                                dict(presence_penalty=-1.0, frequency_penalty=2.0, logit_bias={100: 27.0, 101: 26.5})])
def test_adjusted_greedy_tokens_are_the_argmax_of_the_rows_adjusted_here(tiny, kw):
    e = npugraph.llm.Engine(tiny, keep_full_logits=True)
    _, plain = run(e, "hello hello", chat=False, max_tokens=24)
    _, r = run(e, "hello hello", chat=False, max_tokens=24, **kw)
    assert r["tokens"] != plain["tokens"]
    for k, (token, row) in enumerate(zip(r["tokens"], r["logits"])):
        z = adjusted(row, r["prompt_tokens"], r["tokens"][:k], kw.get("presence_penalty", 0.0),
                     kw.get("frequency_penalty", 0.0), kw.get("repetition_penalty", 1.0), kw.get("logit_bias"))
        assert token == int(np.argmax(z)), k


@pytest.mark.parametrize("kwargs, words", [
    (dict(logprobs=21), "request.logprobs = 21: must be in [0, 20]"),
    (dict(prompt_logprobs=-2), "request.prompt_logprobs = -2"),
    (dict(presence_penalty=3.0), "request.presence_penalty = 3: must be in [-2, 2]"),
    (dict(repetition_penalty=0.0), "request.repetition_penalty = 0: must be finite and > 0"),
    (dict(logit_bias={5: 500.0}), "request.logit_bias[5] = 500: must be in [-100, 100]"),
    (dict(logit_bias={99999: 1.0}), "request.logit_bias[99999]: token 99999 is outside the vocabulary"),
])
def test_bad_values_name_the_field(tiny, kwargs, words):
    e = npugraph.llm.Engine(tiny)
    with pytest.raises(npugraph.ArgumentError) as info:
        e.submit("a", **kwargs)
    assert words in str(info.value)
    assert e.idle
