"""npugraph-serve's n > 1 (issue 47 item 2): n choices per request, choice i generated as the same
request alone with seed + i would be (so each is checked against such a single request), with
OpenAI's shapes — whole: choices[0..n) in index order, usage counting the prompt once and every
choice's completion tokens; streamed: every chunk names its choice's index, each choice finishes
on its own, the usage chunk and [DONE] come once, after the last — through /v1/chat/completions
and /v1/completions (with echo and logprobs); n's bad values are 400s naming it; no KV block is
left afterwards. The tiny model's draws are too peaked to tell seeds apart: SmolLM2 (when fetched)
shows sampled choices that differ, each its seed's single request.
"""
import json
import pathlib
import sys

import pytest

pytest.importorskip("openai")
httpx = pytest.importorskip("httpx")
pytest.importorskip("gguf")

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parents[2] / "examples" / "llm"))
from decode import default_model  # noqa: E402 - the example's model lookup (tools/fetch_model.py's)
from test_server import MODEL_ID, Server, error_of, post, wait_for, write_tiny_model  # noqa: E402


@pytest.fixture(scope="module")
def server(tmp_path_factory):
    path = tmp_path_factory.mktemp("serve_choices") / "tiny.gguf"
    write_tiny_model(path)
    s = Server(path, "--max-batch", "8")
    yield s
    assert s.stop() == 0


MESSAGES = [{"role": "user", "content": "hello there"}]


def chat_body(**kw):
    return {"model": MODEL_ID, "messages": MESSAGES, "max_tokens": 10, **kw}


def single_chat(server, **kw):
    r = post(server, "/v1/chat/completions", chat_body(**kw))
    assert r.status_code == 200, r.text
    return r.json()


@pytest.mark.parametrize("sampling", [{"temperature": 0}, {"temperature": 1.0, "top_p": 0.95, "seed": 7}])
def test_each_chat_choice_is_the_single_request_with_its_seed(server, sampling):
    n = 3
    whole = single_chat(server, n=n, **sampling)
    assert [c["index"] for c in whole["choices"]] == list(range(n))
    singles = [single_chat(server, **{**sampling, "seed": sampling.get("seed", 0) + i}) for i in range(n)]
    for c, s in zip(whole["choices"], singles):
        assert c["message"] == s["choices"][0]["message"]
        assert c["finish_reason"] == s["choices"][0]["finish_reason"]
    u = whole["usage"]
    assert u["prompt_tokens"] == singles[0]["usage"]["prompt_tokens"]
    assert u["completion_tokens"] == sum(s["usage"]["completion_tokens"] for s in singles)
    assert u["total_tokens"] == u["prompt_tokens"] + u["completion_tokens"]
    wait_for(lambda: server.metrics()["npugraph_kv_blocks_used"] == 0, "every block to be free")


def events(r):
    out = []
    for line in r.text.splitlines():
        if line.startswith("data: "):
            out.append(line[len("data: "):])
    return out


def test_a_streamed_answer_interleaves_its_choices_and_ends_once(server):
    n = 3
    sampling = {"temperature": 1.0, "seed": 11}
    r = post(server, "/v1/chat/completions",
             chat_body(n=n, stream=True, stream_options={"include_usage": True}, **sampling))
    assert r.status_code == 200, r.text
    data = events(r)
    assert data[-1] == "[DONE]" and data.count("[DONE]") == 1
    chunks = [json.loads(d) for d in data[:-1]]
    assert chunks[-1]["choices"] == [] and "usage" in chunks[-1]
    assert all("usage" not in c or c["usage"] is None for c in chunks[:-1])
    text, finishes, roles = {}, {}, set()
    for c in chunks[:-1]:
        (choice,) = c["choices"]
        i = choice["index"]
        assert i not in finishes, "a piece after its choice finished"
        delta = choice["delta"]
        if delta.get("role"):
            roles.add(i)
        text[i] = text.get(i, "") + (delta.get("content") or "")
        if choice["finish_reason"]:
            finishes[i] = choice["finish_reason"]
    assert roles == set(range(n)) and set(finishes) == set(range(n))
    whole = single_chat(server, n=n, **sampling)
    for i in range(n):
        assert text[i] == whole["choices"][i]["message"]["content"]
        assert finishes[i] == whole["choices"][i]["finish_reason"]
    assert chunks[-1]["usage"] == whole["usage"]


def test_completion_choices_with_echo_and_logprobs(server):
    body = {"model": MODEL_ID, "prompt": "hello", "max_tokens": 6, "n": 2, "echo": True, "logprobs": 2,
            "temperature": 1.0, "seed": 3}
    r = post(server, "/v1/completions", body)
    assert r.status_code == 200, r.text
    whole = r.json()
    assert [c["index"] for c in whole["choices"]] == [0, 1]
    for i, c in enumerate(whole["choices"]):
        single = post(server, "/v1/completions", {**body, "n": 1, "seed": 3 + i}).json()["choices"][0]
        assert c["text"].startswith("hello")
        assert c["text"] == single["text"]
        assert c["logprobs"] == single["logprobs"]


@pytest.mark.parametrize("n, words", [(17, "at most 16"), (0, "'n'"), ("2", "'n'")])
def test_bad_n_is_a_400_naming_it(server, n, words):
    r = post(server, "/v1/chat/completions", chat_body(n=n))
    assert r.status_code == 400, r.text
    e = error_of(r)
    assert e["param"] == "n" and words in e["message"], e


@pytest.fixture(scope="module")
def smollm2():
    model = default_model()
    if not model.is_file():
        pytest.skip(f"model not fetched ({model}): run /usr/bin/python3 tools/fetch_model.py")
    s = Server(model, "--max-batch", "4", "--threads", "2")
    yield s
    assert s.stop() == 0


COLOUR = {"model": MODEL_ID, "messages": [{"role": "user", "content": "Name a colour."}], "max_tokens": 12,
          "temperature": 1.0}


def test_sampled_choices_differ_and_each_is_its_seeds_single_request(smollm2):
    body = {**COLOUR, "seed": 100}
    r = post(smollm2, "/v1/chat/completions", {**body, "n": 4})
    assert r.status_code == 200, r.text
    texts = [c["message"]["content"] for c in r.json()["choices"]]
    assert len(set(texts)) > 1, texts
    for i, t in enumerate(texts):
        single = post(smollm2, "/v1/chat/completions", {**body, "seed": 100 + i}).json()
        assert t == single["choices"][0]["message"]["content"], i


def test_requests_without_a_seed_draw_anew_and_a_seed_repeats(smollm2):
    def text(body):
        return post(smollm2, "/v1/chat/completions", body).json()["choices"][0]["message"]["content"]
    unseeded = [text(COLOUR) for _ in range(4)]
    assert len(set(unseeded)) > 1, unseeded  # each its own seed (OpenAI's, vLLM's behaviour)
    seeded = [text({**COLOUR, "seed": 5}) for _ in range(2)]
    assert seeded[0] == seeded[1]
