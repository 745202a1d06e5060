"""The pre-tokenizer's Unicode classes (src/llm/tokenizer_unicode_data.cpp) against Hugging Face
tokenizers' own behaviour on every code point, and the generated file against its generator."""
import pathlib
import re
import subprocess
import sys

import pytest

REPO = pathlib.Path(__file__).resolve().parents[3]
DATA = REPO / "src" / "llm" / "tokenizer_unicode_data.cpp"
GENERATOR = REPO / "src" / "llm" / "tokenizer_unicode_gen.py"


def table():
    classes = {}
    for lo, hi, cls in re.findall(r"\{0x([0-9A-F]+), 0x([0-9A-F]+), CodepointClass::(\w+)\}",
                                  DATA.read_text()):
        for cp in range(int(lo, 16), int(hi, 16) + 1):
            classes[cp] = cls
    return classes


def test_generated_table_is_current():
    pytest.importorskip("unicodedata2")
    fresh = subprocess.run([sys.executable, str(GENERATOR)], capture_output=True, text=True,
                           check=True).stdout
    assert fresh == DATA.read_text(), "rerun src/llm/tokenizer_unicode_gen.py"


def test_every_code_point_classifies_as_hf_tokenizers_splits_it():
    pre = pytest.importorskip("tokenizers.pre_tokenizers")
    split = pre.Sequence([pre.Digits(individual_digits=True),
                          pre.ByteLevel(add_prefix_space=False, use_regex=True)]).pre_tokenize_str

    def hf_class(c):  # how the GPT-2 split and the digit split treat c, from its neighbours
        if len(split("a" + c)) == 1:
            return "letter"
        if len(split("!" + c)) == 1:
            return "other"
        if len(split(c + c)) == 1:
            return "space"
        return "number"

    ours = table()
    wrong = []
    for cp in range(0x110000):
        if 0xD800 <= cp < 0xE000:
            continue
        if hf_class(chr(cp)) != ours.get(cp, "other"):
            wrong.append(cp)
    assert not wrong, f"{len(wrong)} code points differ, e.g. {[hex(c) for c in wrong[:20]]}"
