"""The qwen2 pre-tokenizer (Note [Qwen2 split]) against Hugging Face `tokenizers` running Qwen's own
regex: SmolLM2's byte-level vocabulary and merges re-labelled `tokenizer.ggml.pre = "qwen2"` (written
by the gguf package), npugraph's encode equal to the Hugging Face BPE with
Split(Qwen2's pattern, isolated) + ByteLevel on the hand-written and 1,000 random strings of the
tokenizer reference (make_reference.py). Skipped until SmolLM2 is fetched."""
import pathlib
import sys

import pytest

gguf = pytest.importorskip("gguf")
tokenizers = pytest.importorskip("tokenizers")
npugraph = pytest.importorskip("npugraph")

HERE = pathlib.Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
import make_reference  # noqa: E402

QWEN2 = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
         r"|\s*[\r\n]+|\s+(?!\S)|\s+")


@pytest.fixture(scope="module")
def files(tmp_path_factory):
    model = make_reference.default_model()
    if not model.is_file():
        pytest.skip(f"model not fetched ({model}): /usr/bin/python3 tools/fetch_model.py")
    reader = gguf.GGUFReader(str(model))
    field = lambda k: reader.fields[k].contents()
    path = tmp_path_factory.mktemp("qwen2") / "qwen2-vocab.gguf"
    w = gguf.GGUFWriter(str(path), arch="llama")
    w.add_tokenizer_model("gpt2")
    w.add_tokenizer_pre("qwen2")
    w.add_token_list(field("tokenizer.ggml.tokens"))
    w.add_token_types(field("tokenizer.ggml.token_type"))
    w.add_token_merges(field("tokenizer.ggml.merges"))
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    return reader, path


def test_encode_equals_hugging_face_with_qwen2s_regex(files):
    from tokenizers import AddedToken, Regex, Tokenizer, models, pre_tokenizers
    reader, path = files
    tokens = reader.fields["tokenizer.ggml.tokens"].contents()
    types = reader.fields["tokenizer.ggml.token_type"].contents()
    merges = reader.fields["tokenizer.ggml.merges"].contents()
    vocab = {}
    for i, t in enumerate(tokens):
        vocab.setdefault(t, i)
    hf = Tokenizer(models.BPE(vocab=vocab, merges=[tuple(m.split(" ", 1)) for m in merges],
                              fuse_unk=False, byte_fallback=False))
    hf.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN2), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    specials = [t for t, ty in zip(tokens, types) if ty == 3]
    hf.add_special_tokens([AddedToken(t, special=True, normalized=False) for t in specials])
    ours = npugraph.llm.Tokenizer(str(path))
    texts = make_reference.HAND_WRITTEN + make_reference.random_strings(1000, specials) + [
        "I'M SURE THEY'VE SAID WE'LL GO", "He'S 'Ll", "a\n\n  b", "x  \n\ty", "!!!\n\nnext", " ,\r\n",
        "12345 67", "\t\tword", "$hello", "\u3000漢字", "line\r\n\r\n  \n  tail  ",
        "DON'TCARE it'Sall 'LLama we'REady"]
    bad = [(t, ours.encode(t, add_special=False), hf.encode(t).ids) for t in texts
           if ours.encode(t, add_special=False) != hf.encode(t).ids]
    assert not bad, f"{len(bad)} of {len(texts)} differ, first: {bad[0]!r}"
