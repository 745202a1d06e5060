"""Time to first token of a chat's second turn over a long shared history, with npugraph-serve's
prefix cache (Note [Prefix cache] in src/llm/prefix_cache.hpp) and without (--no-prefix-cache).

Each round is a new conversation (its first line names the round, so its first turn finds nothing
cached): turn 1 sends a system message and a user message holding a document of about
--history-tokens tokens plus a question; turn 2 sends the same messages, the assistant's reply and
a second question. The script reports, per server, the medians over the rounds of each turn's
time to first token (wall) and of the server process's CPU time during it, the prompt tokens and
the cached tokens the server reported (usage.prompt_tokens_details.cached_tokens), and the ratio
turn 2 / turn 1.

    .venv/bin/python bench/serve/prefix_ttft.py --server build/npugraph-serve --threads 2

Greedy, streamed, one client; traffic to 127.0.0.1 only; every loop is bounded by --rounds.
"""
import argparse
import os
import re
import statistics
import subprocess
import time

import openai

WORDS = ("the graph of tasks is captured once and replayed many times while the engine updates the "
         "lengths of each attention layer before every step so that a new batch is never a re-capture ").split()


def cpu_seconds(pid):
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")  # utime + stime


class Server:
    def __init__(self, binary, threads, extra):
        self.proc = subprocess.Popen([binary, "--model", "smollm2", "--model-id", "m", "--port", "0",
                                      "--threads", str(threads), "--max-seconds", "3600", *extra],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        line = self.proc.stdout.readline()
        m = re.search(r"listening on (http://127\.0\.0\.1:\d+)", line)
        if not m:
            self.proc.kill()
            raise SystemExit(f"no listening line: {line!r}\n{self.proc.stderr.read()}")
        self.client = openai.OpenAI(base_url=m.group(1) + "/v1", api_key="none", max_retries=0, timeout=600)

    def turn(self, messages, max_tokens):
        """(reply, wall seconds to the first token, server CPU seconds until then, usage)."""
        cpu0, t0 = cpu_seconds(self.proc.pid), time.perf_counter()
        ttft = cpu = None
        reply, usage = "", None
        stream = self.client.chat.completions.create(model="m", messages=messages, max_tokens=max_tokens,
                                                     temperature=0, stream=True,
                                                     stream_options={"include_usage": True})
        for chunk in stream:
            if chunk.choices and chunk.choices[0].delta.content:
                if ttft is None:
                    ttft, cpu = time.perf_counter() - t0, cpu_seconds(self.proc.pid) - cpu0
                reply += chunk.choices[0].delta.content
            if chunk.usage:
                usage = chunk.usage
        return reply, ttft, cpu, usage

    def stop(self):
        self.proc.terminate()
        self.proc.wait(timeout=120)


def document(round_index, tokens):
    words = [f"Conversation {round_index}."]
    while len(words) < tokens * 0.88:  # about 1.14 tokens a word in this text (SmolLM2)
        words.append(WORDS[len(words) % len(WORDS)])
    return " ".join(words)


def run(server, rounds, history_tokens, max_tokens):
    rows = []
    for r in range(rounds):
        messages = [{"role": "system", "content": "You answer questions about the document the user gives."},
                    {"role": "user", "content": document(r, history_tokens) + "\n\nWhat is this document about?"}]
        reply, t1, c1, u1 = server.turn(messages, max_tokens)
        messages += [{"role": "assistant", "content": reply}, {"role": "user", "content": "Say it in five words."}]
        _, t2, c2, u2 = server.turn(messages, max_tokens)
        cached = lambda u: (u.prompt_tokens_details.cached_tokens if u.prompt_tokens_details else 0)  # noqa: E731
        rows.append({"ttft1": t1, "cpu1": c1, "ttft2": t2, "cpu2": c2, "prompt1": u1.prompt_tokens,
                     "prompt2": u2.prompt_tokens, "cached1": cached(u1), "cached2": cached(u2)})
    return rows


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--server", default="build/npugraph-serve", help="the npugraph-serve binary")
    p.add_argument("--threads", type=int, default=2)
    p.add_argument("--rounds", type=int, default=5)
    p.add_argument("--history-tokens", type=int, default=1000)
    p.add_argument("--max-tokens", type=int, default=32)
    p.add_argument("--server-args", default="", help="more flags for both servers (e.g. '--prefill-chunk 128')")
    a = p.parse_args()
    med = statistics.median
    print(f"history ~{a.history_tokens} tokens, {a.rounds} rounds, {a.threads} threads, medians {a.server_args}")
    print(f"{'server':>18} {'turn':>4} {'prompt':>6} {'cached':>6} {'TTFT ms':>8} {'CPU ms':>7}")
    for name, extra in (("prefix cache", []), ("--no-prefix-cache", ["--no-prefix-cache"])):
        s = Server(a.server, a.threads, a.server_args.split() + extra)
        try:
            s.turn([{"role": "user", "content": "Hello"}], 4)  # warm: the decode graphs captured
            rows = run(s, a.rounds, a.history_tokens, a.max_tokens)
        finally:
            s.stop()
        for t in ("1", "2"):
            print(f"{name:>18} {t:>4} {med(r['prompt' + t] for r in rows):>6.0f} {med(r['cached' + t] for r in rows):>6.0f}"
                  f" {1e3 * med(r['ttft' + t] for r in rows):>8.1f} {1e3 * med(r['cpu' + t] for r in rows):>7.1f}")
        print(f"{name:>18} turn 2 / turn 1: TTFT {med(r['ttft2'] / r['ttft1'] for r in rows):.3f}, "
              f"CPU {med(r['cpu2'] / r['cpu1'] for r in rows):.3f}")


if __name__ == "__main__":
    main()
