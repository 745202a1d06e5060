"""npugraph-serve's chat page at / over HTTP (Note [Chat page]): the page served is the source file,
byte for byte, with its type, a CSP that allows exactly its own inline script and style (by their
SHA-256) and nothing from elsewhere, and an ETag that a revalidation answers with a bodiless 304 on
a connection that stays usable; the page is public while /v1/* keep the key; HEAD on every GET route
is the GET's head without its body; POST and PUT on / are refused as on every route; --no-webui
gives 404. The page itself fetches nothing from outside and
never writes model text as markup. tests/python/serve/test_chat_browser.py drives it in Chromium.
"""
import base64
import hashlib
import re
import socket

import pytest

from test_server import ROOT, Server, httpx, tiny  # noqa: F401

PAGE = (ROOT / "apps" / "serve" / "chat" / "index.html").read_bytes()


def inline(tag):
    """The text of the page's one <tag>...</tag>, as the browser hashes it."""
    found = re.findall(rb"<%s>(.*?)</%s>" % (tag, tag), PAGE, re.S)
    assert len(found) == 1, f"the page must have exactly one <{tag.decode()}>"
    return found[0]


def csp_hash(tag):
    return "'sha256-" + base64.b64encode(hashlib.sha256(inline(tag)).digest()).decode() + "'"


@pytest.fixture(scope="module")
def keyed(tiny):  # noqa: F811
    s = Server(tiny, "--api-key", "sekrit")
    yield s
    assert s.stop() == 0


def directives(response):
    policy = response.headers["Content-Security-Policy"]
    return {d.split()[0]: d.split()[1:] for d in (p.strip() for p in policy.split(";")) if d}


def test_the_page_is_the_source_file_with_its_headers(keyed):
    for path in ("/", "/index.html", "/?from=bookmark"):
        r = httpx.get(keyed.url + path)  # no key: the page is public
        assert r.status_code == 200, (path, r.text)
        assert r.content == PAGE
        assert r.headers["Content-Type"] == "text/html; charset=utf-8"
        assert r.headers["X-Content-Type-Options"] == "nosniff"
        assert r.headers["Cache-Control"] == "no-cache"
        assert re.fullmatch(r'"[0-9a-f]{32}"', r.headers["ETag"])
    d = directives(r)
    assert d["default-src"] == ["'none'"]
    assert d["script-src"] == [csp_hash(b"script")]
    assert d["style-src"] == [csp_hash(b"style")]
    assert d["connect-src"] == ["'self'"]
    assert "'unsafe-inline'" not in r.headers["Content-Security-Policy"]
    # ... while the API the page calls keeps the key
    assert httpx.get(keyed.url + "/v1/models").status_code == 401
    assert httpx.get(keyed.url + "/v1/models", headers={"Authorization": "Bearer sekrit"}).status_code == 200


def test_revalidation_is_a_bodiless_304_and_the_connection_goes_on(keyed):
    etag = httpx.get(keyed.url + "/").headers["ETag"]
    host, port = keyed.url.removeprefix("http://").split(":")
    with socket.create_connection((host, int(port)), timeout=30) as s:
        # the 304 and a next request on the same connection: the 304 must carry no body and no length
        s.sendall(f"GET / HTTP/1.1\r\nHost: x\r\nIf-None-Match: W/\"other\", {etag}\r\n\r\n"
                  "GET /health HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n".encode())
        data = b""
        while chunk := s.recv(65536):
            data += chunk
    first, rest = data.split(b"\r\n\r\n", 1)
    assert first.startswith(b"HTTP/1.1 304 "), first
    assert b"\r\nETag: " + etag.encode() in first
    assert b"Content-Length" not in first and b"Transfer-Encoding" not in first
    assert rest.startswith(b"HTTP/1.1 200 "), rest[:200]
    assert rest.endswith(b'{"status":"ok"}')
    # another tag: the page
    r = httpx.get(keyed.url + "/", headers={"If-None-Match": '"0123"'})
    assert r.status_code == 200 and r.content == PAGE


def test_other_methods_on_the_page_are_405_as_on_every_route(keyed):
    for method in ("POST", "PUT"):
        page = httpx.request(method, keyed.url + "/", content=b"{}")
        health = httpx.request(method, keyed.url + "/health", content=b"{}")
        assert page.status_code == health.status_code == 405, (method, page.status_code, health.status_code)
        assert page.headers["Allow"] == "GET, HEAD"
        assert page.json()["error"]["code"] == "method_not_allowed"


AUTH = {"Authorization": "Bearer sekrit"}


def test_head_is_the_gets_head_without_its_body(keyed):
    # HTTP (RFC 9110 9.3.2): a server that answers GET answers HEAD, the same head and no body.
    for path in ("/", "/health", "/metrics"):
        get, head = httpx.get(keyed.url + path, headers=AUTH), httpx.head(keyed.url + path, headers=AUTH)
        assert head.status_code == get.status_code == 200, path
        assert head.content == b"" and get.content, path
        assert head.headers["content-length"] == get.headers["content-length"], path
        assert head.headers["content-type"] == get.headers["content-type"], path
    assert httpx.head(keyed.url + "/", headers={"If-None-Match": httpx.get(keyed.url + "/").headers["ETag"]}).status_code == 304
    r = httpx.head(keyed.url + "/v1/chat/completions")  # a POST route: no HEAD
    assert r.status_code == 405 and r.headers["Allow"] == "POST" and r.content == b""
    assert httpx.get(keyed.url + "/health").status_code == 200  # the connection pool's next request


def test_no_webui_is_404_and_the_api_stays(tiny):  # noqa: F811
    s = Server(tiny, "--no-webui")
    try:
        for path in ("/", "/index.html"):
            r = httpx.get(s.url + path)
            assert r.status_code == 404, (path, r.status_code)
            assert r.json()["error"]["code"] == "not_found"
        assert httpx.get(s.url + "/health").json() == {"status": "ok"}
        assert httpx.get(s.url + "/v1/models").status_code == 200
    finally:
        assert s.stop() == 0


def test_the_page_loads_nothing_from_elsewhere_and_writes_no_markup():
    text = PAGE.decode("utf-8")
    assert not re.search(r"https?:|//[a-z0-9]", text, re.I), "an absolute or protocol-relative URL"
    for attr in re.findall(r"""\b(?:src|href|action)\s*=\s*["']?([^"'\s>]*)""", text):
        assert attr.startswith("data:"), f"the page refers to '{attr}'"
    assert "@import" not in text and "url(" not in text
    for sink in ("innerHTML", "outerHTML", "insertAdjacentHTML", "document.write", "eval(", "new Function"):
        assert sink not in text, f"{sink}: model text must be set as textContent"
    # every call goes to this server's API, by a relative path
    assert sorted(set(re.findall(r'fetch\("([^"]+)"', text))) == ["v1/chat/completions", "v1/models"]
