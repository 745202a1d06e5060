"""The quantisation table's dequantisers against llama.cpp's own numpy ones (the `gguf` package):
random blocks of every type npugraph computes on, bitwise (Note [Quantisation table])."""
import numpy as np
import pytest

gguf = pytest.importorskip("gguf")
_C = pytest.importorskip("npugraph._C")

TYPES = ["Q4_0", "Q4_1", "Q5_0", "Q8_0", "Q4_K", "Q5_K", "Q6_K"]


def random_blocks(qtype, rows, cols, rng):
    """Random bytes with finite, modest half scales where the format keeps them."""
    block, nbytes = gguf.GGML_QUANT_SIZES[qtype]
    raw = rng.integers(0, 256, size=(rows, cols // block, nbytes), dtype=np.uint8)
    halves = lambda n: (rng.uniform(-0.05, 0.05, size=(rows, cols // block, n)) / (64 if block == 256 else 1)
                        ).astype(np.float16).view(np.uint8)
    name = qtype.name
    if name == "Q6_K":
        raw[..., -2:] = halves(1)
    elif name in ("Q4_1", "Q4_K", "Q5_K"):
        raw[..., 0:4] = halves(2)
    else:
        raw[..., 0:2] = halves(1)
    return raw.reshape(rows, -1)


@pytest.mark.parametrize("name", TYPES)
def test_dequantize_is_bitwise_ggufs(name):
    rng = np.random.default_rng(sum(map(ord, name)))
    qtype = getattr(gguf.GGMLQuantizationType, name)
    rows, cols = 5, 1024
    data = random_blocks(qtype, rows, cols, rng)
    ours = _C.QuantWeight(data, name, rows, cols).dequantize()
    theirs = gguf.quants.dequantize(data, qtype)
    assert ours.dtype == np.float32 and ours.shape == theirs.shape == (rows, cols)
    assert ours.tobytes() == theirs.astype(np.float32).tobytes()
