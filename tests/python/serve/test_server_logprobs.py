"""npugraph-serve's logprobs and logit adjustments with OpenAI's Python client: the response shapes
OpenAI gives (chat: choices[].logprobs.content[]; completions: tokens, token_logprobs,
top_logprobs, text_offset), whole and streamed alike, with echo too (the prompt's tokens first);
the logprobs are the model's raw distribution (a logit_bias changes the tokens, not the first
position's top_logprobs);
presence / frequency / repetition penalties and logit_bias change the greedy tokens; every bad
value is a 400 naming the field. The values themselves are checked against a float64
log-softmax of the same logits in tests/llm/test_engine_logprobs.cpp.
"""
import math
import pathlib
import sys

import pytest

pytest.importorskip("openai")
httpx = pytest.importorskip("httpx")
pytest.importorskip("gguf")

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from test_server import MODEL_ID, Server, error_of, post, write_tiny_model  # noqa: E402
from test_engine_reference import byte_alphabet  # noqa: E402

LL = 260  # the tiny model's token "ll" (3 specials, 256 bytes, "he", "ll")


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    path = tmp_path_factory.mktemp("serve_logprobs") / "tiny.gguf"
    write_tiny_model(path)
    s = Server(path, "--max-batch", "4")
    yield s
    assert s.stop() == 0


def chat(client, content, **kw):
    return client.chat.completions.create(model=MODEL_ID, messages=[{"role": "user", "content": content}],
                                          temperature=0, **kw)


def check_entry(e, top):
    assert isinstance(e.token, str) and isinstance(e.logprob, float) and e.logprob <= 0
    assert bytes(e.bytes).decode("utf-8", "replace") == e.token or "\\x" in e.token
    assert len(e.top_logprobs) == top
    lps = [t.logprob for t in e.top_logprobs]
    assert lps == sorted(lps, reverse=True)
    assert sum(math.exp(x) for x in lps) <= 1 + 1e-6
    for t in e.top_logprobs:
        assert isinstance(t.token, str) and isinstance(t.bytes, list)
    if top:  # greedy: the token taken is the most likely one
        assert e.token == e.top_logprobs[0].token and e.logprob == e.top_logprobs[0].logprob


def test_chat_logprobs_whole_and_streamed(server):
    c = server.client()
    whole = chat(c, "hello there", max_tokens=12, logprobs=True, top_logprobs=5)
    content = whole.choices[0].logprobs.content
    for e in content:
        check_entry(e, 5)
    # every token listed is in the text (not the end-of-generation token that ended it)
    text = b"".join(bytes(e.bytes) for e in content)
    assert text.decode("utf-8", "replace") == whole.choices[0].message.content
    assert len(content) == whole.usage.completion_tokens - (whole.choices[0].finish_reason == "stop")
    streamed = []
    for chunk in chat(c, "hello there", max_tokens=12, logprobs=True, top_logprobs=5, stream=True):
        if chunk.choices and chunk.choices[0].logprobs:
            streamed += chunk.choices[0].logprobs.content
    assert [(e.token, e.logprob, [(t.token, t.logprob) for t in e.top_logprobs]) for e in streamed] == \
        [(e.token, e.logprob, [(t.token, t.logprob) for t in e.top_logprobs]) for e in content]
    # logprobs without top_logprobs: no alternatives; without logprobs: null
    only = chat(c, "hello there", max_tokens=4, logprobs=True).choices[0].logprobs.content
    assert [e.top_logprobs for e in only] == [[]] * len(only)
    assert [e.token for e in only] == [e.token for e in content[:len(only)]]
    assert chat(c, "hello there", max_tokens=4).choices[0].logprobs is None
    # a choice ended by the end-of-generation token (<|im_end|>, made certain by a bias): not listed
    ended = chat(c, "hello there", max_tokens=4, logprobs=True, logit_bias={"2": 100})
    assert ended.choices[0].finish_reason == "stop" and ended.usage.completion_tokens == 1
    assert ended.choices[0].message.content == "" and ended.choices[0].logprobs.content == []


def test_completion_logprobs_whole_and_streamed(server):
    c = server.client()
    kw = dict(model=MODEL_ID, prompt="hello hello", max_tokens=10, temperature=0, logprobs=3)
    whole = c.completions.create(**kw).choices[0]
    lp = whole.logprobs
    n = len(lp.tokens)
    assert n == len(lp.token_logprobs) == len(lp.top_logprobs) == len(lp.text_offset) > 0
    for tok, x, top, off in zip(lp.tokens, lp.token_logprobs, lp.top_logprobs, lp.text_offset):
        assert x <= 0 and tok in top and top[tok] == x and len(top) <= 4
        assert max(top.values()) == x  # greedy
        assert list(top.values()) == sorted(top.values(), reverse=True)  # most likely first, as OpenAI's
        if "\\x" not in tok:
            assert whole.text[off:off + len(tok)] == tok
    assert lp.text_offset == sorted(lp.text_offset) and lp.text_offset[0] == 0
    tokens, token_lps, offsets = [], [], []
    for chunk in c.completions.create(stream=True, **kw):
        if chunk.choices and chunk.choices[0].logprobs:
            tokens += chunk.choices[0].logprobs.tokens
            token_lps += chunk.choices[0].logprobs.token_logprobs
            offsets += chunk.choices[0].logprobs.text_offset
    assert (tokens, token_lps, offsets) == (lp.tokens, lp.token_logprobs, lp.text_offset)
    zero = c.completions.create(**{**kw, "logprobs": 0}).choices[0].logprobs
    assert [list(t) for t in zero.top_logprobs] == [[t] for t in zero.tokens]  # the sampled token only


def test_logprobs_are_the_raw_distribution_and_logit_bias_picks_the_tokens(server):
    c = server.client()
    kw = dict(model=MODEL_ID, prompt="the tall cat", max_tokens=6, temperature=0, logprobs=5)
    plain = c.completions.create(**kw).choices[0]
    biased = c.completions.create(logit_bias={str(LL): 100}, **kw).choices[0]
    assert biased.text == "ll" * 6
    assert biased.logprobs.tokens == ["ll"] * 6
    # the first position's logits are the same request's: the same raw top_logprobs
    assert biased.logprobs.top_logprobs[0] == {**plain.logprobs.top_logprobs[0],
                                               "ll": biased.logprobs.token_logprobs[0]}
    banned = c.completions.create(logit_bias={str(LL): -100}, **kw).choices[0]
    assert "ll" not in banned.logprobs.tokens


def test_penalties_change_the_greedy_text_whole_and_streamed_alike(server):
    c = server.client()
    base = dict(model=MODEL_ID, prompt="hello hello hello", max_tokens=24, temperature=0)
    # The tiny model's greedy "o" leads the next token by ~28 nats: a bias takes most of that away,
    # so that a presence penalty has something to change.
    o = str(3 + byte_alphabet().index("o"))
    nearly = {"logit_bias": {o: -26}}
    plain = c.completions.create(**base).choices[0].text
    biased = c.completions.create(**base, extra_body=nearly).choices[0].text
    assert plain == "o" * 24 and biased.startswith("o")
    for extra, than in (({"frequency_penalty": 2.0}, plain), ({"repetition_penalty": 3.0}, plain),
                        ({**nearly, "presence_penalty": 2.0}, biased),
                        ({**nearly, "frequency_penalty": -2.0, "presence_penalty": 1.0}, biased)):
        whole = c.completions.create(**base, extra_body=extra).choices[0].text
        assert whole != than, extra
        streamed = "".join(ch.choices[0].text for ch in c.completions.create(**base, extra_body=extra, stream=True)
                           if ch.choices)
        assert streamed == whole, extra
    chat_whole = chat(c, "hello", max_tokens=16, frequency_penalty=1.5, presence_penalty=0.5)
    assert chat_whole.choices[0].finish_reason in ("stop", "length")


def test_echo_gives_the_prompt_and_its_tokens_logprobs(server):
    c = server.client()
    prompt = "abcdfgijk"  # one token per character (the tiny vocabulary merges only he and ll)
    kw = dict(model=MODEL_ID, prompt=prompt, max_tokens=5, temperature=0)
    plain = c.completions.create(logprobs=2, **kw).choices[0]
    assert c.completions.create(echo=True, **kw).choices[0].text == prompt + plain.text
    echoed = c.completions.create(echo=True, logprobs=2, **kw).choices[0]
    assert echoed.text == prompt + plain.text
    lp, P = echoed.logprobs, len(prompt)
    assert lp.tokens[:P] == list(prompt) and lp.tokens[P:] == plain.logprobs.tokens
    assert lp.token_logprobs[0] is None and lp.top_logprobs[0] is None
    assert lp.token_logprobs[P:] == plain.logprobs.token_logprobs
    assert lp.text_offset == list(range(P)) + [P + o for o in plain.logprobs.text_offset]
    for p in range(1, P):
        assert lp.token_logprobs[p] <= 0 and lp.top_logprobs[p][prompt[p]] == lp.token_logprobs[p]
        assert len(lp.top_logprobs[p]) <= 3
        # Independently: the prefix's own request, made to take token p by a bias; its logprob
        # is the raw one, so the prompt's at p.
        forced = c.completions.create(model=MODEL_ID, prompt=prompt[:p], max_tokens=1, temperature=0, logprobs=0,
                                      logit_bias={str(3 + byte_alphabet().index(prompt[p])): 100}).choices[0]
        assert forced.logprobs.tokens == [prompt[p]]
        assert forced.logprobs.token_logprobs[0] == pytest.approx(lp.token_logprobs[p], abs=1e-4)
    tokens, token_lps, offsets, text = [], [], [], ""
    for chunk in c.completions.create(echo=True, logprobs=2, stream=True, **kw):
        if chunk.choices:
            text += chunk.choices[0].text
            if chunk.choices[0].logprobs:
                tokens += chunk.choices[0].logprobs.tokens
                token_lps += chunk.choices[0].logprobs.token_logprobs
                offsets += chunk.choices[0].logprobs.text_offset
    assert (text, tokens, token_lps, offsets) == (echoed.text, lp.tokens, lp.token_logprobs, lp.text_offset)


CHAT = {"model": MODEL_ID, "messages": [{"role": "user", "content": "hi"}]}
COMP = {"model": MODEL_ID, "prompt": "hi"}


@pytest.mark.parametrize("path, extra, param, words", [
    ("/v1/chat/completions", {"logprobs": True, "top_logprobs": 21}, "top_logprobs", "at most 20"),
    ("/v1/chat/completions", {"logprobs": True, "top_logprobs": -1}, "top_logprobs", "[0, 20]"),
    ("/v1/chat/completions", {"top_logprobs": 3}, "top_logprobs", "needs 'logprobs': true"),
    ("/v1/chat/completions", {"logprobs": 1}, "logprobs", "must be a boolean"),
    ("/v1/completions", {"logprobs": 6}, "logprobs", "at most 5"),
    ("/v1/completions", {"logprobs": True}, "logprobs", "must be an integer"),
    ("/v1/completions", {"logprobs": 2, "echo": 1}, "echo", "must be a boolean"),
    ("/v1/chat/completions", {"echo": True}, "echo", "not a field"),
    ("/v1/chat/completions", {"presence_penalty": 2.5}, "presence_penalty", "[-2.0, 2.0]"),
    ("/v1/completions", {"frequency_penalty": -3}, "frequency_penalty", "[-2.0, 2.0]"),
    ("/v1/chat/completions", {"frequency_penalty": "x"}, "frequency_penalty", "must be a number"),
    ("/v1/chat/completions", {"repetition_penalty": 0}, "repetition_penalty", "> 0"),
    ("/v1/completions", {"repetition_penalty": -1.5}, "repetition_penalty", "> 0"),
    ("/v1/completions", {"repetition_penalty": "big"}, "repetition_penalty", "must be a number"),
    ("/v1/chat/completions", {"logit_bias": [1, 2]}, "logit_bias", "must be an object"),
    ("/v1/chat/completions", {"logit_bias": {"abc": 1}}, "logit_bias", "'abc'"),
    ("/v1/chat/completions", {"logit_bias": {"-1": 1}}, "logit_bias", "'-1'"),
    ("/v1/completions", {"logit_bias": {"99999": 1}}, "logit_bias", "[0, 261)"),
    ("/v1/completions", {"logit_bias": {"5": 200}}, "logit_bias", "[-100, 100]"),
    ("/v1/completions", {"logit_bias": {"5": "x"}}, "logit_bias", "must be a number"),
    ("/v1/completions", {"logit_bias": {str(i): 1 for i in range(1025)}}, "logit_bias", "at most 1024"),
])
def test_bad_values_are_400s_naming_the_field(server, path, extra, param, words):
    r = post(server, path, {**(CHAT if "chat" in path else COMP), **extra})
    assert r.status_code == 400, r.text
    e = error_of(r)
    assert e["param"] == param
    assert words in e["message"], e["message"]
