"""What help() and inspect.signature show: the FIA op's explicit signature with every keyword the
parser accepts and torch_npu's defaults, and a docstring on every public name."""
import inspect
import pydoc

import numpy as np
import torch

import npugraph
from npugraph import _fia_doc, npu

fia = npugraph.npu_fused_infer_attention_score


def test_fia_signature_lists_exactly_the_keywords_the_parser_accepts():
    sig = inspect.signature(fia)
    names = [p.name for p in sig.parameters.values()]
    assert names[:3] == ["query", "key", "value"]
    assert sorted(names[3:]) == npugraph._C._fia_keywords()
    assert sig.parameters["num_heads"].default == 1
    assert sig.parameters["input_layout"].default == "BSH"
    assert sig.parameters["pre_tokens"].default == 2147483647
    assert all(p.kind is inspect.Parameter.KEYWORD_ONLY for p in list(sig.parameters.values())[3:])


def test_passing_every_default_explicitly_changes_nothing():
    rng = np.random.default_rng(0)
    q = torch.from_numpy(rng.standard_normal((1, 1, 32)).astype(np.float32)).half()
    k = torch.from_numpy(rng.standard_normal((1, 5, 32)).astype(np.float32)).half()
    v = torch.from_numpy(rng.standard_normal((1, 5, 32)).astype(np.float32)).half()
    defaults = {p.name: p.default for p in list(inspect.signature(fia).parameters.values())[3:]}
    a = fia(q, k, v)
    b = fia(q, k, v, **defaults)
    assert torch.equal(a[0], b[0]) and torch.equal(a[1], b[1])


def test_help_shows_the_signature_and_the_updatable_keywords():
    text = pydoc.render_doc(fia, renderer=pydoc.plaintext)
    assert "npu_fused_infer_attention_score(query, key, value, *, pse_shift=None" in text
    assert "num_heads=1" in text and "input_layout='BSH'" in text
    assert "Updatable: actual_seq_lengths, actual_seq_lengths_kv" in text
    assert "writes caller-owned outputs" in (fia.out.__doc__ or "")
    assert repr(fia) == "<npugraph op npu_fused_infer_attention_score>"
    assert _fia_doc.OUT_SIGNATURE.parameters["workspace"].kind is inspect.Parameter.KEYWORD_ONLY


def _documented(name, obj):
    """A docstring beyond the signature line pybind11 writes itself ("name(arg: type) -> ret")."""
    lines = [ln for ln in (obj.__doc__ or "").splitlines() if ln.strip()]
    own = [ln for ln in lines if not ln.lstrip().startswith(name.split(".")[-1] + "(")
           and not ln.lstrip()[:2].isdigit()]  # overload numbering "1. name(...)"
    return bool(own)


def _public(prefix, holder):
    for name in dir(holder):
        if name.startswith("_"):
            continue
        obj = getattr(holder, name)
        if isinstance(obj, type(np)) or not callable(obj):
            continue
        yield f"{prefix}.{name}", obj
        if isinstance(obj, type):
            for m in vars(obj):
                if not m.startswith("_") and callable(getattr(obj, m)):
                    yield f"{prefix}.{name}.{m}", getattr(obj, m)


def test_every_public_callable_has_a_docstring():
    names = list(_public("npugraph", npugraph)) + list(_public("npugraph.npu", npu))
    missing = sorted({n for n, o in names if not _documented(n, o)})
    assert not missing, missing


def test_every_error_kind_is_an_npugraph_error_and_its_builtin():
    kinds = {npugraph.ArgumentError: ValueError, npugraph.StateError: RuntimeError,
             npugraph.WaitTimeoutError: RuntimeError, npugraph.TaskError: RuntimeError,
             npugraph.UnsupportedError: NotImplementedError, npugraph.ResourceError: MemoryError}
    for kind, builtin in kinds.items():
        assert issubclass(kind, npugraph.Error) and issubclass(kind, builtin), kind
    assert issubclass(npugraph.Error, RuntimeError)
    try:
        npu.set_device(3)
    except npugraph.Error as e:  # the base catches a ValueError kind too
        assert isinstance(e, npugraph.ArgumentError) and "device = 3" in str(e)
    else:
        raise AssertionError("set_device(3) did not raise")
