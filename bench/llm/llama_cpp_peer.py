"""llama.cpp, the peer of bench_llm: the same GGUF file, the same prompt and thread count, batch 1.

  llama_cpp/prefill/B:1   the ~128-token raw prompt (bench_llm's, no chat template) evaluated in
                          one llama_decode batch on an empty KV cache: prefill_tps
  llama_cpp/decode/B:1    64 greedy tokens after it, one llama_decode each (argmax of the logits):
                          decode_tps, ms_per_step
  llama_cpp/greedy_text   the greedy tokens (the prefill's + the 64 decoded) against npugraph's
                          (npugraph.llm.Engine, graph mode, the same prompt): common_prefix (tokens
                          equal from the first one on), compared, prompt_tokens_equal (1 when both
                          tokenised the prompt alike)

Each figure is the best of --reps runs (the machine is shared: neighbours only slow a run down);
load1 is the 1-minute load average when the runs started. llama.cpp comes from llama-cpp-python
(tools/requirements-bench.txt), built from source, CPU only, in a benchmark-only venv:

    /usr/bin/python3 -m venv --system-site-packages build/bench-venv
    CMAKE_ARGS="-DGGML_NATIVE=ON -DGGML_BLAS=OFF ..." build/bench-venv/bin/pip install \\
        --no-binary llama-cpp-python -r tools/requirements-bench.txt   (see that file)
    PYTHONPATH=build/python build/bench-venv/bin/python bench/llm/llama_cpp_peer.py \\
        --out build/bench-results/llama_cpp.json

PYTHONPATH must reach npugraph (for the text comparison; without it that row is left out). With
--out, the results are written in Google Benchmark's JSON format for tools/perf_table.py.
"""
import argparse
import datetime
import json
import os
import pathlib
import re
import sys
import time

import numpy as np

HERE = pathlib.Path(__file__).resolve().parent
DECODE_TOKENS = 64


def bench_prompt():
    """bench_llm.cpp's kPrompt (one source of truth: parsed from the C++ string literal)."""
    text = (HERE / "bench_llm.cpp").read_text()
    body = text[text.index("kPrompt ="):text.index(";", text.index("kPrompt ="))]
    return "".join(re.findall(r'"((?:[^"\\]|\\.)*)"', body)).encode().decode("unicode_escape")


def model_path():
    if os.environ.get("NPUGRAPH_MODEL"):
        return pathlib.Path(os.environ["NPUGRAPH_MODEL"])
    d = os.environ.get("NPUGRAPH_MODEL_DIR")
    if d:
        base = pathlib.Path(d).expanduser()
    else:
        cache = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
        base = pathlib.Path(cache) / "npugraph" / "models"
    return base / "SmolLM2-135M-Instruct.Q4_1.gguf"


def llama_run(llm, prompt_tokens, n_vocab):
    """One prefill + DECODE_TOKENS greedy steps on an empty cache: (prefill s, decode s, tokens)."""
    llm.reset()
    llm._ctx.kv_cache_clear()
    t0 = time.perf_counter()
    llm.eval(prompt_tokens)
    logits = np.ctypeslib.as_array(llm._ctx.get_logits(), shape=(n_vocab,))
    tok = int(np.argmax(logits))
    t1 = time.perf_counter()
    tokens = [tok]
    decode = 0.0
    for _ in range(DECODE_TOKENS):
        t = time.perf_counter()
        llm.eval([tok])
        logits = np.ctypeslib.as_array(llm._ctx.get_logits(), shape=(n_vocab,))
        tok = int(np.argmax(logits))
        decode += time.perf_counter() - t
        tokens.append(tok)
    return t1 - t0, decode, tokens


def npugraph_tokens(path, prompt, threads):
    """npugraph's greedy tokens for the prompt (graph mode), or None without npugraph."""
    try:
        import npugraph
    except ImportError as e:
        print(f"llama_cpp_peer: npugraph not importable ({e}): no text comparison", file=sys.stderr)
        return None
    engine = npugraph.llm.Engine(str(path), threads=threads, max_batch=1, max_context=512, mode="graph")
    r = engine.generate([prompt], max_tokens=DECODE_TOKENS + 1, chat=False)[0]
    return r


def entry(name, seconds, counters):
    return dict({"name": name, "run_name": name, "run_type": "iteration", "repetitions": 1,
                 "repetition_index": 0, "threads": 1, "iterations": 1,
                 "real_time": seconds * 1e3, "cpu_time": seconds * 1e3, "time_unit": "ms"}, **counters)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", help="write Google Benchmark JSON here")
    ap.add_argument("--reps", type=int, default=5)
    ap.add_argument("--threads", type=int, default=os.cpu_count(), help="default: every core, as bench_llm")
    ap.add_argument("--model", default=str(model_path()))
    args = ap.parse_args()

    import llama_cpp

    prompt = bench_prompt()
    llm = llama_cpp.Llama(args.model, n_ctx=512, n_batch=512, n_ubatch=512, n_threads=args.threads,
                          n_threads_batch=args.threads, verbose=False)
    n_vocab = llm.n_vocab()
    # add_bos=True: BOS where the file asks for it (tokenizer.ggml.add_bos_token: Gemma yes, SmolLM2 no),
    # as npugraph adds it
    prompt_tokens = llm.tokenize(prompt.encode(), add_bos=True, special=False)
    load1 = os.getloadavg()[0]
    llama_run(llm, prompt_tokens, n_vocab)  # warm: first touch of the weights, the thread pool
    best_prefill, best_decode, tokens = None, None, None
    for _ in range(args.reps):
        p, d, toks = llama_run(llm, prompt_tokens, n_vocab)
        best_prefill = p if best_prefill is None else min(best_prefill, p)
        best_decode = d if best_decode is None else min(best_decode, d)
        tokens = toks
    n_prompt = len(prompt_tokens)
    text = llm.detokenize(tokens).decode("utf-8", errors="replace")
    print(f"llama.cpp {llama_cpp.__version__}, {args.threads} threads, load {load1:.2f}: "
          f"prompt {n_prompt} tokens, prefill {n_prompt / best_prefill:.1f} tokens/s, "
          f"decode {DECODE_TOKENS / best_decode:.1f} tokens/s ({1e3 * best_decode / DECODE_TOKENS:.2f} ms/step)")
    print(f"llama.cpp greedy text: {text!r}")
    entries = [
        entry("llama_cpp/prefill/B:1", best_prefill,
              {"prefill_tps": n_prompt / best_prefill, "prompt_tokens": n_prompt, "threads": args.threads,
               "load1": load1}),
        entry("llama_cpp/decode/B:1", best_decode / DECODE_TOKENS,
              {"decode_tps": DECODE_TOKENS / best_decode, "ms_per_step": 1e3 * best_decode / DECODE_TOKENS,
               "decode_tokens": DECODE_TOKENS, "threads": args.threads, "load1": load1}),
    ]
    ours = npugraph_tokens(args.model, prompt, args.threads)
    if ours is not None:
        theirs = tokens
        mine = list(ours["tokens"])
        prefix = 0
        while prefix < min(len(mine), len(theirs)) and mine[prefix] == theirs[prefix]:
            prefix += 1
        same_prompt = list(ours["prompt_tokens"]) == list(prompt_tokens)
        print(f"npugraph greedy text:  {ours['text']!r}")
        print(f"greedy agreement: {prefix} of {min(len(mine), len(theirs))} tokens in common from the start; "
              f"prompt tokenised {'alike' if same_prompt else 'DIFFERENTLY'} ({len(ours['prompt_tokens'])} vs "
              f"{n_prompt} tokens)")
        entries.append(entry("llama_cpp/greedy_text", 0.0,
                             {"common_prefix": prefix, "compared": min(len(mine), len(theirs)),
                              "prompt_tokens_equal": int(same_prompt)}))
    if args.out:
        context = {"executable": "bench/llm/llama_cpp_peer.py", "date": datetime.datetime.now().isoformat(),
                   "cpus": os.cpu_count(), "load_avg": list(os.getloadavg()),
                   "llama_cpp_python": llama_cpp.__version__}
        with open(args.out, "w") as f:
            json.dump({"context": context, "benchmarks": entries}, f, indent=1)


if __name__ == "__main__":
    main()
