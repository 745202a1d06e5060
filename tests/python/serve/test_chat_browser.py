"""The chat page in headless Chromium (Debian's chromium and chromium-driver): the page, served with
--api-key, says the models need the key; the key typed into its settings loads them; a message sent
streams a reply that grows while the test watches, and Stop aborts it mid-way: the page gives the
Send button back and the server sees the client gone — the request ends cancelled with no KV block
held (/metrics). The text shown is the model's greedy text (a prefix of the same request's answer
through the API), and the key outlives a reload (localStorage).

Chromium is driven through chromedriver's W3C WebDriver protocol, which is JSON over HTTP: httpx
(already a test package) speaks it, so no Selenium and its dependencies. Skipped, saying why, when
either program is missing. NPUGRAPH_CHAT_SCREENSHOT=path.png saves a screenshot of the stopped reply.
"""
import base64
import os
import pathlib
import shutil
import socket
import subprocess
import time

import pytest

from test_server import MODEL_ID, Server, httpx, wait_for, write_tiny_model

ELEMENT = "element-6066-11e4-a52e-4f735466cecf"  # the W3C key of an element reference
PROMPT = "a long story please"


def programs():
    chromium = shutil.which("chromium") or shutil.which("chromium-browser")
    driver = shutil.which("chromedriver")
    if not chromium or not driver:
        pytest.skip("Chromium and chromedriver are needed (Debian: apt-get install chromium chromium-driver)")
    return chromium, driver


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Browser:
    """A headless Chromium session through chromedriver; close() ends both."""

    def __init__(self, log):
        chromium, driver = programs()
        port = free_port()
        self.log = open(log, "w")
        self.driver = subprocess.Popen([driver, f"--port={port}"], stdout=self.log, stderr=subprocess.STDOUT)
        self.http = httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=60, trust_env=False)
        self.session = None
        try:
            wait_for(self._ready, "chromedriver to answer", timeout=30)
            # CI runs as root, where Chromium's sandbox refuses to start, as it does in containers
            # without user namespaces: no sandbox (the page is our own, on loopback).
            args = ["--headless=new", "--no-sandbox", "--disable-gpu", "--disable-dev-shm-usage",
                    "--window-size=1100,760", "--no-first-run", "--disable-extensions"]
            caps = {"browserName": "chrome", "goog:chromeOptions": {"binary": chromium, "args": args}}
            self.session = self._call("POST", "/session", {"capabilities": {"alwaysMatch": caps}})["sessionId"]
        except BaseException:
            self.close()
            raise

    def _ready(self):
        if self.driver.poll() is not None:
            raise AssertionError(f"chromedriver exited with {self.driver.returncode}")
        try:
            return self.http.get("/status").json()["value"]["ready"]
        except httpx.TransportError:
            return False

    def _call(self, method, path, body=None):
        r = self.http.request(method, path, json=body)
        value = r.json()["value"]
        if r.status_code != 200:
            raise AssertionError(f"WebDriver {method} {path}: {value.get('error')}: {value.get('message')}")
        return value

    def command(self, method, path, body=None):
        return self._call(method, f"/session/{self.session}{path}", body)

    def open(self, url):
        self.command("POST", "/url", {"url": url})

    def find(self, css):
        return self.command("POST", "/element", {"using": "css selector", "value": css})[ELEMENT]

    def type(self, css, text, clear=True):
        e = self.find(css)
        if clear:
            self.command("POST", f"/element/{e}/clear", {})
        self.command("POST", f"/element/{e}/value", {"text": text})

    def click(self, css):
        self.command("POST", f"/element/{self.find(css)}/click", {})

    def run(self, script, *args):
        return self.command("POST", "/execute/sync", {"script": script, "args": list(args)})

    def text(self, css):
        return self.run("const e = document.querySelector(arguments[0]); return e ? e.textContent : null;", css)

    def enabled(self, css):
        return self.command("GET", f"/element/{self.find(css)}/enabled")

    def screenshot(self, path):
        pathlib.Path(path).write_bytes(base64.b64decode(self.command("GET", "/screenshot")))

    def close(self):
        try:
            if self.session:
                self._call("DELETE", f"/session/{self.session}")  # quits Chromium
        finally:
            self.http.close()
            self.driver.terminate()
            try:
                self.driver.wait(timeout=10)
            except subprocess.TimeoutExpired:
                self.driver.kill()
                self.driver.wait()
            self.log.close()


def metrics(server):
    out = {}
    for line in httpx.get(server.url + "/metrics").text.splitlines():
        if line and not line.startswith("#"):
            name, value = line.rsplit(" ", 1)
            out[name] = float(value)
    return out


def test_type_stream_and_stop_in_chromium(tmp_path):
    programs()
    # seed 0: a tiny model whose greedy text shows ("hehe…"; the default seed's is newlines).
    write_tiny_model(tmp_path / "tiny.gguf", seed=0)
    # --min-step-ms 50: the reply streams for seconds, so Stop lands mid-way.
    server = Server(tmp_path / "tiny.gguf", "--api-key", "sekrit", "--metrics-auth", "none", "--min-step-ms", "50")
    browser = None
    try:
        browser = Browser(tmp_path / "chromedriver.log")
        browser.open(server.url + "/")
        # no key yet: the page says why it has no model
        wait_for(lambda: "HTTP 401" in (browser.text("#status") or ""), "the page to show the 401")
        assert "API key" in browser.text("#status")
        browser.click("#settings summary")
        browser.type("#key", "sekrit")
        browser.type("#temperature", "0")
        browser.type("#max_tokens", "400")
        browser.type("#input", PROMPT)  # leaving the key field: its change loads the models
        wait_for(lambda: browser.run("return document.getElementById('model').value;") == MODEL_ID,
                 "the model list")
        assert browser.text("#status") == ""
        assert browser.enabled("#send") and not browser.enabled("#stop")

        browser.click("#send")
        reply = ".msg.assistant:last-child .text"
        wait_for(lambda: len(browser.text(reply) or "") > 0, "the first streamed text")
        first = browser.text(reply)
        wait_for(lambda: len(browser.text(reply)) > len(first), "the streamed text to grow")
        assert browser.text(reply).startswith(first)
        assert not browser.enabled("#send") and browser.enabled("#stop")
        assert metrics(server)["npugraph_requests_running"] == 1

        browser.click("#stop")
        wait_for(lambda: browser.enabled("#send") and not browser.enabled("#stop"), "Send to come back")
        assert browser.text(".msg.assistant:last-child .meta") == "stopped"
        shown = browser.text(reply)
        # the server saw the client go: the request ended cancelled and holds no KV block
        wait_for(lambda: metrics(server).get('npugraph_requests_finished_total{reason="cancelled"}', 0) == 1,
                 "the request to be cancelled")
        wait_for(lambda: metrics(server)["npugraph_kv_blocks_used"] == 0, "its KV blocks to be free")
        m = metrics(server)
        assert m["npugraph_requests_running"] == 0 and m["npugraph_requests_waiting"] == 0
        assert m.get('npugraph_requests_finished_total{reason="length"}', 0) == 0
        assert m.get('npugraph_requests_finished_total{reason="stop"}', 0) == 0
        if os.environ.get("NPUGRAPH_CHAT_SCREENSHOT"):
            browser.screenshot(os.environ["NPUGRAPH_CHAT_SCREENSHOT"])

        # What the page showed is the model's greedy text: a prefix of the same request's answer.
        n = len(shown.encode()) + 8  # a token is at least a byte
        r = httpx.post(server.url + "/v1/chat/completions", timeout=60, headers={"Authorization": "Bearer sekrit"},
                       json={"model": MODEL_ID, "messages": [{"role": "user", "content": PROMPT}],
                             "temperature": 0, "max_tokens": min(n, 400)})
        whole = r.json()["choices"][0]["message"]["content"]
        assert whole.startswith(shown), (shown, whole)

        # The key is kept in the browser: after a reload the models load without a word.
        browser.command("POST", "/refresh", {})
        wait_for(lambda: browser.run("return document.getElementById('model').value;") == MODEL_ID,
                 "the model list after a reload")
        assert browser.text("#status") == ""
    finally:
        if browser:
            browser.close()
        assert server.stop() == 0
