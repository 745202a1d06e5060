"""float16 matrix products under the shim on both torches (Note [float16 matrix products on torch
1.13] in npugraph/_torch_capture.py): torch 1.13 has none on the CPU, so the shim computes them in
float32 and rounds once, as torch 2.x does natively. Checked against float64 products of inputs
whose float32 sums are exact (any summation order gives them), rounded to float16, and captured
against eager, bitwise."""
import pytest
import torch

from npugraph import npu

TORCH_1 = int(torch.__version__.split(".")[0]) < 2


def dyadic(*shape, seed):
    """float16 values k/8, |k| <= 32: products are multiples of 1/64 below 16, so sums of up to 32 of
    them (and alpha=2, beta=0.5 scalings) are exact in float32 and float64."""
    g = torch.Generator().manual_seed(seed)
    return (torch.randint(-32, 33, shape, generator=g).double() / 8).half()


def products(a, b, c, v, A, B, C, w, bias, x3):
    """Each product once, with the inputs' dtype (float16, or float64 for the reference)."""
    return {
        "mm": torch.mm(a, b),
        "matmul": a @ b,
        "addmm": torch.addmm(c, a, b, beta=0.5, alpha=2),
        "bmm": torch.bmm(A, B),
        "baddbmm": torch.baddbmm(C, A, B, beta=0.5, alpha=2),
        "addbmm": torch.addbmm(c, A, B),
        "mv": torch.mv(a, v),
        "addmv": torch.addmv(c[:, 0], a, v, alpha=2),
        "dot": torch.dot(v, v),
        "vdot": torch.vdot(v, v),
        "matmul 3d @ 2d": x3 @ b,
        "linear": torch.nn.functional.linear(a, w, bias),
        "einsum": torch.einsum("bij,bjk->bik", A, B),
    }


def inputs(seed):
    M, K, N = 5, 32, 7
    return (dyadic(M, K, seed=seed), dyadic(K, N, seed=seed + 1), dyadic(M, N, seed=seed + 2),
            dyadic(K, seed=seed + 3), dyadic(3, M, K, seed=seed + 4), dyadic(3, K, N, seed=seed + 5),
            dyadic(3, M, N, seed=seed + 6), dyadic(N, K, seed=seed + 7), dyadic(N, seed=seed + 8),
            dyadic(2, M, K, seed=seed + 9))


def test_float16_products_round_the_exact_product_once(shim):
    args = inputs(0)
    got = products(*args)
    want = products(*(t.double() for t in args))
    for name, result in got.items():
        assert result.dtype == torch.float16, name
        if name != "addbmm":
            assert torch.equal(result, want[name].half()), name
    # torch's addbmm adds one batch at a time into its float16 result: it rounds after each
    a, b, c, v, A, B = args[:6]
    r = c.double()
    for i in range(A.shape[0]):
        r = (r + A[i].double() @ B[i].double()).half().double()
    assert torch.equal(got["addbmm"], r.half()) and not torch.equal(r.half(), want["addbmm"].half())
    r = c.double()
    for i in range(A.shape[0]):  # beta scales self once, before the first batch
        r = ((0.5 if i == 0 else 1) * r + 2 * (A[i].double() @ B[i].double())).half().double()
    assert torch.equal(torch.addbmm(c, A, B, beta=0.5, alpha=2), r.half())
    x = c.clone()
    assert torch.equal(x.addbmm_(A, B, beta=0.5, alpha=2), r.half())  # in place: the same rounding


def test_out_and_in_place_forms_write_the_rounded_product(shim):
    a, b, c = inputs(1)[:3]
    want = torch.addmm(c.double(), a.double(), b.double()).half()
    x = c.clone()
    assert x.addmm_(a, b) is x and torch.equal(x, want)
    out = torch.empty(0, dtype=torch.float16)  # resized, as torch's .out does
    assert torch.mm(a, b, out=out) is out
    assert torch.equal(out, (a.double() @ b.double()).half())


def test_captured_float16_products_replay_the_eager_results(shim):
    torch.manual_seed(3)
    a, b = torch.randn(16, 64).half(), torch.randn(64, 24).half()
    A, B = torch.randn(4, 16, 64).half(), torch.randn(4, 64, 24).half()
    w, bias = torch.randn(24, 64).half(), torch.randn(24).half()

    def step(acc):
        acc.copy_(bias.expand(16, 24))
        acc.addmm_(a, b)  # in place
        return a @ b, torch.bmm(A, B), torch.nn.functional.linear(a, w, bias), acc

    g = npu.NPUGraph()
    acc = torch.zeros(16, 24, dtype=torch.float16)
    with npu.graph(g):
        captured = step(acc)
    for _ in range(2):
        g.replay()
        npu.synchronize()
        eager = step(torch.zeros(16, 24, dtype=torch.float16))
        for got, want in zip(captured, eager):
            assert got.dtype == torch.float16 and torch.equal(got, want)
        a.copy_(torch.randn(16, 64).half())  # the next replay reads the new values
        A.mul_(-1)


def test_mixed_dtypes_keep_torchs_error(shim):
    with pytest.raises(RuntimeError):
        torch.ones(2, 3).half() @ torch.ones(3, 2)


@pytest.mark.skipif(not TORCH_1, reason="torch >= 2 computes float16 products itself")
def test_without_the_shim_torch_1_13_has_no_float16_product():
    with pytest.raises(RuntimeError, match="not implemented for 'Half'"):
        torch.ones(2, 3).half() @ torch.ones(3, 2).half()
