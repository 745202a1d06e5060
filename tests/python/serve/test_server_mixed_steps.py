"""npugraph-serve's mixed steps (Note [Mixed steps] in src/llm/engine_step.cpp): a prompt that joins
while another request decodes runs its chunk inside that request's decode step. The joining
request's tokens and logprobs, and the decoding one's, are those of a server started with
--no-mixed-steps, which runs the chunk before the decode step; /metrics counts the mixed steps
(npugraph_mixed_steps_total), and none on that server.

On SmolLM2 (when fetched): the decoding request streams 200 tokens (its end tokens banned by
logit_bias), about 0.7 s of decode steps; the second request is sent when its first event arrives,
so it joins while the first decodes — the count of mixed steps says it did. (On the tiny model the
first request could end before the second arrived; the engine tests join mid-flight
deterministically.)
"""
import json
import pathlib
import sys

import pytest

httpx = pytest.importorskip("httpx")
pytest.importorskip("gguf")

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
sys.path.insert(0, str(pathlib.Path(__file__).resolve().parents[3] / "examples" / "llm"))
from decode import default_model  # noqa: E402 - the example's model lookup (tools/fetch_model.py's)
from test_server import MODEL_ID, Server, post, wait_for  # noqa: E402

JOINING = " ".join(f"item {i}" for i in range(100))  # about 400 tokens: four prefill chunks of 128


@pytest.fixture(scope="module")
def model():
    path = default_model()
    if not path.is_file():
        pytest.skip(f"model not fetched ({path}): run /usr/bin/python3 tools/fetch_model.py")
    return path


def run_scenario(server):
    """A long streamed completion; while it decodes, a completion of JOINING with logprobs."""
    long_body = {"model": MODEL_ID, "prompt": "Count with me: 1 2 3", "max_tokens": 200, "temperature": 0,
                 "logprobs": 2, "stream": True,
                 "logit_bias": {"0": -100, "2": -100}}  # SmolLM2's <|endoftext|> and <|im_end|>
    text, logprobs = [], []
    with httpx.Client(timeout=120) as client:
        with client.stream("POST", server.url + "/v1/completions", json=long_body) as r:
            assert r.status_code == 200
            lines = r.iter_lines()
            joined = None
            for line in lines:
                if not line.startswith("data: ") or line == "data: [DONE]":
                    continue
                chunk = json.loads(line[len("data: "):])
                for c in chunk["choices"]:
                    text.append(c["text"])
                    if c.get("logprobs"):
                        logprobs.extend(c["logprobs"]["token_logprobs"])
                if joined is None:  # the long request decodes: the second one joins now
                    resp = post(server, "/v1/completions", {"model": MODEL_ID, "prompt": JOINING, "max_tokens": 8,
                                                            "temperature": 0, "logprobs": 3})
                    assert resp.status_code == 200, resp.text
                    joined = resp.json()
    assert joined["usage"]["prompt_tokens"] > 256
    return joined, "".join(text), logprobs


def test_a_prompt_joining_a_decoding_request_gets_the_bits_of_separate_steps(model):
    mixed = Server(model, "--max-batch", "2", "--threads", "2")
    try:
        joined, long_text, long_logprobs = run_scenario(mixed)
        wait_for(lambda: mixed.metrics()["npugraph_kv_blocks_used"] == 0, "every block to be free")
        mixed_count = mixed.metrics()["npugraph_mixed_steps_total"]
    finally:
        assert mixed.stop() == 0
    separate = Server(model, "--max-batch", "2", "--threads", "2", "--no-mixed-steps")
    try:
        want, want_text, want_logprobs = run_scenario(separate)
        assert separate.metrics()["npugraph_mixed_steps_total"] == 0
    finally:
        assert separate.stop() == 0
    # Each of the joining prompt's chunks (128 tokens, the server's default) inside one of the long
    # request's decode steps.
    assert mixed_count == -(-joined["usage"]["prompt_tokens"] // 128)
    assert joined["choices"][0]["text"] == want["choices"][0]["text"]
    assert joined["choices"][0]["logprobs"] == want["choices"][0]["logprobs"]
    assert long_text == want_text
    assert long_logprobs == want_logprobs
