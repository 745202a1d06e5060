#!/usr/bin/env python3
"""Writes what independent implementations say about the model file, for the C++ tests to compare.

    .venv/bin/python tests/python/llm/make_reference.py OUT_DIR [--model PATH]

Then `NPUGRAPH_LLM_REFERENCE=OUT_DIR build-llm/npugraph_tests --gtest_filter='*Reference*'` checks
npugraph's reader and tokenizer against them (tests/llm/test_model_reference.cpp; the pytest in
test_reference.py runs both steps). The implementations:
  * tensors and metadata: llama.cpp's own reader, the `gguf` package (GGUFReader, gguf.quants);
  * tokens: a Hugging Face `tokenizers` BPE built from the file's vocabulary and merges with the
    pre-tokenizer its `pre` type names (Digits(individual_digits) + ByteLevel for "smollm");
  * chat: the file's own template rendered by `jinja2` as transformers renders chat templates.

Files written (little-endian binaries; strings are u64 length + bytes):
  model.txt      the model's path
  tensors.tsv    name, type, dims (ggml order), offset, n_bytes, sha256 of the float32 values
  synthetic.gguf random blocks of every type npugraph dequantizes (the model has three), written by
                 gguf.GGUFWriter; synthetic.tsv as tensors.tsv for it
  metadata.tsv   key, type ("u32", "array[string]"), count, value (scalars) or sha256 (arrays)
  encode.bin     u32 n; n x (u8 parse_special, str text, u32 k, k x i32 ids, str HF decode of ids)
  decode.bin     u32 n; n x (u32 k, k x i32 ids, str text)   HF decode, invalid UTF-8 as U+FFFD
  chat.bin       u32 n; n x (u8 add_generation_prompt, u32 m, m x (str role, str content), str text)
"""
import argparse
import hashlib
import os
import pathlib
import random
import struct
import sys

import numpy as np

HERE = pathlib.Path(__file__).resolve().parent
REPO = HERE.parents[2]


def default_model() -> pathlib.Path:
    explicit = os.environ.get("NPUGRAPH_MODEL")
    if explicit:
        return pathlib.Path(explicit)
    sys.path.insert(0, str(REPO / "tools"))
    import fetch_model  # the one place that knows where the model lives
    return fetch_model.model_path()


def s_bytes(b: bytes) -> bytes:
    return struct.pack("<Q", len(b)) + b


def s_str(s: str) -> bytes:
    return s_bytes(s.encode("utf-8"))


# ---- tensors and metadata: the gguf package -------------------------------------------------------

def write_tensors(reader, out: pathlib.Path) -> dict:
    import gguf
    counts = {}
    lines = []
    for t in reader.tensors:
        name = t.tensor_type.name
        counts[name] = counts.get(name, 0) + 1
        values = gguf.quants.dequantize(t.data, t.tensor_type)
        values = np.ascontiguousarray(values, dtype="<f4").reshape(-1)
        assert values.size == int(np.prod(t.shape)), t.name
        digest = hashlib.sha256(values.tobytes()).hexdigest()
        dims = ",".join(str(int(d)) for d in t.shape)
        lines.append(f"{t.name}\t{name}\t{dims}\t{int(t.data_offset) - reader.data_offset}\t"
                     f"{int(t.n_bytes)}\t{digest}\n")
    (out / "tensors.tsv").write_text("".join(lines))
    return counts


# Where each block format keeps its half-float scales (byte offsets), so random blocks stay finite.
HALF_FIELDS = {"Q4_0": [0], "Q4_1": [0, 2], "Q5_0": [0], "Q5_1": [0, 2], "Q8_0": [0],
               "Q2_K": [80, 82], "Q3_K": [108], "Q4_K": [0, 2], "Q5_K": [0, 2], "Q6_K": [208]}


def write_synthetic(out: pathlib.Path) -> int:
    import gguf
    from gguf.constants import GGML_QUANT_SIZES
    T = gguf.GGMLQuantizationType
    rng = np.random.default_rng(11)
    path = out / "synthetic.gguf"
    w = gguf.GGUFWriter(str(path), arch="synthetic")
    rows = 5
    w.add_tensor("f32", rng.standard_normal((rows, 64)).astype(np.float32))
    w.add_tensor("f16", (rng.standard_normal((rows, 64)) * 100).astype(np.float16))
    bf = rng.integers(0, 1 << 16, size=(rows, 64), dtype=np.uint16)
    bf = np.where((bf & 0x7F80) == 0x7F80, bf & 0xBFFF, bf).astype(np.uint16)  # no inf/nan
    w.add_tensor("bf16", bf.view(np.uint8), raw_dtype=T.BF16)
    for name, offsets in HALF_FIELDS.items():
        qtype = T[name]
        block, size = GGML_QUANT_SIZES[qtype]
        n_blocks = 16
        raw = rng.integers(0, 256, size=(rows, n_blocks, size), dtype=np.uint8)
        for off in offsets:
            halves = (rng.standard_normal((rows, n_blocks)) * 0.05).astype(np.float16)
            raw[:, :, off:off + 2] = halves.view(np.uint8).reshape(rows, n_blocks, 2)
        w.add_tensor(name.lower(), raw.reshape(rows, n_blocks * size), raw_dtype=qtype)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    reader = gguf.GGUFReader(str(path))
    lines = []
    for t in reader.tensors:
        values = np.ascontiguousarray(gguf.quants.dequantize(t.data, t.tensor_type), dtype="<f4")
        dims = ",".join(str(int(d)) for d in t.shape)
        lines.append(f"{t.name}\t{t.tensor_type.name}\t{dims}\t{int(t.data_offset) - reader.data_offset}\t"
                     f"{int(t.n_bytes)}\t{hashlib.sha256(values.tobytes()).hexdigest()}\n")
    (out / "synthetic.tsv").write_text("".join(lines))
    return len(lines)


GGUF_TYPE_NAMES = {0: "u8", 1: "i8", 2: "u16", 3: "i16", 4: "u32", 5: "i32", 6: "f32", 7: "bool",
                   8: "string", 9: "array", 10: "u64", 11: "i64", 12: "f64"}
NUMPY_OF = {0: "<u1", 1: "<i1", 2: "<u2", 3: "<i2", 4: "<u4", 5: "<i4", 6: "<f4", 7: "<u1",
            10: "<u8", 11: "<i8", 12: "<f8"}


def scalar_text(vtype: int, value) -> str:
    if vtype == 8:
        return value.encode("utf-8").hex()
    if vtype in (6, 12):
        return float(value).hex()
    if vtype == 7:
        return "1" if value else "0"
    return str(int(value))


def write_metadata(reader, out: pathlib.Path) -> None:
    lines = []
    for key, field in reader.fields.items():
        if key.startswith("GGUF."):
            continue  # the header fields, not metadata
        vtype = int(field.types[0])
        if vtype == 9:
            etype = int(field.types[1])
            values = field.contents()
            if etype == 8:
                blob = b"".join(s_str(v) for v in values)
            else:
                blob = np.asarray(values, dtype=NUMPY_OF[etype]).tobytes()
            lines.append(f"{key}\tarray[{GGUF_TYPE_NAMES[etype]}]\t{len(values)}\t"
                         f"{hashlib.sha256(blob).hexdigest()}\n")
        else:
            lines.append(f"{key}\t{GGUF_TYPE_NAMES[vtype]}\t1\t{scalar_text(vtype, field.contents())}\n")
    (out / "metadata.tsv").write_text("".join(lines))


# ---- tokens: Hugging Face tokenizers ----------------------------------------------------------------

def hf_tokenizer(reader):
    from tokenizers import AddedToken, Tokenizer, decoders, models, pre_tokenizers
    tokens = reader.fields["tokenizer.ggml.tokens"].contents()
    types = reader.fields["tokenizer.ggml.token_type"].contents()
    merges = reader.fields["tokenizer.ggml.merges"].contents()
    pre = reader.fields["tokenizer.ggml.pre"].contents()
    assert reader.fields["tokenizer.ggml.model"].contents() == "gpt2"
    vocab = {}
    for i, t in enumerate(tokens):
        vocab.setdefault(t, i)
    bpe = models.BPE(vocab=vocab, merges=[tuple(m.split(" ", 1)) for m in merges],
                     fuse_unk=False, byte_fallback=False)
    tk = Tokenizer(bpe)
    byte_level = pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)
    if pre in ("smollm", "starcoder", "refact"):
        tk.pre_tokenizer = pre_tokenizers.Sequence([pre_tokenizers.Digits(individual_digits=True),
                                                    byte_level])
    elif pre in ("gpt2", "default"):
        tk.pre_tokenizer = byte_level
    else:
        raise SystemExit(f"make_reference: no Hugging Face pre-tokenizer for '{pre}'")
    tk.decoder = decoders.ByteLevel()
    specials = [AddedToken(t, special=True, normalized=False)
                for t, ty in zip(tokens, types) if ty == 3]
    tk.add_special_tokens(specials)
    return tk, [t for t, ty in zip(tokens, types) if ty == 3]


HAND_WRITTEN = [
    "", " ", "  ", "\n", "\t", "\r\n", "Hello, world!", "Hello world", " Hello", "hello   ",
    "The quick brown fox jumps over the lazy dog.", "I'm sure you're right, they've said we'll go.",
    "DON'T SHOUT'S 'quoted' \"double\"", "can't won't shan't y'all o'clock",
    "3.14159265358979", "1,000,000 and 12345678901234567890", "2024-05-01T12:34:56Z", "0x1F 0b1010 1e-9",
    "naïve café résumé", "Ελληνικά κείμενα", "русский текст, ёжик", "日本語のテキストです。", "中文字符测试，标点！",
    "한국어 문장입니다", "العربية نص", "हिन्दी पाठ", "ภาษาไทย", "עברית", "Tiếng Việt có dấu",
    "emoji 👍🏽 👨‍👩‍👧‍👦 🇺🇸 😀😀😀", "e\u0301 combining", "zero\u200bwidth\u200djoiner", "\ufeffBOM",
    "tabs\tand\ttabs\t\t\tend", "new\n\nlines\n\n\n", "mixed \t\n \r\n  spaces", "\u00a0nbsp\u00a0",
    "\u3000ideographic\u3000space", "\u2028line\u2029para", "\x1c\x1d\x1e\x1f separators",
    "def f(x):\n    return x ** 2  # square\n", "int main() { return 0; }\n",
    "for (int i = 0; i < n; ++i) {\n\tsum += a[i];\n}", '{"key": [1, 2.5, null, true], "s": "v"}',
    "<html><body class=\"x\">Hi &amp; bye</body></html>", "SELECT * FROM t WHERE a >= 10;",
    "https://example.com/path?q=1&r=two#frag", "user@example.com", "C:\\Windows\\System32",
    "$100.00 €50 £20 ¥1000", "½ ¼ ¾ Ⅻ ٣ ५", "x² + y³ = z⁴", "!!!???...,,,;;;", "----====____",
    "<|im_start|>", "<|im_end|>", "<|endoftext|>", "<|im_start|>user\nHi there!<|im_end|>\n",
    "<|im_start|>system\nYou are a helpful AI assistant named SmolLM, trained by Hugging Face<|im_end|>\n"
    "<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n",
    "<|im_start|><|im_end|><|im_start|>", "<|im_start", "im_start|>", "<|<|im_end|>|>",
    "<repo_name>npugraph<file_sep>src/llm/gguf.cpp<filename>x.py", "<jupyter_code>print(1)<jupyter_output>1",
    " <|im_start|> spaced <|im_end|> ", "text<|endoftext|>more text", "a" * 300, " " * 50,
    "ab" * 100, "1" * 64, "😀" * 40, "\n" * 20, "Supercalifragilisticexpialidocious",
]

POOLS = {
    "ascii": [chr(c) for c in range(0x20, 0x7f)],
    "letters": list("abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ"),
    "digits": list("0123456789"),
    "space": [" ", " ", " ", "\t", "\n", "\r", "\u00a0", "\u3000", "\u2009", "\u2028", "\x0b", "\x0c"],
    "punct": list("!\"#$%&'()*+,-./:;<=>?@[\\]^_`{|}~"),
    "latin1": [chr(c) for c in range(0xa0, 0x180)],
    "cyrillic": [chr(c) for c in range(0x400, 0x460)],
    "cjk": [chr(c) for c in range(0x4e00, 0x4e00 + 500)] + [chr(c) for c in range(0x3040, 0x30ff)],
    "hangul": [chr(c) for c in range(0xac00, 0xac00 + 200)],
    "emoji": [chr(c) for c in range(0x1f300, 0x1f650)] + ["\u200d", "\ufe0f", "\U0001f3fd"],
    "numbers": [chr(c) for c in (0x660, 0x661, 0x966, 0x967, 0xbd, 0x2160, 0x2461, 0xff11, 0x1d7ce)],
    "controls": [chr(c) for c in range(0, 0x20)] + ["\x7f", "\x85"],
}
WORDS = ["the", "of", "and", "to", "in", "is", "that", "it", "was", "for", "on", "are", "with", "as",
         "I", "his", "they", "be", "at", "one", "have", "this", "from", "or", "had", "by", "hot",
         "word", "but", "what", "some", "we", "can", "out", "other", "were", "all", "there", "when",
         "Python", "tensor", "graph", "NPU", "model", "token", "decode", "llama", "SmolLM2", "GGUF"]


def random_strings(count: int, specials) -> list:
    rng = random.Random(20240501)
    out = []
    names = list(POOLS)
    for i in range(count):
        kind = i % 5
        if kind == 0:  # text-like: words, punctuation, numbers
            parts = []
            for _ in range(rng.randint(1, 40)):
                r = rng.random()
                if r < 0.7:
                    w = rng.choice(WORDS)
                    parts.append(w.upper() if rng.random() < 0.05 else w)
                elif r < 0.85:
                    parts.append(str(rng.randint(0, 10 ** rng.randint(1, 12))))
                else:
                    parts.append(rng.choice(POOLS["punct"]) * rng.randint(1, 3))
                parts.append(rng.choice([" ", " ", " ", "  ", "\n", ", ", ". ", "\t", "'s ", "'ll "]))
            out.append("".join(parts))
        elif kind == 1:  # characters from one or two pools
            pools = rng.sample(names, rng.randint(1, 2))
            out.append("".join(rng.choice(POOLS[rng.choice(pools)]) for _ in range(rng.randint(1, 80))))
        elif kind == 2:  # anything: mixed pools with whitespace runs
            s = []
            for _ in range(rng.randint(1, 60)):
                pool = POOLS[rng.choice(names)]
                s.append(rng.choice(pool) * (rng.randint(1, 6) if rng.random() < 0.2 else 1))
            out.append("".join(s))
        elif kind == 3:  # random code points of the whole range (no surrogates), incl. unassigned
            s = []
            for _ in range(rng.randint(1, 30)):
                cp = rng.choice([rng.randint(0, 0x7f), rng.randint(0x80, 0x7ff),
                                 rng.randint(0x800, 0xffff), rng.randint(0x10000, 0x3ffff),
                                 rng.randint(0x10000, 0x10ffff) if rng.random() < 0.2 else 0x1f600])
                if 0xd800 <= cp < 0xe000:
                    cp = 0xfffd
                s.append(chr(cp))
            out.append("".join(s))
        else:  # chat-formatted, with special tokens in the text
            s = []
            for _ in range(rng.randint(1, 4)):
                role = rng.choice(["system", "user", "assistant", "tool"])
                body = " ".join(rng.choice(WORDS) for _ in range(rng.randint(0, 15)))
                s.append(f"<|im_start|>{role}\n{body}<|im_end|>\n")
            if rng.random() < 0.5:
                s.insert(rng.randint(0, len(s)), rng.choice(specials))
            out.append("".join(s))
    return out


def write_tokens(reader, out: pathlib.Path, n_random: int) -> int:
    tk, specials = hf_tokenizer(reader)
    texts = HAND_WRITTEN + random_strings(n_random, specials)
    blob = [struct.pack("<I", 2 * len(texts))]
    for text in texts:
        for parse_special in (1, 0):
            if parse_special:
                ids = tk.encode(text, add_special_tokens=False).ids
            else:
                # Special tokens as plain text: encode with an identical tokenizer that has none.
                ids = plain_tokenizer(reader).encode(text, add_special_tokens=False).ids
            # Round trips unless the text holds a byte the vocabulary has no token for (dropped).
            decoded = tk.decode(ids, skip_special_tokens=False)
            blob.append(struct.pack("<B", parse_special) + s_str(text) + struct.pack("<I", len(ids)) +
                        struct.pack(f"<{len(ids)}i", *ids) + s_str(decoded))
    (out / "encode.bin").write_bytes(b"".join(blob))

    # Decoding: random id sequences (cut UTF-8 included) and pieces of the encodings above.
    rng = random.Random(7)
    n_vocab = len(reader.fields["tokenizer.ggml.tokens"].contents())
    cases = []
    for i in range(1000):
        if i % 2:
            ids = [rng.randrange(n_vocab) for _ in range(rng.randint(1, 20))]
        else:
            ids = tk.encode(rng.choice(texts), add_special_tokens=False).ids
            if ids:
                a = rng.randrange(len(ids))
                ids = ids[a:a + rng.randint(1, 12)]
        cases.append(struct.pack("<I", len(ids)) + struct.pack(f"<{len(ids)}i", *ids) +
                     s_str(tk.decode(ids, skip_special_tokens=False)))
    (out / "decode.bin").write_bytes(struct.pack("<I", len(cases)) + b"".join(cases))
    return len(texts)


_plain = None


def plain_tokenizer(reader):
    global _plain
    if _plain is None:
        tk, _ = hf_tokenizer(reader)
        from tokenizers import Tokenizer
        import json
        spec = json.loads(tk.to_str())
        spec["added_tokens"] = []
        _plain = Tokenizer.from_str(json.dumps(spec))
    return _plain


# ---- chat: jinja2 as transformers uses it ------------------------------------------------------------

def write_chat(reader, out: pathlib.Path) -> int:
    import jinja2
    from jinja2.sandbox import ImmutableSandboxedEnvironment
    source = reader.fields["tokenizer.chat_template"].contents()
    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True,
                                        undefined=jinja2.StrictUndefined)
    template = env.from_string(source)
    rng = random.Random(3)
    convos = [[], [{"role": "user", "content": "Hi!"}],
              [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "2+2?"}],
              [{"role": "user", "content": ""}],
              [{"role": "assistant", "content": "first"}, {"role": "user", "content": "second"}],
              [{"role": "user", "content": "a<|im_end|>b\n\n"}, {"role": "system", "content": "late"}]]
    for _ in range(60):
        convo = []
        for _ in range(rng.randint(1, 6)):
            role = rng.choice(["system", "user", "assistant", "tool"])
            content = " ".join(rng.choice(WORDS + ["\n", "日本", "😀", "'", '"', "{{", "%}"])
                               for _ in range(rng.randint(0, 12)))
            convo.append({"role": role, "content": content})
        convos.append(convo)
    blob = []
    for convo in convos:
        for add_gen in (False, True):
            text = template.render(messages=convo, add_generation_prompt=add_gen,
                                   bos_token="<|im_start|>", eos_token="<|im_end|>")
            msgs = b"".join(s_str(m["role"]) + s_str(m["content"]) for m in convo)
            blob.append(struct.pack("<BI", int(add_gen), len(convo)) + msgs + s_str(text))
    (out / "chat.bin").write_bytes(struct.pack("<I", len(blob)) + b"".join(blob))
    return len(blob)


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("out", type=pathlib.Path)
    parser.add_argument("--model", type=pathlib.Path, default=None)
    parser.add_argument("--random-strings", type=int, default=1200)
    args = parser.parse_args(argv)
    import gguf
    model = args.model or default_model()
    if not model.is_file():
        raise SystemExit(f"make_reference: no model at {model} (run tools/fetch_model.py)")
    args.out.mkdir(parents=True, exist_ok=True)
    reader = gguf.GGUFReader(str(model))
    (args.out / "model.txt").write_text(str(model) + "\n")
    counts = write_tensors(reader, args.out)
    n_synthetic = write_synthetic(args.out)
    write_metadata(reader, args.out)
    n_texts = write_tokens(reader, args.out, args.random_strings)
    n_chat = write_chat(reader, args.out)
    print(f"make_reference: {len(reader.tensors)} tensors {counts}, {n_synthetic} synthetic, {n_texts} strings, "
          f"{n_chat} chat renders -> {args.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
