"""npugraph-serve on loopback with OpenAI's own Python client: chat and completions, streamed and
whole; 8 concurrent greedy streams give the texts of the same requests run one at a time; a
client that leaves mid-stream frees its request's KV blocks (seen through /metrics); every bad
request is a 4xx with an OpenAI-shaped error naming the field; a full server answers 503 with
Retry-After; --api-key; SIGTERM drains a running stream before exiting; a fuzz of request bodies
never gets a 5xx or stops the server.

The server runs the tiny model the engine tests write (fast), on a port it picks itself (--port 0,
read from its first line), on 127.0.0.1 only, and stops by itself (--max-seconds) should the test
not stop it. The binary comes from NPUGRAPH_SERVE_BINARY (ctest sets it) or build/npugraph-serve.
"""
import concurrent.futures
import json
import os
import pathlib
import random
import re
import signal
import subprocess
import sys
import time

import pytest

openai = pytest.importorskip("openai")
httpx = pytest.importorskip("httpx")
pytest.importorskip("gguf")

ROOT = pathlib.Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "tests" / "python" / "llm"))
from test_engine_reference import write_tiny_model  # noqa: E402

MODEL_ID = "tiny"


def binary():
    b = os.environ.get("NPUGRAPH_SERVE_BINARY") or str(ROOT / "build" / "npugraph-serve")
    if not os.path.isfile(b):
        pytest.skip(f"npugraph-serve not built ({b})")
    return b


class Server:
    def __init__(self, model, *args):
        self.proc = subprocess.Popen([binary(), "--model", str(model), "--model-id", MODEL_ID, "--port", "0",
                                      "--max-seconds", "300", *args],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline()  # blocks until it listens (or exits)
        m = re.search(r"listening on (http://127\.0\.0\.1:\d+)", line)
        if not m:
            self.proc.kill()
            raise AssertionError(f"no listening line: {line!r}\n{self.proc.stderr.read()}")
        self.url = m.group(1)

    def client(self, **kw):
        return openai.OpenAI(base_url=self.url + "/v1", api_key=kw.pop("api_key", "none"), max_retries=0, **kw)

    def metrics(self):
        text = httpx.get(self.url + "/metrics").text
        out = {}
        for line in text.splitlines():
            if line and not line.startswith("#"):
                name, value = line.rsplit(" ", 1)
                out[name] = float(value)
        return out

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        return self.proc.returncode


def wait_for(predicate, what, timeout=30.0):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if predicate():
            return
        time.sleep(0.02)
    raise AssertionError(f"timed out waiting for {what}")


@pytest.fixture(scope="module")
def tiny(tmp_path_factory):
    path = tmp_path_factory.mktemp("serve") / "tiny.gguf"
    write_tiny_model(path)
    return path


@pytest.fixture(scope="module")
def server(tiny):
    s = Server(tiny, "--max-batch", "8")
    yield s
    assert s.stop() == 0


def chat(client, content, **kw):
    return client.chat.completions.create(model=MODEL_ID, messages=[{"role": "user", "content": content}],
                                          temperature=0, **kw)


def stream_text(stream):
    text, finish = "", None
    for chunk in stream:
        if chunk.choices:
            c = chunk.choices[0]
            text += (c.delta.content or "") if hasattr(c, "delta") else (c.text or "")
            finish = c.finish_reason or finish
    return text, finish


def test_models_and_health(server):
    models = server.client().models.list()
    assert [m.id for m in models.data] == [MODEL_ID]
    assert httpx.get(server.url + "/health").json() == {"status": "ok"}


def test_chat_and_completion_whole_and_streamed_agree(server):
    c = server.client()
    whole = chat(c, "hello there", max_tokens=20)
    assert whole.choices[0].finish_reason in ("stop", "length")
    assert whole.usage.completion_tokens >= 1 and whole.usage.prompt_tokens > 3
    assert whole.usage.total_tokens == whole.usage.prompt_tokens + whole.usage.completion_tokens
    text, finish = stream_text(chat(c, "hello there", max_tokens=20, stream=True))
    assert text == whole.choices[0].message.content
    assert finish == whole.choices[0].finish_reason
    comp = c.completions.create(model=MODEL_ID, prompt="the tall cat", max_tokens=12, temperature=0)
    assert comp.choices[0].finish_reason == "length" or comp.usage.completion_tokens < 12
    text, finish = stream_text(c.completions.create(model=MODEL_ID, prompt="the tall cat", max_tokens=12,
                                                    temperature=0, stream=True))
    assert text == comp.choices[0].text
    # usage in the stream when asked
    chunks = list(chat(c, "hi", max_tokens=5, stream=True, stream_options={"include_usage": True}))
    assert chunks[-1].usage is not None and chunks[-1].usage.completion_tokens >= 1
    # a stop string ends the text before it
    full = whole.choices[0].message.content
    if len(full) > 8:
        stop = full[4:7]
        cut = chat(c, "hello there", max_tokens=20, stop=[stop])
        assert cut.choices[0].message.content == full[:full.find(stop)]
        assert cut.choices[0].finish_reason == "stop"


def test_eight_concurrent_streams_equal_the_same_requests_one_at_a_time(server):
    c = server.client()
    prompts = [f"tell me about number {i}" for i in range(8)]
    alone = [chat(c, p, max_tokens=24 + i).choices[0].message.content for i, p in enumerate(prompts)]
    with concurrent.futures.ThreadPoolExecutor(8) as pool:
        together = list(pool.map(lambda ip: stream_text(chat(c, ip[1], max_tokens=24 + ip[0], stream=True))[0],
                                 enumerate(prompts)))
    assert together == alone


def test_a_client_leaving_mid_stream_cancels_and_frees_its_blocks(tiny):
    # --min-step-ms 50: the stream would run for seconds on its own, so it is still running when
    # the client leaves (the server sees the leaving at its next write, cancels, frees the blocks).
    s = Server(tiny, "--min-step-ms", "50")
    try:
        stream = chat(s.client(), "a long story please", max_tokens=400, stream=True)
        seen = 0
        for chunk in stream:
            seen += 1
            if seen == 3:
                break
        stream.close()
        wait_for(lambda: s.metrics().get('npugraph_requests_finished_total{reason="cancelled"}', 0) == 1,
                 "the stream's request to be cancelled")
        wait_for(lambda: s.metrics()["npugraph_kv_blocks_used"] == 0, "its KV blocks to be free")
        m = s.metrics()
        assert m["npugraph_requests_running"] == 0
        assert m.get('npugraph_requests_finished_total{reason="length"}', 0) == 0
        assert m["npugraph_time_to_first_token_seconds_count"] == 1
        assert m["npugraph_inter_token_latency_seconds_count"] >= 2
    finally:
        assert s.stop() == 0


def post(server, path, body, headers=None):
    data = body if isinstance(body, (str, bytes)) else json.dumps(body)
    return httpx.post(server.url + path, content=data, headers={"Content-Type": "application/json", **(headers or {})},
                      timeout=60)


def error_of(r):
    body = r.json()
    assert set(body) == {"error"}, body
    assert set(body["error"]) == {"message", "type", "param", "code"}, body
    return body["error"]


@pytest.mark.parametrize("path, body, status, param, words", [
    ("/v1/chat/completions", "{not json", 400, None, "not valid JSON"),
    ("/v1/chat/completions", [1, 2], 400, None, "must be a JSON object"),
    ("/v1/chat/completions", {"model": "gpt-4", "messages": [{"role": "user", "content": "hi"}]}, 404, "model",
     "does not exist"),
    ("/v1/chat/completions", {"model": MODEL_ID}, 400, "messages", "'messages' is required"),
    ("/v1/chat/completions", {"model": MODEL_ID, "messages": [{"role": "user", "content": "x" * 5000}]}, 400,
     "messages", "longer than the context"),
    ("/v1/chat/completions", {"model": MODEL_ID, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 0},
     400, "max_tokens", "'max_tokens' = 0"),
    ("/v1/chat/completions", {"model": MODEL_ID, "messages": [{"role": "user", "content": "hi"}], "max_tokens": -3},
     400, "max_tokens", "must be in [1,"),
    ("/v1/chat/completions", {"model": MODEL_ID, "messages": [{"role": "user", "content": "hi"}], "n": 17},
     400, "n", "at most 16 choices"),
    ("/v1/chat/completions", {"model": MODEL_ID, "messages": [{"role": "user", "content": "hi"}], "temperature": 7},
     400, "temperature", "'temperature' = 7"),
    ("/v1/chat/completions", {"model": MODEL_ID, "messages": [{"role": "user", "content": "hi"}], "top_p": 0},
     400, "top_p", "'top_p' = 0"),
    ("/v1/chat/completions", {"model": MODEL_ID, "messages": [{"role": "user", "content": "hi"}], "tools": []},
     400, "tools", "must be a non-empty array"),
    ("/v1/chat/completions", {"model": MODEL_ID, "messages": [{"role": "user", "content": "hi"}], "frobnicate": 1},
     400, "frobnicate", "not a field"),
    ("/v1/chat/completions", {"model": MODEL_ID, "messages": [{"role": "wizard", "content": "hi"}]},
     400, "messages[0].role", "'wizard'"),
    ("/v1/chat/completions", {"model": MODEL_ID, "messages": [{"role": "user", "content": "hi"}], "stream": "yes"},
     400, "stream", "must be a boolean"),
    ("/v1/completions", {"model": MODEL_ID, "prompt": 42}, 400, "prompt", "must be a string"),
    ("/v1/completions", {"model": MODEL_ID, "prompt": "hi", "echo": "yes"}, 400, "echo", "must be a boolean"),
    ("/v1/completions", {"model": MODEL_ID, "prompt": "hi", "stop": ["", "x"]}, 400, "stop", "empty string"),
])
def test_bad_requests_are_4xx_naming_the_field(server, path, body, status, param, words):
    r = post(server, path, body)
    assert r.status_code == status, r.text
    e = error_of(r)
    assert e["param"] == param
    assert words in e["message"], e["message"]


def test_a_prompt_longer_than_the_context_is_context_length_exceeded(server):
    # the engine's ContextLengthError, told apart by its type (not its text)
    for path, body, param in (
            ("/v1/chat/completions", {"model": MODEL_ID, "messages": [{"role": "user", "content": "x" * 5000}]},
             "messages"),
            ("/v1/completions", {"model": MODEL_ID, "prompt": "x " * 5000}, "prompt")):
        r = post(server, path, body)
        assert r.status_code == 400, r.text
        e = error_of(r)
        assert (e["code"], e["param"], e["type"]) == ("context_length_exceeded", param, "invalid_request_error"), e
        assert "longer than the context allows" in e["message"], e["message"]


def test_the_openai_client_sees_the_errors(server):
    c = server.client()
    with pytest.raises(openai.NotFoundError) as info:
        c.chat.completions.create(model="nope", messages=[{"role": "user", "content": "hi"}])
    assert info.value.body["param"] == "model"
    with pytest.raises(openai.BadRequestError) as info:
        c.chat.completions.create(model=MODEL_ID, messages=[{"role": "user", "content": "hi"}], max_tokens=0)
    assert info.value.body["param"] == "max_tokens"
    assert httpx.get(server.url + "/v1/nothing").status_code == 404


def test_fuzzed_bodies_get_4xx_or_200_and_the_server_lives(server):
    rng = random.Random(1234)
    valid = json.dumps({"model": MODEL_ID, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 2,
                        "temperature": 0.5, "stop": ["x"], "stream": False})
    values = [None, True, -1, 0, 1, 2.5, 1e308, -1e308, "", "x", [], {}, [1], {"a": 1}, {"5": 1.5}, "\u0000",
              "\ud7ff" * 3]
    keys = ["model", "messages", "max_tokens", "temperature", "top_p", "top_k", "seed", "stop", "stream", "n",
            "stream_options", "logprobs", "prompt", "zzz", "top_logprobs", "echo", "logit_bias", "presence_penalty",
            "frequency_penalty", "repetition_penalty"]
    statuses = {}
    for i in range(300):
        kind = i % 3
        if kind == 0:  # byte-level mutations of a valid body
            b = bytearray(valid.encode())
            for _ in range(rng.randint(1, 6)):
                b[rng.randrange(len(b))] = rng.randrange(256)
            body = bytes(b)
        elif kind == 1:  # a valid body with fields replaced by values of every kind
            d = json.loads(valid)
            for _ in range(rng.randint(1, 3)):
                d[rng.choice(keys)] = rng.choice(values)
            if rng.random() < 0.3:
                d["messages"] = [rng.choice(values) for _ in range(rng.randint(0, 3))]
            body = json.dumps(d)
        else:  # truncations
            body = valid[:rng.randrange(len(valid))]
        r = post(server, rng.choice(["/v1/chat/completions", "/v1/completions"]), body)
        statuses[r.status_code] = statuses.get(r.status_code, 0) + 1
        assert r.status_code in (200, 400, 404), (body, r.status_code, r.text)
        if r.status_code != 200:
            error_of(r)
    assert statuses.get(400, 0) > 100
    assert httpx.get(server.url + "/health").status_code == 200
    wait_for(lambda: server.metrics()["npugraph_kv_blocks_used"] == 0, "every block to be free")


def test_api_key_full_server_and_sigterm_drain(tiny):
    # --min-step-ms 20: the long stream below runs for seconds, so the full-server check sees it running.
    # and a float16 KV cache (--kv-dtype): the server's whole life on it
    s = Server(tiny, "--api-key", "sekrit", "--max-batch", "1", "--max-waiting", "0", "--min-step-ms", "20",
               "--kv-dtype", "f16")
    try:
        with pytest.raises(openai.AuthenticationError):
            chat(s.client(), "hi", max_tokens=2)
        c = s.client(api_key="sekrit")
        assert chat(c, "hi", max_tokens=2).usage.completion_tokens >= 1
        # One row, no queue: a running stream fills the server; the next request gets 503.
        stream = chat(c, "a long story", max_tokens=150, stream=True)
        it = iter(stream)
        next(it)
        r = post(s, "/v1/chat/completions", {"model": MODEL_ID, "messages": [{"role": "user", "content": "x"}]},
                 headers={"Authorization": "Bearer sekrit"})
        assert r.status_code == 503, r.text
        assert r.headers["Retry-After"] == "1"
        assert error_of(r)["code"] == "queue_full"
        # SIGTERM while the stream runs: it finishes (finish_reason and [DONE]), then the server exits 0.
        s.proc.send_signal(signal.SIGTERM)
        text, finish = stream_text(it)
        assert finish in ("length", "stop")
        assert len(text) > 0
        assert s.proc.wait(timeout=60) == 0
        assert "draining 1 requests" in s.proc.stdout.read()
    finally:
        s.stop()


def test_a_bad_kv_dtype_is_a_usage_error(tiny):
    r = subprocess.run([binary(), "--model", str(tiny), "--kv-dtype", "fp8"], capture_output=True, text=True,
                       timeout=60)
    assert r.returncode == 2
    assert "--kv-dtype = 'fp8': must be f32, f16 or bf16" in r.stderr
