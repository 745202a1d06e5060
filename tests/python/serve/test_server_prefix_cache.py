"""npugraph-serve's prefix cache (on by default; Note [Prefix cache] in src/llm/prefix_cache.hpp):
a second identical completion of 600 prompt tokens takes exactly 512 of them from the cache — the
first prompt's full prefill chunks of 128 (the server's default; 4 blocks of 128), the hit in steps
of 128 — which /metrics counts (queries and hits in tokens, cached blocks apart from used ones, none used when
idle) and usage.prompt_tokens_details.cached_tokens reports; its tokens and logprobs are those of a
server started with --no-prefix-cache, which looks nothing up; an echo request (prompt logprobs)
computes its whole prompt and gets the uncached server's values.

The prompts are digits, one token each in the tiny model's byte vocabulary, so the counts are known
by hand; the tiny model is written with a context of 1024 tokens.
"""
import pathlib
import sys

import pytest

pytest.importorskip("openai")
httpx = pytest.importorskip("httpx")
pytest.importorskip("gguf")

sys.path.insert(0, str(pathlib.Path(__file__).resolve().parent))
from test_server import MODEL_ID, Server, post, wait_for, write_tiny_model  # noqa: E402

PROMPT = "".join(str(i * 7 % 10) for i in range(600))  # 600 tokens: 4 full blocks and a part


@pytest.fixture(scope="module")
def model(tmp_path_factory):
    path = tmp_path_factory.mktemp("serve_prefix") / "tiny.gguf"
    write_tiny_model(path, context=1024)
    return path


@pytest.fixture(scope="module")
def cached(model):
    s = Server(model, "--max-batch", "2")
    yield s
    assert s.stop() == 0


@pytest.fixture(scope="module")
def uncached(model):
    s = Server(model, "--max-batch", "2", "--no-prefix-cache")
    yield s
    assert s.stop() == 0


def complete(server, **kw):
    body = {"model": MODEL_ID, "prompt": PROMPT, "max_tokens": 6, "temperature": 0, "logprobs": 3, **kw}
    r = post(server, "/v1/completions", body)
    assert r.status_code == 200, r.text
    return r.json()


def prefix_metrics(server):
    m = server.metrics()
    return {k: m[k] for k in ("npugraph_prefix_cache_queries_total", "npugraph_prefix_cache_hits_total",
                              "npugraph_kv_blocks_cached", "npugraph_kv_blocks_used")}


def test_a_second_identical_prompt_takes_its_full_chunks_from_the_cache(cached, uncached):
    first = complete(cached)
    assert first["usage"]["prompt_tokens"] == 600
    assert first["usage"]["prompt_tokens_details"] == {"cached_tokens": 0}
    wait_for(lambda: cached.metrics()["npugraph_kv_blocks_used"] == 0, "the first request's blocks to be free")
    assert prefix_metrics(cached) == {"npugraph_prefix_cache_queries_total": 600,
                                      "npugraph_prefix_cache_hits_total": 0,
                                      "npugraph_kv_blocks_cached": 4, "npugraph_kv_blocks_used": 0}
    second = complete(cached)
    assert second["usage"]["prompt_tokens_details"] == {"cached_tokens": 512}
    wait_for(lambda: cached.metrics()["npugraph_kv_blocks_used"] == 0, "the second request's blocks to be free")
    assert prefix_metrics(cached) == {"npugraph_prefix_cache_queries_total": 1200,
                                      "npugraph_prefix_cache_hits_total": 512,
                                      "npugraph_kv_blocks_cached": 4, "npugraph_kv_blocks_used": 0}
    m = cached.metrics()
    assert m["npugraph_kv_blocks_free"] > m["npugraph_kv_blocks_cached"]  # cached blocks count as free
    # The same tokens and logprobs as without the cache, to the last digit the JSON carries.
    cold = complete(uncached)
    assert cold["usage"]["prompt_tokens_details"] == {"cached_tokens": 0}
    for got in (first, second):
        assert got["choices"][0]["text"] == cold["choices"][0]["text"]
        assert got["choices"][0]["logprobs"] == cold["choices"][0]["logprobs"]
    assert prefix_metrics(uncached)["npugraph_prefix_cache_queries_total"] == 0
    assert prefix_metrics(uncached)["npugraph_kv_blocks_cached"] == 0


def test_an_echo_request_computes_its_whole_prompt(cached, uncached):
    complete(cached)  # the prompt's blocks are cached
    before = prefix_metrics(cached)
    echo = complete(cached, echo=True)
    assert echo["usage"]["prompt_tokens_details"] == {"cached_tokens": 0}
    assert 600 < len(echo["choices"][0]["logprobs"]["tokens"]) <= 600 + 6
    assert prefix_metrics(cached)["npugraph_prefix_cache_queries_total"] == before["npugraph_prefix_cache_queries_total"]
    cold = complete(uncached, echo=True)
    assert echo["choices"][0]["logprobs"] == cold["choices"][0]["logprobs"]
