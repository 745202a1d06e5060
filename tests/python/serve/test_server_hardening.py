"""npugraph-serve against slow, careless and hostile clients (Note [HTTP layer], Note [Engine host]):
trickling clients neither starve /health nor outlive the header deadline; headers and bodies are
bounded in every encoding (431, 413) and the key is checked before a body is read; admission is
atomic and a 503 is reachable under the defaults; a prompt its bytes prove too long is refused
without tokenising; work whose client has gone is cancelled (streamed or not, queued or running)
while a half-closed client still gets its answer; SIGTERM drains, closes slow connections and
exits 0, a second signal exits at once; and the small ones: 1e400, pipelining, HTTP/1.0, NUL in a
key, the scheme's case, /metrics behind the key.

Every server listens on 127.0.0.1 on a port it picks and stops by itself (--max-seconds). Raw
sockets where the HTTP client libraries would hide what is tested. No test sleeps and then asserts
that something did not happen: each waits for a condition, with a deadline.
"""
import concurrent.futures
import json
import signal
import socket
import threading

import pytest

from test_server import MODEL_ID, Server, error_of, httpx, post, tiny, wait_for  # noqa: F401

BODY = {"model": MODEL_ID, "messages": [{"role": "user", "content": "hi"}], "max_tokens": 3, "temperature": 0}


def address(server):
    host, port = server.url.removeprefix("http://").split(":")
    return host, int(port)


def connect(server, timeout=30.0):
    s = socket.create_connection(address(server), timeout=timeout)
    return s


def request_bytes(path, body=None, method=None, headers=(), version="1.1"):
    data = b"" if body is None else (body if isinstance(body, bytes) else json.dumps(body).encode())
    method = method or ("POST" if body is not None else "GET")
    lines = [f"{method} {path} HTTP/{version}", "Host: 127.0.0.1"]
    if body is not None:
        lines += ["Content-Type: application/json", f"Content-Length: {len(data)}"]
    lines += list(headers)
    return ("\r\n".join(lines) + "\r\n\r\n").encode() + data


def read_all(sock):
    out = b""
    while True:
        try:
            chunk = sock.recv(65536)
        except (ConnectionResetError, BrokenPipeError):
            break
        if not chunk:
            break
        out += chunk
    return out


def responses(raw):
    """Splits a byte stream into (status, headers, body) answers, skipping 1xx; bodies by
    Content-Length, chunked, or up to the end."""
    out = []
    while raw:
        head, sep, rest = raw.partition(b"\r\n\r\n")
        assert sep, raw[:200]
        lines = head.decode("latin-1").split("\r\n")
        status = int(lines[0].split()[1])
        headers = {}
        for line in lines[1:]:
            k, _, v = line.partition(":")
            headers[k.strip().lower()] = v.strip()
        if 100 <= status < 200:
            raw = rest
            continue
        if "content-length" in headers:
            n = int(headers["content-length"])
            body, raw = rest[:n], rest[n:]
        elif headers.get("transfer-encoding") == "chunked":
            body = b""
            while True:
                size_line, _, rest = rest.partition(b"\r\n")
                n = int(size_line, 16)
                if n == 0:
                    rest = rest[2:]
                    break
                body += rest[:n]
                rest = rest[n + 2:]
            raw = rest
        else:
            body, raw = rest, b""
        out.append((status, headers, body))
    return out


def metric(server, name):
    return server.metrics().get(name, 0)


# --- slow clients ---------------------------------------------------------------------------------

def trickle(server, stop, cut, first=b"GET /health HTTP/1.1\r\nHost: x\r\n"):
    """A client sending header bytes one at a time until `stop` is set or the server cuts it."""
    s = connect(server)
    try:
        s.sendall(first)
        while not stop.is_set():
            s.sendall(b"X")
            if stop.wait(0.2):
                break
    except OSError:
        cut.append(1)
    finally:
        s.close()


def tricklers(server, n):
    """n trickling clients, started; set `stop` to end them, `cut` counts those the server cut."""
    stop, cut = threading.Event(), []
    threads = [threading.Thread(target=trickle, args=(server, stop, cut)) for _ in range(n)]
    for t in threads:
        t.start()
    return stop, cut, threads


def test_two_hundred_trickling_clients_do_not_starve_health_or_completions(tiny):
    s = Server(tiny, "--max-connections", "64")
    stop, cut, threads = tricklers(s, 200)
    try:
        wait_for(lambda: len(cut) > 0, "the connection bound to close trickling clients")  # 200 > 64
        for _ in range(5):
            r = httpx.get(s.url + "/health", timeout=20)
            assert r.status_code == 200 and r.json() == {"status": "ok"}
            assert metric(s, "npugraph_requests_running") == 0
            assert post(s, "/v1/chat/completions", BODY).status_code == 200
        assert any(t.is_alive() for t in threads)  # they were still trickling
    finally:
        stop.set()
        for t in threads:
            t.join()
        assert s.stop() == 0


def test_a_trickling_header_is_cut_at_the_header_deadline(tiny):
    s = Server(tiny, "--header-timeout-ms", "1000")
    stop, cut = threading.Event(), []
    t = threading.Thread(target=trickle, args=(s, stop, cut))
    try:
        t.start()
        wait_for(lambda: cut, "the server to close a header that takes longer than 1 s in all", timeout=30)
    finally:
        stop.set()
        t.join()
        assert s.stop() == 0


# --- bounded headers and bodies, the key before the body ------------------------------------------

@pytest.fixture(scope="module")
def guarded(tiny):
    s = Server(tiny, "--api-key", "sekrit", "--max-body-bytes", "65536", "--max-batch", "4")
    yield s
    assert s.stop() == 0


KEY = "Authorization: Bearer sekrit"


def exchange(server, data, shut=False):
    with connect(server) as c:
        c.sendall(data)
        if shut:
            c.shutdown(socket.SHUT_WR)
        return responses(read_all(c))


def test_oversized_headers_are_431(guarded):
    (status, _, body), = exchange(guarded, request_bytes("/health", headers=["X-Big: " + "a" * (1 << 20)]))
    assert status == 431 and "larger than 16384 bytes" in json.loads(body)["error"]["message"]
    (status, _, body), = exchange(guarded, request_bytes("/health", headers=[f"X-{i}: v" for i in range(150)]))
    assert status == 431 and "more than 100 header fields" in json.loads(body)["error"]["message"]


def test_a_declared_body_over_the_limit_is_413_before_it_is_sent(guarded):
    with connect(guarded) as c:
        c.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n" + KEY.encode() +
                  b"\r\nContent-Length: 100000000\r\n\r\n")
        (status, _, body), = responses(read_all(c))  # answered with no body byte sent
    assert status == 413
    assert "100000000 bytes; at most 65536" in json.loads(body)["error"]["message"]


def test_a_chunked_body_over_the_limit_is_413_and_not_read_on(guarded):
    c = connect(guarded)
    got, sent = [], [0]

    def reader():
        got.append(read_all(c))

    r = threading.Thread(target=reader)
    r.start()
    c.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\n" + KEY.encode() +
              b"\r\nTransfer-Encoding: chunked\r\n\r\n")
    piece = b"%x\r\n" % 65536 + b"a" * 65536 + b"\r\n"
    try:
        for _ in range(1024):  # 64 MB offered
            c.sendall(piece)
            sent[0] += 65536
    except OSError:
        pass
    r.join()
    c.close()
    assert sent[0] < 16 << 20, sent  # the server stopped reading long before 64 MB
    (status, _, body), = responses(got[0])
    assert status == 413 and "larger than 65536 bytes" in json.loads(body)["error"]["message"]


def test_the_key_is_checked_before_the_body_is_read(guarded):
    with connect(guarded) as c:  # a body announced and never sent: the 401 comes anyway
        c.sendall(b"POST /v1/chat/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer wrong\r\n"
                  b"Content-Length: 60000\r\n\r\n")
        (status, headers, body), = responses(read_all(c))
    assert status == 401 and error_of_bytes(body)["code"] == "invalid_api_key"
    assert headers["connection"] == "close"


def error_of_bytes(body):
    e = json.loads(body)["error"]
    assert set(e) == {"message", "type", "param", "code"}
    return e


def test_keys_are_compared_whole_scheme_any_case_no_control_characters(guarded):
    def status(value):
        return exchange(guarded, request_bytes("/v1/models", headers=[f"Authorization: {value}"]))[0][0] \
            if "\0" not in value else exchange(guarded, b"GET /v1/models HTTP/1.1\r\nHost: x\r\nAuthorization: " +
                                                value.encode() + b"\r\n\r\n")[0][0]
    assert status("Bearer sekrit") == 200
    assert status("bearer sekrit") == 200 and status("BEARER  sekrit") == 200
    assert status("Bearer sekri") == 401 and status("Bearer sekritt") == 401 and status("Basic sekrit") == 401
    assert status("Bearer sekrit\0junk") in (400, 401)
    # /metrics is behind the key by default; /health never is
    assert httpx.get(guarded.url + "/metrics").status_code == 401
    assert httpx.get(guarded.url + "/metrics", headers={"Authorization": "Bearer sekrit"}).status_code == 200
    assert httpx.get(guarded.url + "/health").status_code == 200


def test_metrics_auth_none_makes_metrics_public(tiny):
    s = Server(tiny, "--api-key", "k", "--metrics-auth", "none")
    try:
        assert "npugraph_requests_running" in httpx.get(s.url + "/metrics").text
        assert httpx.get(s.url + "/v1/models").status_code == 401
    finally:
        assert s.stop() == 0


# --- the small ones -------------------------------------------------------------------------------

def test_huge_numbers_are_400_without_internals(guarded):
    body = b'{"model": "tiny", "messages": [{"role": "user", "content": "hi"}], "temperature": 1e400}'
    (status, headers, raw), = exchange(guarded, request_bytes("/v1/chat/completions", body, headers=[KEY]))
    assert status == 400 and "out of range" in error_of_bytes(raw)["message"]
    assert not any(k.startswith("exception") for k in headers)


def test_pipelined_requests_are_all_answered_in_order(guarded):
    data = request_bytes("/health") + request_bytes("/v1/models", headers=[KEY]) + \
        request_bytes("/v1/chat/completions", BODY, headers=[KEY]) + request_bytes("/nope", headers=["Connection: close"])
    got = exchange(guarded, data)
    assert [g[0] for g in got] == [200, 200, 200, 404]
    assert json.loads(got[1][2])["data"][0]["id"] == MODEL_ID
    assert json.loads(got[2][2])["choices"][0]["finish_reason"] in ("stop", "length")


def test_http_1_0_clients_get_no_chunked_encoding(guarded):
    (status, headers, body), = exchange(guarded, request_bytes("/v1/chat/completions", BODY, headers=[KEY], version="1.0"))
    assert status == 200 and "transfer-encoding" not in headers and int(headers["content-length"]) == len(body)
    (status, headers, body), = exchange(guarded, request_bytes("/v1/chat/completions", {**BODY, "stream": True},
                                                               headers=[KEY], version="1.0"))
    assert status == 200 and "transfer-encoding" not in headers and headers["connection"] == "close"
    assert body.startswith(b"data: ") and body.endswith(b"data: [DONE]\n\n")


def test_unknown_paths_and_methods(guarded):
    assert exchange(guarded, request_bytes("/v2/x"))[0][0] == 404
    (status, headers, _), = exchange(guarded, request_bytes("/health", method="DELETE"))
    assert status == 405 and headers["allow"] == "GET, HEAD"


# --- admission, long prompts ----------------------------------------------------------------------

def test_a_burst_never_overshoots_admission(tiny):
    s = Server(tiny, "--max-batch", "1", "--max-waiting", "0", "--min-step-ms", "20")
    try:
        with concurrent.futures.ThreadPoolExecutor(40) as pool:
            rs = list(pool.map(lambda _: post(s, "/v1/chat/completions", {**BODY, "max_tokens": 30}), range(40)))
        codes = [r.status_code for r in rs]
        assert set(codes) <= {200, 503} and codes.count(200) >= 1
        assert all(r.headers["Retry-After"] == "1" and error_of(r)["code"] == "queue_full"
                   for r in rs if r.status_code == 503)
        # the engine never held more than one request: its running gauge is 0 or 1, never waiting
        assert metric(s, 'npugraph_requests_rejected_total{status="503"}') == codes.count(503)
    finally:
        assert s.stop() == 0


def test_a_503_is_reachable_under_the_defaults(tiny):
    s = Server(tiny, "--min-step-ms", "20")  # defaults: --max-batch 16, --max-waiting 64
    try:
        with concurrent.futures.ThreadPoolExecutor(200) as pool:
            rs = list(pool.map(lambda _: post(s, "/v1/chat/completions", {**BODY, "max_tokens": 40}), range(200)))
        codes = [r.status_code for r in rs]
        assert set(codes) <= {200, 503}
        assert codes.count(503) >= 1 and 1 <= codes.count(200)
        assert httpx.get(s.url + "/health", timeout=20).status_code == 200
    finally:
        assert s.stop() == 0


def test_prompts_proved_too_long_by_their_bytes_are_refused_untokenised(guarded):
    big = {"model": MODEL_ID, "messages": [{"role": "user", "content": "x" * 60000}]}
    r = post(guarded, "/v1/chat/completions", big, headers={"Authorization": "Bearer sekrit"})
    e = error_of(r)
    assert r.status_code == 400 and e["code"] == "context_length_exceeded" and e["param"] == "messages"
    assert "60" in e["message"] and "bytes, at least" in e["message"]


# --- abandoned work -------------------------------------------------------------------------------

def test_two_hundred_clients_leaving_mid_stream_lose_nothing_and_leave_no_blocks(tiny):
    """Issue 47's target: 200 streaming clients, each leaving after its first token, all admitted
    (none refused or failed: --max-waiting holds them), every one cancelled, no KV block held and
    nothing running or waiting afterwards; the server then answers as before."""
    s = Server(tiny, "--max-batch", "16", "--max-waiting", "256", "--max-connections", "512")
    body = {"model": MODEL_ID, "prompt": "the tall cat", "max_tokens": 200, "temperature": 0,
            "stream": True, "logit_bias": {"2": -100}}  # 2: the tiny model's EOS

    def leave_after_first_token(_):
        with httpx.Client(timeout=120) as client:
            with client.stream("POST", s.url + "/v1/completions", json=body) as r:
                if r.status_code != 200:
                    return r.status_code
                for line in r.iter_lines():
                    if line.startswith("data: {"):
                        return 200  # leaves: the stream is closed mid-way
        return -1

    try:
        with concurrent.futures.ThreadPoolExecutor(max_workers=50) as pool:
            statuses = list(pool.map(leave_after_first_token, range(200)))
        assert statuses == [200] * 200
        wait_for(lambda: metric(s, "npugraph_requests_running") == 0 and metric(s, "npugraph_requests_waiting") == 0
                 and metric(s, "npugraph_kv_blocks_used") == 0, "every request to end and free its blocks")
        finished = {k: v for k, v in s.metrics().items() if k.startswith("npugraph_requests_finished_total")}
        assert sum(finished.values()) == 200, finished
        assert finished.get('npugraph_requests_finished_total{reason="error"}', 0) == 0, finished
        assert post(s, "/v1/chat/completions", BODY).status_code == 200
    finally:
        assert s.stop() == 0


def test_abandoned_work_is_cancelled_queued_or_running_streamed_or_not(tiny):
    s = Server(tiny, "--max-batch", "1", "--min-step-ms", "50")
    try:
        long = {**BODY, "max_tokens": 200}
        running = connect(s)  # a whole (not streamed) answer, running
        running.sendall(request_bytes("/v1/chat/completions", long))
        wait_for(lambda: metric(s, "npugraph_requests_running") == 1, "the first request to run")
        queued = connect(s)  # a stream, queued behind it
        queued.sendall(request_bytes("/v1/chat/completions", {**long, "stream": True}))
        wait_for(lambda: metric(s, "npugraph_requests_waiting") == 1, "the second request to queue")
        queued.close()
        running.close()
        wait_for(lambda: metric(s, 'npugraph_requests_finished_total{reason="cancelled"}') == 2,
                 "both requests to be cancelled")
        wait_for(lambda: metric(s, "npugraph_kv_blocks_used") == 0, "their blocks to be free")
        assert metric(s, 'npugraph_requests_finished_total{reason="length"}') == 0
    finally:
        assert s.stop() == 0


def test_a_half_closed_client_gets_its_answer(tiny):
    s = Server(tiny, "--min-step-ms", "20")
    try:
        for stream, version in ((False, "1.1"), (True, "1.1"), (False, "1.0"), (True, "1.0")):
            got = exchange(s, request_bytes("/v1/chat/completions", {**BODY, "max_tokens": 20, "stream": stream},
                                            version=version), shut=True)
            (status, _, body), = got
            assert status == 200
            if stream:
                assert body.endswith(b"data: [DONE]\n\n")
            else:
                assert json.loads(body)["usage"]["completion_tokens"] >= 1
        assert metric(s, 'npugraph_requests_finished_total{reason="cancelled"}') == 0
    finally:
        assert s.stop() == 0


# --- signals --------------------------------------------------------------------------------------

def test_sigterm_with_slow_clients_drains_and_exits_zero(tiny):
    s = Server(tiny, "--min-step-ms", "20")
    stop, cut, threads = tricklers(s, 20)
    try:
        c = connect(s)
        c.sendall(request_bytes("/v1/chat/completions", {**BODY, "max_tokens": 30, "stream": True}))
        wait_for(lambda: metric(s, "npugraph_requests_running") == 1, "the stream to run")
        s.proc.send_signal(signal.SIGTERM)
        (status, _, body), = responses(read_all(c))  # the running stream finishes
        assert status == 200 and body.endswith(b"data: [DONE]\n\n")
        assert s.proc.wait(timeout=60) == 0  # the trickling clients did not hold it
        wait_for(lambda: len(cut) == 20, "every slow connection to be closed")
    finally:
        stop.set()
        for t in threads:
            t.join()
        s.stop()


def test_a_second_signal_exits_at_once_and_the_drain_has_a_deadline(tiny):
    s = Server(tiny, "--min-step-ms", "50", "--drain-seconds", "600")
    try:
        c = connect(s)
        c.sendall(request_bytes("/v1/chat/completions", {**BODY, "max_tokens": 250, "stream": True}))
        wait_for(lambda: metric(s, "npugraph_requests_running") == 1, "the stream to run")
        s.proc.send_signal(signal.SIGTERM)
        wait_for(lambda: httpx.get(s.url + "/health").status_code == 503, "/health to say draining")
        s.proc.send_signal(signal.SIGTERM)
        assert s.proc.wait(timeout=60) == 128 + signal.SIGTERM
        c.close()
    finally:
        s.stop()
    s = Server(tiny, "--min-step-ms", "50", "--drain-seconds", "0")
    try:
        c = connect(s)
        c.sendall(request_bytes("/v1/chat/completions", {**BODY, "max_tokens": 250, "stream": True}))
        wait_for(lambda: metric(s, "npugraph_requests_running") == 1, "the stream to run")
        s.proc.send_signal(signal.SIGTERM)
        (status, _, body), = responses(read_all(c))  # cancelled at the deadline: the stream ends, marked
        assert status == 200 and b'"finish_reason":"error"' in body
        assert s.proc.wait(timeout=60) == 0
        assert "--drain-seconds 0 passed" in s.proc.stdout.read()
    finally:
        s.stop()
