"""A load generator for OpenAI-compatible servers (npugraph-serve, llama.cpp's llama-server): N
concurrent streaming clients, each sending chat requests back to back; reports output tokens/s,
time to first token and inter-token latency (p50 / p99) per concurrency level; then, from
npugraph-serve's /metrics, the KV blocks and requests it still holds and its requests finished by
reason.

    # npugraph-serve on SmolLM2 (started and stopped by the script, on a free loopback port):
    .venv/bin/python bench/serve/load.py --server "build/npugraph-serve --port {port} --threads 2"
    # the peer (benchmark-only build of llama.cpp's server; bench/README.md says how):
    .venv/bin/python bench/serve/load.py --server "llama-server -m MODEL --port {port} -t 2 \
        --parallel 16 --cont-batching -c 32768"

Greedy (temperature 0) with a fixed max_tokens: each request's completion length is
what the model generates up to max_tokens, counted from the server's usage (include_usage).
Traffic goes to 127.0.0.1 only; every loop is bounded by a request count.
"""
import argparse
import concurrent.futures
import json
import shlex
import socket
import subprocess
import time

import httpx
import openai

PROMPTS = [
    "Write a short story about a robot who learns to paint.",
    "Explain how a hash table works, step by step.",
    "What are the main causes of the seasons on Earth?",
    "Describe a walk through a forest in autumn.",
    "Give me five tips for learning a new language.",
    "Why is the sky blue? Answer for a ten-year-old.",
    "Summarise the plot of a heist movie you invent.",
    "How does a compiler turn source code into a program?",
]


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def pct(values, q):
    if not values:
        return float("nan")
    v = sorted(values)
    return v[min(len(v) - 1, int(q * len(v)))]


def one_client(client, model, index, requests, max_tokens):
    out = []
    for r in range(requests):
        prompt = PROMPTS[(index + r) % len(PROMPTS)]
        t0 = time.perf_counter()
        first, last, gaps, tokens, chunks = None, None, [], 0, 0
        stream = client.chat.completions.create(model=model, messages=[{"role": "user", "content": prompt}],
                                                max_tokens=max_tokens, temperature=0, stream=True,
                                                stream_options={"include_usage": True})
        for chunk in stream:
            now = time.perf_counter()
            if chunk.usage is not None:
                tokens = chunk.usage.completion_tokens
            if chunk.choices and chunk.choices[0].delta and chunk.choices[0].delta.content:
                chunks += 1
                if first is None:
                    first = now - t0
                else:
                    gaps.append(now - last)
                last = now
        out.append({"ttft": first, "gaps": gaps, "tokens": tokens or chunks, "seconds": time.perf_counter() - t0})
    return out


def run_level(url, model, clients, requests, max_tokens):
    client = openai.OpenAI(base_url=url + "/v1", api_key="none", max_retries=0, timeout=600)
    t0 = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(clients) as pool:
        parts = list(pool.map(lambda i: one_client(client, model, i, requests, max_tokens), range(clients)))
    wall = time.perf_counter() - t0
    rs = [r for p in parts for r in p]
    ttft = [r["ttft"] for r in rs if r["ttft"] is not None]
    gaps = [g for r in rs for g in r["gaps"]]
    tokens = sum(r["tokens"] for r in rs)
    return {"clients": clients, "requests": len(rs), "output_tokens": tokens, "seconds": wall,
            "tokens_per_s": tokens / wall, "ttft_p50_ms": 1e3 * pct(ttft, 0.5), "ttft_p99_ms": 1e3 * pct(ttft, 0.99),
            "itl_p50_ms": 1e3 * pct(gaps, 0.5), "itl_p99_ms": 1e3 * pct(gaps, 0.99)}


def end_state(url):
    """npugraph-serve's /metrics once the load is over (waiting up to 10 s for the last requests to
    end): KV blocks held, requests running / waiting, and requests finished by reason; None for a
    server without those metrics (llama-server)."""
    deadline = time.monotonic() + 10
    while True:
        try:
            text = httpx.get(url + "/metrics", timeout=5).text
        except httpx.HTTPError:
            return None
        m = {}
        for line in text.splitlines():
            if line.startswith("npugraph_") and " " in line:
                name, value = line.rsplit(" ", 1)
                m[name] = float(value)
        if "npugraph_kv_blocks_used" not in m:
            return None
        busy = m["npugraph_kv_blocks_used"] + m.get("npugraph_requests_running", 0) + m.get("npugraph_requests_waiting", 0)
        if busy == 0 or time.monotonic() > deadline:
            return m
        time.sleep(0.2)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--url", help="a running server (else --server starts one)")
    ap.add_argument("--server", help="command starting the server; {port} is replaced by a free port")
    ap.add_argument("--model", help="the model id to ask for (default: the server's first /v1/models entry)")
    ap.add_argument("--clients", type=int, nargs="+", default=[1, 4, 16])
    ap.add_argument("--requests", type=int, default=3, help="requests per client per level")
    ap.add_argument("--max-tokens", type=int, default=128)
    ap.add_argument("--json", help="write the results here too")
    args = ap.parse_args()
    proc = None
    url = args.url
    if args.server:
        port = free_port()
        proc = subprocess.Popen(shlex.split(args.server.replace("{port}", str(port))), stdout=subprocess.DEVNULL,
                                stderr=subprocess.DEVNULL)
        url = f"http://127.0.0.1:{port}"
        deadline = time.monotonic() + 120
        while time.monotonic() < deadline:
            try:
                if httpx.get(url + "/health", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                pass
            if proc.poll() is not None:
                raise SystemExit(f"the server exited ({proc.returncode})")
            time.sleep(0.2)
    try:
        model = args.model or httpx.get(url + "/v1/models").json()["data"][0]["id"]
        run_level(url, model, 1, 1, 8)  # warm-up (graphs captured, caches filled)
        results = [run_level(url, model, c, args.requests, args.max_tokens) for c in args.clients]
        state = end_state(url)
    finally:
        if proc:
            proc.terminate()
            proc.wait(timeout=60)
    print(f"{'clients':>7} {'requests':>8} {'tokens':>7} {'tok/s':>8} {'TTFT p50':>9} {'TTFT p99':>9} "
          f"{'ITL p50':>8} {'ITL p99':>8}  (ms)")
    for r in results:
        print(f"{r['clients']:>7} {r['requests']:>8} {r['output_tokens']:>7} {r['tokens_per_s']:>8.1f} "
              f"{r['ttft_p50_ms']:>9.1f} {r['ttft_p99_ms']:>9.1f} {r['itl_p50_ms']:>8.1f} {r['itl_p99_ms']:>8.1f}")
    # Every request above finished (a failed one raises): none lost. What the server holds after:
    if state is not None:
        finished = {k.split('"')[1]: int(v) for k, v in state.items()
                    if k.startswith("npugraph_requests_finished_total{")}
        print(f"after: kv_blocks_used {int(state['npugraph_kv_blocks_used'])}, running "
              f"{int(state.get('npugraph_requests_running', 0))}, waiting {int(state.get('npugraph_requests_waiting', 0))}, "
              f"finished {finished}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump({"levels": results, "after": state}, f, indent=1)


if __name__ == "__main__":
    main()
