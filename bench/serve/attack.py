"""Hostile and careless clients against an OpenAI-compatible server, measured (issue 46's figures):

  health   time for GET /health to answer while N connections trickle header bytes (1 byte/s)
  memory   the server's peak and settled resident memory (VmHWM, VmRSS) after a 256 MB chunked
           body and a request of 100,000 headers
  sigterm  seconds from SIGTERM to exit while 20 connections trickle and one stream runs
  hol      the longest gap between a running stream's chunks while 16 clients post 4 MB prompts
  copies   of 16 concurrent greedy copies of a long prompt (several prefill chunks), how many
           return the text of the same request run alone

    .venv/bin/python bench/serve/attack.py --server "build/npugraph-serve --port {port} --threads 2"

The server is started and stopped by the script, on a free loopback port; every loop is bounded.
"""
import argparse
import concurrent.futures
import json
import shlex
import signal
import socket
import statistics
import subprocess
import threading
import time

import httpx


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Target:
    def __init__(self, command):
        self.port = free_port()
        self.proc = subprocess.Popen(shlex.split(command.format(port=self.port)), stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, text=True)
        self.url = f"http://127.0.0.1:{self.port}"
        deadline = time.monotonic() + 300
        while time.monotonic() < deadline:
            try:
                if httpx.get(self.url + "/health", timeout=2).status_code == 200:
                    break
            except httpx.HTTPError:
                time.sleep(0.2)
        self.model = httpx.get(self.url + "/v1/models", timeout=10).json()["data"][0]["id"]

    def status(self, key):
        with open(f"/proc/{self.proc.pid}/status") as f:
            for line in f:
                if line.startswith(key + ":"):
                    return int(line.split()[1]) / 1024  # MiB
        return float("nan")

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=120)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def trickler(port, stop):
    try:
        s = socket.create_connection(("127.0.0.1", port), timeout=5)
        s.sendall(b"GET /health HTTP/1.1\r\nHost: x\r\n")
        while not stop.is_set():
            s.sendall(b"X")
            stop.wait(1.0)
    except OSError:
        pass


def slow_clients(t, n):
    stop = threading.Event()
    threads = [threading.Thread(target=trickler, args=(t.port, stop), daemon=True) for _ in range(n)]
    for th in threads:
        th.start()
    time.sleep(2)  # let them connect and start trickling (a setup, not an assertion)
    return stop, threads


def health(t, n):
    stop, threads = slow_clients(t, n)
    times = []
    for _ in range(5):
        t0 = time.monotonic()
        try:
            httpx.get(t.url + "/health", timeout=10)
            times.append(time.monotonic() - t0)
        except httpx.HTTPError:
            times.append(float("inf"))
    stop.set()
    return {"clients": n, "health_seconds": times}


def flood(port, head, pieces, tail):
    """Sends head, the pieces and tail on one connection until the server stops taking them;
    returns how many pieces went."""
    s = socket.create_connection(("127.0.0.1", port), timeout=30)
    sent = 0
    try:
        s.sendall(head)
        for piece in pieces:
            s.sendall(piece)
            sent += 1
        s.sendall(tail)
        s.recv(100)
    except OSError:
        pass
    s.close()
    return sent


def memory(t):
    before = t.status("VmRSS")
    # a chunked body of 256 MB, then a request of 100,000 headers of 2 KB
    sent = flood(t.port, b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nTransfer-Encoding: chunked\r\n\r\n",
                 (b"%x\r\n" % (1 << 20) + b"a" * (1 << 20) + b"\r\n" for _ in range(256)), b"0\r\n\r\n")
    headers_sent = flood(t.port, b"GET /health HTTP/1.1\r\nHost: x\r\n",
                         (b"X-%d: %s\r\n" % (i, b"v" * 2000) for i in range(100_000)), b"\r\n")
    time.sleep(2)  # let it settle before reading the resident size (a setup, not an assertion)
    return {"rss_before_mib": before, "chunked_mib_accepted": sent, "headers_sent": headers_sent,
            "peak_mib": t.status("VmHWM"), "rss_after_mib": t.status("VmRSS")}


def sigterm(t):
    stop, threads = slow_clients(t, 20)
    c = httpx.Client(timeout=120)
    body = {"model": t.model, "messages": [{"role": "user", "content": "Tell me a story."}], "max_tokens": 32,
            "temperature": 0, "stream": True}
    with c.stream("POST", t.url + "/v1/chat/completions", json=body) as r:
        it = r.iter_lines()
        next(it)
        t0 = time.monotonic()
        t.proc.send_signal(signal.SIGTERM)
        for _ in it:
            pass
    try:
        t.proc.wait(timeout=120)
        took = time.monotonic() - t0
    except subprocess.TimeoutExpired:
        took = float("inf")
    stop.set()
    return {"exit_seconds": took, "exit_status": t.proc.returncode}


def hol(t):
    body = {"model": t.model, "messages": [{"role": "user", "content": "Tell me a long story."}],
            "max_tokens": 200, "temperature": 0, "stream": True}
    big = {"model": t.model, "messages": [{"role": "user", "content": "word " * (4_000_000 // 5)}], "max_tokens": 1}
    gaps, statuses = [], []
    with httpx.Client(timeout=300) as c, c.stream("POST", t.url + "/v1/chat/completions", json=body) as r:
        it = r.iter_lines()
        next(it)
        pool = concurrent.futures.ThreadPoolExecutor(16)
        futs = [pool.submit(lambda: httpx.post(t.url + "/v1/chat/completions", json=big, timeout=300).status_code)
                for _ in range(16)]
        last = time.monotonic()
        for line in it:
            if line:
                now = time.monotonic()
                gaps.append(now - last)
                last = now
        statuses = [f.result() for f in futs]
        pool.shutdown()
    return {"max_gap_seconds": max(gaps), "median_gap_seconds": statistics.median(gaps),
            "big_prompt_statuses": sorted(set(statuses))}


def copies(t, n=16, words=700):
    prompt = " ".join(f"item{i % 97} is next to item{(i * 7) % 89}." for i in range(words // 6))
    body = {"model": t.model, "messages": [{"role": "user", "content": prompt + " Summarise."}],
            "max_tokens": 24, "temperature": 0}
    alone = httpx.post(t.url + "/v1/chat/completions", json=body, timeout=600).json()
    ref = alone["choices"][0]["message"]["content"]
    with concurrent.futures.ThreadPoolExecutor(n) as pool:
        outs = list(pool.map(lambda _: httpx.post(t.url + "/v1/chat/completions", json=body, timeout=600).json(),
                             range(n)))
    same = sum(o["choices"][0]["message"]["content"] == ref for o in outs)
    return {"prompt_tokens": alone["usage"]["prompt_tokens"], "identical": f"{same} of {n}"}


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--server", required=True, help="the command; {port} is replaced by a free port")
    ap.add_argument("--only", default="health,memory,sigterm,hol,copies")
    ap.add_argument("--slow", type=int, default=200, help="trickling connections for 'health'")
    a = ap.parse_args()
    out = {}
    for what in a.only.split(","):
        t = Target(a.server)
        try:
            out[what] = {"health": lambda: health(t, a.slow), "memory": lambda: memory(t),
                         "sigterm": lambda: sigterm(t), "hol": lambda: hol(t), "copies": lambda: copies(t)}[what]()
        finally:
            t.stop()
        print(json.dumps({what: out[what]}), flush=True)
    med = out.get("health", {}).get("health_seconds")
    if med:
        print("health median seconds:", statistics.median(med))


if __name__ == "__main__":
    main()
