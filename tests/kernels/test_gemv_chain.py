"""The persistent GEMV chain (csrc/gemv_chain.cu via gemv_chain_ops; an experiment, not on the
engine's route). CPU: the task array's layout and the clear errors on bad chains. GPU (marked `gpu`):
a chain of dependent GEMVs in one cooperative launch equals, bit for bit, the same chain run by
gemv_rows kernels of the same rows-per-warp (r<R>u1 == gemv_r_<fmt>_r<R>u1k1), launched twice (the
barrier re-arms itself); r2u2 (no plain twin) within 5e-3 of a float64 reference per link."""

from __future__ import annotations

import pytest
import torch

from onecat.kernels import cuda_ops, gemv_chain_ops
from onecat.kernels.weights import random_packed

gpu = pytest.mark.gpu


def _h(*shape, device="cpu"):
    return torch.zeros(*shape, dtype=torch.float16, device=device)


def test_pack_tasks_layout(gen):
    w0, w1 = random_packed(64, 256, "q4_0", gen), random_packed(96, 64, "q4_0", gen)
    x, y0, y1 = _h(1, 256), _h(1, 64), _h(1, 96)
    t = gemv_chain_ops.pack_tasks([(y0, x, w0), (y1, y0, w1)])
    assert t.dtype == torch.int64 and t.numel() == 2 * gemv_chain_ops.TASK_WORDS
    words = [int(v) % (1 << 64) for v in t.tolist()]
    assert words[:5] == [y0.data_ptr(), x.data_ptr(), w0.q.data_ptr(), 0, w0.meta.data_ptr()]
    assert words[5] == 64 | (256 << 32) and words[6] == 1  # n | k << 32, group chunks
    assert words[8] == y0.data_ptr() and words[12] == 96 | (64 << 32)


def test_pack_tasks_refuses_bad_chains(gen):
    w = random_packed(64, 256, "q4_0", gen)
    with pytest.raises(ValueError, match="empty"):
        gemv_chain_ops.pack_tasks([])
    with pytest.raises(ValueError, match="one weight format"):
        gemv_chain_ops.pack_tasks([(_h(1, 64), _h(1, 256), w), (_h(1, 64), _h(1, 256), random_packed(64, 256, "q4_k", gen))])
    with pytest.raises(ValueError, match="do not fit"):
        gemv_chain_ops.pack_tasks([(_h(1, 32), _h(1, 256), w)])
    with pytest.raises(ValueError, match="fp16"):
        gemv_chain_ops.pack_tasks([(_h(1, 64), torch.zeros(1, 256), w)])


def test_run_chain_refuses_unknown_shape(gen):
    with pytest.raises(ValueError, match="no persistent chain kernel"):
        gemv_chain_ops.run_chain(torch.zeros(7, dtype=torch.int64), "q6_k", (2, 1))


def _chain(fmt, dims, gen):
    """Weights on the GPU and fp16 outputs of a chain whose link i reads link i-1's first K values."""
    ws = [random_packed(n, k, fmt, gen, "cuda") for n, k in dims]
    x0 = (torch.randn(1, dims[0][1], generator=gen) * 0.5).half().cuda()
    outs = [torch.full((1, n), float("nan"), dtype=torch.float16, device="cuda") for n, _ in dims]
    return ws, x0, outs


def _plain(ws, x0, shape):
    """The same chain through gemv_rows kernels of `shape` (R, U, KS, SFX), one launch per link."""
    ys, x = [], x0
    for w in ws:
        out = torch.empty(1, w.shape[0], dtype=torch.float16, device="cuda")
        cuda_ops.gemv_m1_launch(out, x[:, :w.shape[1]], w, shape)
        ys.append(out)
        x = out
    return ys


# per format: odd N (a partial last row group), K of 129 / 31 chunks (lanes past the end), links with
# N < K and N > K; link i reads the first K_i of link i-1's N_(i-1) outputs (K_i <= N_(i-1))
DIMS = {"q4_0": [(1000, 4128), (4096, 992), (517, 4096), (2048, 512)],
        "q4_k": [(1000, 4352), (4096, 768), (517, 4096), (2048, 512)]}  # q4_k: K a multiple of 256


@gpu
@pytest.mark.parametrize("fmt,r", [("q4_0", 4), ("q4_0", 2), ("q4_k", 4)])
def test_chain_matches_gemv_rows_bitwise(fmt, r, gen):
    dims = DIMS[fmt]
    ws, x0, outs = _chain(fmt, dims, gen)
    tasks = gemv_chain_ops.pack_tasks([(outs[i], x0 if i == 0 else outs[i - 1], w) for i, w in enumerate(ws)])
    want = _plain(ws, x0, (r, 1, 1, ""))
    for launch in range(2):
        for o in outs:
            o.fill_(float("nan"))
        gemv_chain_ops.run_chain(tasks, fmt, (r, 1))
        torch.cuda.synchronize()
        for i, (got, exp) in enumerate(zip(outs, want)):
            same = (got == exp) | (got.isnan() & exp.isnan())
            assert bool(same.all()), f"launch {launch} link {i} {dims[i]}: {int((~same).sum())} outputs differ"
        assert torch.isfinite(outs[0]).all()


@gpu
@pytest.mark.parametrize("fmt", ["q4_0", "q4_k"])
def test_chain_two_chunks_in_flight(fmt, gen):
    k = 4096
    dims = [(k, k)] * 3
    ws, x0, outs = _chain(fmt, dims, gen)
    tasks = gemv_chain_ops.pack_tasks([(outs[i], x0 if i == 0 else outs[i - 1], w) for i, w in enumerate(ws)])
    gemv_chain_ops.run_chain(tasks, fmt, (2, 2))
    torch.cuda.synchronize()
    x = x0
    for i, (w, got) in enumerate(zip(ws, outs)):
        want = x.double() @ w.dequantize(torch.float64).t()
        err = float((got.double() - want).norm() / want.norm())
        assert err <= 5e-3, f"link {i}: rel err {err:.3g}"
        x = got
