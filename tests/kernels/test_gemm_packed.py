"""The packed GEMM (csrc/gemm_packed.cu, provider `cuda_pack_gemm`: linear with M > 16 rows on a
PackedWeight). CPU: admission on fake sm_70 / sm_90 devices and refusal reasons, the priority list,
the tile / split-K choice and the host wrapper's launch (intercepted). GPU (marked `gpu`): every
packed kind, M = 17..300, odd N, K tails, bias, every tile x split; outputs poisoned with NaN, error
||out - ref|| / ||ref|| <= 2e-3 against x (fp32) @ W.dequantize(fp32)^T; split-K determinism, a 3-D
x and a CUDA-graph capture. Seed: $ONECAT_TEST_SEED, else random (printed on failure)."""

from __future__ import annotations

import dataclasses
import os
import random
import struct
import zlib

import pytest
import torch

from onecat.kernels import cuda_ops, gemm_ops, linear_fused_ops, ops
from onecat.kernels.driver import Kernel
from onecat.kernels.registry import REFERENCE
from onecat.kernels.weights import PACKED_FORMATS, GGUFWeight, pack_awq, random_awq, random_packed

SEED = int(os.environ.get("ONECAT_TEST_SEED", random.randrange(2**31)))
TOL = 2e-3
gpu = pytest.mark.gpu
needs_rd = pytest.mark.skipif(not torch.cuda.is_available() or torch.cuda.get_device_capability() < gemm_ops.RD_MIN_CAPABILITY,
                              reason="register-direct GEMM needs sm_80+ (mma.sync m16n8k16)")


# -- CPU: admission --------------------------------------------------------------------------------
def _problem(x, w, bias=None, cap=(7, 0), dtype=None, **override):
    p = ops.problem("linear", x, w, bias)
    params = dict(p.params) | override
    return dataclasses.replace(p, device="cuda" if cap else "cpu", capability=cap, dtype=dtype or p.dtype,
                               params=tuple(sorted(params.items())))


def _select(p):
    return ops.registry.explain(p, check_available=False)


@pytest.fixture(scope="module")
def small():
    gen = torch.Generator().manual_seed(0)
    return {t: random_packed(80, 256, t, gen) for t in PACKED_FORMATS}


def test_priority_list():
    order = ops.registry.order("linear")
    # the register-direct tiles first (from RD_MIN_ROWS rows, sm_80+ q4_0 / q4_k), the shared-memory ones (from
    # GEMM_MIN_ROWS), then the GEMV
    assert order.index("cuda_pack_gemm_rd") + 1 == order.index("cuda_pack_gemm") == order.index("cuda_pack") - 1
    assert order.index("cuda_pack_gemm") < order.index("cuda") and order[-1] == REFERENCE


@pytest.mark.parametrize("cap", [(7, 0), (9, 0)])
@pytest.mark.parametrize("kind", PACKED_FORMATS)
def test_admitted_by_rows(small, kind, cap, any_nvrtc):
    w = small[kind]
    rd = kind in gemm_ops.RD_FORMATS and cap >= (8, 0)  # the register-direct tiles: q4_0 / q4_k, 3..64 rows, sm_80+
    for m in (17, 64, 300):
        sel = _select(_problem(torch.zeros(m, 256, dtype=torch.float16), w, cap=cap))
        assert sel.provider.name == ("cuda_pack_gemm_rd" if rd and m <= 64 else "cuda_pack_gemm"), (m, sel.refused)
        assert any("the packed GEMV covers M <= 16" in r for r in sel.refused["cuda_pack"]) or sel.refused[
            "cuda_pack"] == [f"lower priority than {sel.provider.name}"]
    x3, bias = torch.zeros(2, 10, 256, dtype=torch.float16), torch.zeros(80, dtype=torch.float16)
    sel = _select(_problem(x3, w, bias, cap=cap))
    assert sel.provider.name == ("cuda_pack_gemm_rd" if rd else "cuda_pack_gemm")  # 20 rows of a 3-D x, fp16 bias
    for m in (2, 3, 4, 5, 16):  # rows the GEMV's M = 2..4 kernels or the GEMMs take
        sel = _select(_problem(torch.zeros(m, 256, dtype=torch.float16), w, cap=cap))
        want = ("cuda_pack_gemm_rd" if rd and m >= gemm_ops.RD_MIN_ROWS else
                "cuda_pack_gemm" if m >= gemm_ops.GEMM_MIN_ROWS else "cuda_pack")
        assert sel.provider.name == want, (m, sel.refused)
    sel = _select(_problem(torch.zeros(1, 256, dtype=torch.float16), w, cap=cap))
    assert sel.provider.name == "cuda_pack"  # one row: the GEMV


def test_register_direct_admission(small, any_nvrtc):
    """cuda_pack_gemm_rd: sm_80+, packed q4_0 / awq (K % 128 == 0; AWQ groups of a power of two) or q4_k /
    q6_k (K % 256), 3..64 rows; every refusal says why and the shared-memory GEMM takes the call instead (a
    V100 keeps it)."""
    x, w = torch.zeros(32, 256, dtype=torch.float16), small["q4_0"]

    def reasons(p):
        return gemm_ops.supports_linear_packed_gemm_rd(p)

    assert reasons(_problem(x, w, cap=(8, 0))) == [] and reasons(_problem(x, w, cap=(9, 0))) == []
    assert "capability 7.0 < 8.0 (mma.sync m16n8k16)" in reasons(_problem(x, w, cap=(7, 0)))
    for kind in ("q4_k", "q6_k", "awq"):
        assert reasons(_problem(x, small[kind], cap=(9, 0))) == [], kind
    for kind in ("q4_1", "q8_0"):
        assert f"weight format packed_{kind} not packed_q4_0 / packed_q4_k / packed_q6_k / packed_awq" in reasons(
            _problem(x, small[kind], cap=(9, 0)))
    w96 = pack_awq(*random_awq(80, 384, 96, torch.Generator().manual_seed(0)), 96)  # groups of 3 chunks
    x384 = torch.zeros(32, 384, dtype=torch.float16)
    assert reasons(_problem(x384, w96, cap=(9, 0))) == ["AWQ group size 96 not a power of two >= 32"]
    assert _select(_problem(x384, w96, cap=(9, 0))).provider.name == "cuda_pack_gemm"
    assert any("the register-direct tiles take 3..64" in r
               for r in reasons(_problem(torch.zeros(65, 256, dtype=torch.float16), w, cap=(9, 0))))
    assert "K=288 not a multiple of 128 (the K-step)" in reasons(_problem(x, w, cap=(9, 0), k=288))
    assert "bias dtype float32 not float16" in reasons(_problem(x, w, torch.zeros(80), cap=(9, 0)))
    sel = _select(_problem(x, w, cap=(7, 0)))
    assert sel.provider.name == "cuda_pack_gemm" and any("< 8.0" in r for r in sel.refused["cuda_pack_gemm_rd"])
    sel = _select(_problem(x, w, cap=(9, 0)))
    assert sel.provider.name == "cuda_pack_gemm_rd" and sel.refused["cuda_pack_gemm"] == [
        "lower priority than cuda_pack_gemm_rd"]


def test_glu_epilogue_admission(any_nvrtc):
    """rms_norm_linear with silu_and_mul at 3..64 rows of a q4_0 [gate | up] on sm_80+: cuda_pack_gemm_rd
    (the norm, then the GEMM with the GLU epilogue); a V100, a bias or halves that are not whole tiles
    keep the unfused route, and the report says why."""
    gen = torch.Generator().manual_seed(1)
    x, w = torch.zeros(32, 256, dtype=torch.float16), random_packed(256, 256, "q4_0", gen)
    norm = torch.ones(256, dtype=torch.float16)

    def select(x, w, cap, bias=None, act="silu_and_mul", **override):
        p = ops.problem("rms_norm_linear", x, norm, 1e-5, w, x, bias, act)
        params = dict(p.params) | override
        return _select(dataclasses.replace(p, device="cuda", capability=cap, params=tuple(sorted(params.items()))))

    sel = select(x, w, (9, 0))
    assert sel.provider.name == "cuda_pack_gemm_rd", sel.refused
    assert any("M=17-64: the normed-input GEMV is for one row" in r for r in sel.refused["cuda_gemv_norm"])
    sel = select(x, w, (7, 0))
    assert sel.provider.name == "unfused" and any("< 8.0" in r for r in sel.refused["cuda_pack_gemm_rd"])
    for refused, why in ((select(x, w, (9, 0), act=None), "activation None: the GEMM epilogue is silu_and_mul only"),
                         (select(x, w, (9, 0), bias=torch.zeros(256, dtype=torch.float16)),
                          "bias with an activation: the GLU epilogue takes none"),
                         (select(x, random_packed(192, 256, "q4_0", gen), (9, 0)),
                          "N=192: the [gate | up] halves are not whole tiles (N / 2 % 64)")):
        assert refused.provider.name != "cuda_pack_gemm_rd"
        assert any(why in r for r in refused.refused["cuda_pack_gemm_rd"]), refused.refused["cuda_pack_gemm_rd"]
    one = ops.problem("rms_norm_linear", torch.zeros(1, 256, dtype=torch.float16), norm, 1e-5, w, None, None,
                      "silu_and_mul")
    assert any("the register-direct tiles take 3..64" in r for r in linear_fused_ops.supports_gemm_glu(
        dataclasses.replace(one, device="cuda", capability=(9, 0))))


def test_refusal_reasons(small, any_nvrtc):
    x = torch.zeros(32, 256, dtype=torch.float16)
    w = small["q4_0"]

    def reasons(p):
        return gemm_ops.supports_linear_packed_gemm(p)

    assert reasons(_problem(x, w)) == []
    assert "device is cpu, not a CUDA GPU" in reasons(_problem(x, w, cap=None))
    assert "capability 6.1 < 7.0" in reasons(_problem(x, w, cap=(6, 1)))
    assert any("dtype bfloat16 not float16" in r for r in reasons(_problem(x, w, dtype="bfloat16")))
    assert "M=4 < 5: the packed GEMV (cuda_pack) covers it" in reasons(_problem(x[:4], w))
    dense = torch.zeros(80, 256, dtype=torch.float16)
    assert any("weight format dense not a PackedWeight" in r for r in reasons(_problem(x, dense)))
    gguf = GGUFWeight.random(80, 256, "q4_0", torch.Generator().manual_seed(1))
    assert any("weight format gguf_q4_0 not a PackedWeight" in r for r in reasons(_problem(x, gguf)))
    assert "K=100 not a multiple of 32" in reasons(_problem(x, w, k=100))
    assert "K=288 not a multiple of the 256-weight q4_k block" in reasons(_problem(x, small["q4_k"], k=288))
    assert "K=288 not a multiple of the 256-weight q6_k block" in reasons(_problem(x, small["q6_k"], k=288))
    assert reasons(_problem(x, w, k=288)) == []  # q4_0: any multiple of 32
    assert "bias dtype float32 not float16" in reasons(_problem(x, w, torch.zeros(80)))
    assert "x not contiguous and 16-byte aligned" in reasons(_problem(torch.zeros(256, 32, dtype=torch.float16).t(), w))
    # refused shapes fall back to the reference, with the reasons listed
    sel = _select(_problem(x, w, cap=(6, 1)))
    assert sel.provider.name == REFERENCE and "capability 6.1 < 7.0" in sel.refused["cuda_pack_gemm"]
    sel = _select(_problem(x, dense))
    assert sel.provider.name == REFERENCE and any("not a PackedWeight" in r for r in sel.refused["cuda_pack_gemm"])


# -- CPU: variant choice and the host wrapper ------------------------------------------------------
def test_gemm_shape():
    h200 = {"m32": 6, "m64": 4, "m128": 3, "m32w": 4, "m64w": 2}
    assert gemm_ops.gemm_shape(17, 4096, 4096, 80) == ("m32", 3)  # 64 tiles, 240 V100 slots
    assert gemm_ops.gemm_shape(17, 4096, 4096, 132, h200) == ("m32", 8)  # at most 8 splits
    assert gemm_ops.gemm_shape(17, 28672, 4096, 132, h200) == ("m32w", 2)  # wide: 224 tiles, 528 slots
    assert gemm_ops.gemm_shape(17, 16383, 4096, 132, h200) == ("m32", 3)  # narrow below WIDE_MIN_N rows
    assert gemm_ops.gemm_shape(64, 4096, 14336, 80) == ("m64", 2)
    assert gemm_ops.gemm_shape(33, 28672, 4096, 80) == ("m64w", 1)  # 224 wide tiles fill the GPU
    assert gemm_ops.gemm_shape(65, 28672, 4096, 80) == ("m128", 1)  # wide tiles only up to 64 rows
    assert gemm_ops.gemm_shape(128, 6144, 4096, 132, h200) == ("m64", 2)  # 96 N tiles: m64, 192 blocks
    assert gemm_ops.gemm_shape(128, 28672, 4096, 132, h200) == ("m128", 1)
    assert gemm_ops.gemm_shape(512, 4096, 4096, 80) == ("m128", 1)
    assert gemm_ops.gemm_shape(512, 4096, 4096, 132, h200 | {"m128": 4}) == ("m128", 2)
    assert gemm_ops.gemm_shape(100, 80, 96, 132) == ("m64", 1)  # 2 K-steps: nothing to split
    assert gemm_ops.gemm_shape(20, 80, 512, 80) == ("m32", 2)  # 8 K-steps: >= 4 per split
    for m in (17, 32, 33, 64, 65, 128, 300, 4096):
        for n, k in ((80, 96), (4096, 4096), (6144, 4096), (28672, 4096), (4096, 14336), (128256, 4096)):
            for sms, res in ((80, None), (132, h200)):
                tile, s = gemm_ops.gemm_shape(m, n, k, sms, res)
                assert m <= {"m32": 32, "m64": 128, "m128": 1 << 30, "m32w": 32, "m64w": 64}[tile], (m, tile)
                assert (tile != "m128" or m > 64) and tile.endswith("w") == (m <= 64 and n >= 16384), (m, n, tile)
                assert 1 <= s <= 8 and (s == 1 or -(-k // gemm_ops.GEMM_BK) >= 4 * s), (m, n, k, s)
                bm, bn = gemm_ops.GEMM_TILES[tile][:2]
                assert s == 1 or s * -(-n // bn) * -(-m // bm) <= sms * (res or gemm_ops.GEMM_V100_RESIDENT)[tile]
    assert gemm_ops.gemm_slots("q4_0", torch.device("cpu")) == (80, gemm_ops.GEMM_V100_RESIDENT)


@pytest.mark.parametrize("rd", [False, True])
def test_every_slot_kernel_has_a_block_shape(rd):
    # gemm_slots asks each kernel's occupancy at its tile's block size: a name _tile cannot resolve
    # failed every CUDA linear on its first call (an s12 experiment's extra entries, found on the H200)
    for name in gemm_ops.slot_kernels("q4_0", rd):
        assert gemm_ops._tile(name).threads > 0


def test_gemm_shape_register_direct():
    """rd (q4_0, sm_80+): r16 / r16w up to 16 rows, r32 / r32w (>= WIDE_MIN_N rows or K >= RD_LONG_K)
    up to 64 rows (two row tiles past 32), at most RD_MAX_SPLITS splits (RD_LONG_K_SPLITS for r32w on long K), each >= 4
    K-steps of 128, no second wave; beyond 64 rows the shared-memory tiles."""
    h200 = {"m32": 4, "m64": 3, "m128": 2, "m32w": 4, "m64w": 2, "r32": 3, "r32w": 2, "r64": 2}
    rd = dict(rd=True)
    assert gemm_ops.gemm_shape(32, 6144, 4096, 132, h200, **rd) == ("r32", 4)  # the H200's best (s11)
    assert gemm_ops.gemm_shape(32, 4096, 4096, 132, h200, **rd) == ("r32", 4)
    assert gemm_ops.gemm_shape(32, 28672, 4096, 132, h200, **rd) == ("r32w", 1)
    assert gemm_ops.gemm_shape(17, 4096, 14336, 132, h200, **rd) == ("r32w", 8)  # the H200's best (s11, s12)
    # the H200's best at M 48 and 64 (s16)
    assert gemm_ops.gemm_shape(64, 6144, 4096, 132, h200, **rd) == ("r32", 2)
    assert gemm_ops.gemm_shape(48, 4096, 4096, 132, h200, **rd) == ("r32", 3)
    assert gemm_ops.gemm_shape(64, 28672, 4096, 132, h200, **rd) == ("r32w", 1)
    assert gemm_ops.gemm_shape(64, 4096, 14336, 132, h200, **rd) == ("r32w", 4)
    assert gemm_ops.gemm_shape(40, 4096, 512, 132, h200, **rd) == ("r32", 1)  # 4 K-steps: no split
    assert gemm_ops.gemm_shape(65, 4096, 4096, 132, h200, **rd)[0] not in gemm_ops.RD_TILES
    # up to 16 rows the one-row-tile twins (s18: batch 3 / 4 / 8 steps 3-8% faster than on r32 / r32w)
    h200 |= {"r16": 4, "r16w": 3}
    assert gemm_ops.gemm_shape(4, 6144, 4096, 132, h200, **rd) == ("r16", 4)
    assert gemm_ops.gemm_shape(16, 28672, 4096, 132, h200, **rd) == ("r16w", 1)
    assert gemm_ops.gemm_shape(8, 4096, 14336, 132, h200, **rd) == ("r16w", 8)
    for m in range(3, 17):
        for n, k in ((4096, 4096), (28672, 4096), (4096, 14336)):
            tile, s = gemm_ops.gemm_shape(m, n, k, 132, h200, **rd)
            assert tile == ("r16w" if n >= 16384 or k >= gemm_ops.RD_LONG_K else "r16"), (m, n, k, tile)
    for m in range(17, 65):
        for n, k in ((80, 128), (4096, 4096), (28672, 4096), (4096, 14336), (128256, 4096)):
            tile, s = gemm_ops.gemm_shape(m, n, k, 132, h200, **rd)
            t = gemm_ops.RD_TILES[tile]
            long_k = k >= gemm_ops.RD_LONG_K
            assert t.bm == 32 and (t.bn == 128) == (n >= 16384 or long_k), (m, n, k, tile)
            cap = gemm_ops.RD_LONG_K_SPLITS if long_k else gemm_ops.RD_MAX_SPLITS
            assert 1 <= s <= cap and (s == 1 or k // t.bk >= 4 * s)
            assert s == 1 or s * -(-n // t.bn) * -(-m // t.bm) <= 132 * h200[tile]


@pytest.fixture
def launches(monkeypatch):
    calls = []

    def fake_launch(kernel, grid, block, *args, device):
        assert isinstance(kernel, Kernel)
        assert 1 <= grid[0] < 2**31 and 1 <= grid[1] <= 65535 and 1 <= grid[2] <= 65535
        assert block == (256 if kernel.name.endswith("_m32t") else 128, 1, 1), kernel.name
        assert len(args) == len(kernel.signature), kernel.name
        struct.pack_into(kernel._fmt, kernel._buf, 0, *args)
        calls.append((kernel.name, grid, args))

    monkeypatch.setattr(cuda_ops, "_launch", fake_launch)
    return calls


@pytest.mark.parametrize("kind,m,n,k,bias", [("q4_0", 20, 72, 96, True), ("q4_k", 300, 4112, 768, False),
                                              ("awq", 40, 80, 4096, False), ("q6_k", 17, 64, 512, True)])
def test_wrapper_launch(launches, small, kind, m, n, k, bias):
    w = random_packed(n, k, kind, torch.Generator().manual_seed(2))
    x = torch.zeros(m, k, dtype=torch.float16)
    b = torch.zeros(n, dtype=torch.float16) if bias else None
    out = gemm_ops.linear_packed_gemm(x, w, b)
    assert out.shape == (m, n) and out.dtype == torch.float16
    (name, grid, args), = launches
    tile, splits = gemm_ops.gemm_shape(m, n, k, 80)  # a CPU tensor stands for a V100
    bm, bn = gemm_ops.GEMM_TILES[tile][:2]
    assert name == f"gemm_p_{kind}_{tile}" and grid[:2] == (-(-n // bn), -(-m // bm))
    steps, per = -(-k // 64), args[-1]
    assert grid[2] == -(-steps // per) and (grid[2] - 1) * per < steps <= grid[2] * per
    assert (args[6] != 0) == (args[7] != 0) == (grid[2] > 1)  # workspace and counters only when split
    assert args[8:12] == (m, n, k, w.group_size // 32) and (args[5] != 0) == bias


@pytest.mark.parametrize("kind,group", [("q4_0", 32), ("q4_k", 32), ("q6_k", 32), ("awq", 128), ("awq", 64)])
def test_register_direct_launch(launches, monkeypatch, kind, group):
    """The register-direct entry of the weight's format, its grid, and the planes it reads: q6_k's high
    bits (qh), AWQ's chunks per group (gchunks); the GLU entry on request. (The CPU stands in for an
    sm_80+ device: rd_fits is forced; the kernels themselves are checked on the GPU.)"""
    monkeypatch.setattr(gemm_ops, "rd_fits", lambda kind, k, device: True)
    gen = torch.Generator().manual_seed(4)
    n, k = 256, 1024
    w = pack_awq(*random_awq(n, k, group, gen), group) if kind == "awq" else random_packed(n, k, kind, gen)
    x = torch.zeros(40, k, dtype=torch.float16)
    gemm_ops.gemm_launch(x, w, None, "r32", 2)
    gemm_ops.gemm_launch(x, w, None, "r16w", 1, glu=True)
    (name, grid, args), (gname, ggrid, gargs) = launches
    assert name == f"gemm_rd_{kind}_r32" and grid == (n // 64, 2, 2)  # 40 rows: two 32-row tiles high
    assert gname == f"gemm_rd_{kind}_r16w_glu" and ggrid == (n // 128, 3, 1)
    for a in (args, gargs):
        assert a[2] == w.q.data_ptr() and a[4] == w.meta.data_ptr() and (a[3] != 0) == (kind == "q6_k")
        assert a[8:12] == (40, n, k, group // 32)
    if kind != "q4_0":  # r64 (an A/B tile) is q4_0's only
        with pytest.raises(ValueError, match="a tile other than r64"):
            gemm_ops.gemm_launch(x, w, None, "r64", 1)
        assert len(launches) == 2


def test_forced_split_is_clamped(launches, small):
    x = torch.zeros(40, 256, dtype=torch.float16)
    gemm_ops.gemm_launch(x, small["q8_0"], None, "m64", 8)  # 4 K-steps: 4 splits of one step
    gemm_ops.gemm_launch(x, small["q8_0"], None, "m32", 3)  # 4 K-steps, 3 asked: 2 of 2 steps
    assert [(c[1][2], c[2][-1]) for c in launches] == [(4, 1), (2, 2)]
    assert launches[1][1][1] == 2  # 40 rows in m32 tiles


def test_trace_only_register_direct(launches, small):
    """A trace buffer with a tile that has no traced entry (the shared-memory tiles, q4_k's register-direct
    ones) is refused before any launch."""
    x = torch.zeros(20, 256, dtype=torch.float16)
    with pytest.raises(ValueError, match="only the register-direct q4_0 tiles"):
        gemm_ops.gemm_launch(x, small["q4_0"], None, "m32", 1, trace=torch.zeros(64, 16, dtype=torch.int64))
    assert launches == []


def test_eight_warp_tile_launch(launches, small):
    """m32t: 256 threads and K-steps of 128 (4 of them at K = 512: 3 splits asked, 2 of 2 steps)."""
    gemm_ops.gemm_launch(torch.zeros(20, 256, dtype=torch.float16), small["q4_0"], None, "m32t", 1)
    gemm_ops.gemm_launch(torch.zeros(20, 512, dtype=torch.float16), random_packed(80, 512, "q4_0",
                         torch.Generator().manual_seed(3)), None, "m32t", 3)
    assert [(c[0], c[1], c[2][-1]) for c in launches] == [("gemm_p_q4_0_m32t", (2, 1, 1), 2),
                                                          ("gemm_p_q4_0_m32t", (2, 1, 2), 2)]


def test_tile_q4_0_layout(small):
    """tile_q4_0: chunk c of row r at byte ((r // 64) * K/64 + c // 2) * 2048 + (r % 64) * 32 + (c % 2) * 16
    of q (the kernel's TL address), its scale at the same offset / 8 of meta; refuses what it cannot tile."""
    w = random_packed(128, 192, "q4_0", torch.Generator().manual_seed(5))
    t = gemm_ops.tile_q4_0(w)
    q, meta, nch = t.q.reshape(-1), t.meta.reshape(-1), 192 // 32
    for r in (0, 1, 63, 64, 127):
        for c in range(nch):
            off = ((r // 64) * (nch // 2) + c // 2) * 2048 + (r % 64) * 32 + (c % 2) * 16
            assert torch.equal(q[off:off + 16], w.q[r, 16 * c:16 * c + 16])
            assert torch.equal(meta[off // 8:off // 8 + 2], w.meta[r, 2 * c:2 * c + 2])
    with pytest.raises(ValueError, match="multiples of 64"):
        gemm_ops.tile_q4_0(random_packed(80, 192, "q4_0", torch.Generator().manual_seed(5)))
    with pytest.raises(ValueError, match="needs q4_0"):
        gemm_ops.tile_q4_0(small["q8_0"])


# -- GPU ---------------------------------------------------------------------------------------------
def _ref(x, w, bias):
    y = x.float().reshape(-1, x.shape[-1]) @ w.dequantize(torch.float32).t()
    if bias is not None:
        y = y + bias.float()
    return y.reshape(*x.shape[:-1], w.shape[0])


def _err(out, ref) -> float:
    return float((out.double() - ref.double()).norm() / ref.double().norm().clamp_min(1e-30))


def _inputs(kind, m, n, k, bias, seed):
    gen = torch.Generator().manual_seed(seed)
    w = random_packed(n, k, kind, gen, "cuda")
    x = torch.randn(m, k, generator=gen).half().cuda()
    b = torch.randn(n, generator=gen).half().cuda() if bias else None
    return x, w, b


# (kind, M, N, K, bias): K tails (K / 32 odd), N not a multiple of 64 / 16 / 8, 4096 + 16 rows
CASES = [("q4_0", 17, 80, 96, True), ("q4_0", 33, 4112, 512, False), ("q4_0", 300, 208, 1024, True),
         ("q4_0", 64, 83, 1056, False), ("q4_1", 64, 144, 320, True), ("q4_1", 100, 80, 96, False),
         ("q8_0", 17, 4112, 1056, True), ("q8_0", 100, 84, 96, False), ("q8_0", 300, 200, 2080, True),
         ("q4_k", 17, 4112, 768, False), ("q4_k", 300, 96, 768, True), ("q4_k", 64, 272, 2304, False),
         ("q6_k", 33, 80, 768, True), ("q6_k", 100, 4112, 512, False), ("q6_k", 20, 120, 1280, False),
         ("awq", 64, 208, 384, True), ("awq", 17, 4096, 4096, False), ("awq", 300, 136, 640, False)]
SWEEP = [(kind, m, 80 + 48 * i, {"q4_k": 512, "q6_k": 256, "awq": 256}.get(kind, 160 + 32 * i), i % 2 == 0)
         for kind in PACKED_FORMATS for i, m in enumerate((17, 33, 64, 100, 300))]


@gpu
@pytest.mark.parametrize("kind", PACKED_FORMATS)
def test_gemm_small_batches(kind):
    """5..16 rows (decode batches the GEMV's MT-16 kernel ran before): the shared-memory tiles with ragged
    rows against the float reference, and ops.linear's route there (cuda_pack_gemm, or the register-direct
    tiles for q4_0 on sm_80+)."""
    k = 512 if kind in ("q4_k", "q6_k") else 4096
    for m in (5, 9, 16):
        x, w, b = _inputs(kind, m, 4112, k, m == 9, SEED + m)
        ref = _ref(x, w, b)
        tile, splits = gemm_ops.gemm_shape(m, 4112, k, *gemm_ops.gemm_slots(kind, x.device))
        with cuda_ops.poison_outputs():
            got = gemm_ops.gemm_launch(x, w, b, tile, splits)
        assert _err(got, ref) <= TOL, f"{kind} M={m} {tile} x{splits} seed={SEED}"
        p = ops.problem("linear", x, w, b)
        sel = ops.registry.select(p).provider.name
        rd = gemm_ops.supports_linear_packed_gemm_rd(p) == []
        assert sel == ("cuda_pack_gemm_rd" if rd else "cuda_pack_gemm"), (kind, m, sel)
        with cuda_ops.poison_outputs():
            assert _err(ops.linear(x, w, b), ref) <= TOL, (kind, m)


@gpu
@pytest.mark.parametrize("kind,m,n,k,bias", CASES + SWEEP)
def test_gemm_vs_reference(kind, m, n, k, bias):
    seed = SEED + zlib.crc32(f"{kind} {m} {n} {k}".encode()) % 1000
    x, w, b = _inputs(kind, m, n, k, bias, seed)
    problem = ops.problem("linear", x, w, b)
    want = "cuda_pack_gemm" if gemm_ops.supports_linear_packed_gemm_rd(problem) else "cuda_pack_gemm_rd"
    assert ops.registry.select(problem).provider.name == want
    with cuda_ops.poison_outputs():
        got = ops.linear(x, w, b)
    err = _err(got, _ref(x, w, b))
    route = gemm_ops.gemm_shape(m, n, k, *gemm_ops.gemm_slots(kind, x.device), rd=want.endswith("_rd"))
    assert err <= TOL, f"{kind} M={m} N={n} K={k} bias={bias} {route}: rel err {err:.3g} > {TOL} " \
                       f"(NaN: unwritten output) seed={seed}"


@gpu
@pytest.mark.parametrize("kind", PACKED_FORMATS)
def test_every_tile_and_split(kind):
    k = 1280 if kind not in ("q4_k", "q6_k") else 1536  # 20 / 24 K-steps
    for m, n in ((17, 72), (70, 200)):
        x, w, b = _inputs(kind, m, n, k, True, SEED + m)
        ref = _ref(x, w, b)
        for tile in gemm_ops.GEMM_TILES:
            for splits in (1, 2, 3, 8, 12):  # 12: 10 / 12 splits of 2 steps, the merge's second batch of 8
                with cuda_ops.poison_outputs():
                    got = gemm_ops.gemm_launch(x, w, b, tile, splits)
                err = _err(got, ref)
                assert err <= TOL, f"{kind} M={m} N={n} K={k} {tile} x{splits}: rel err {err:.3g} seed={SEED}"


@gpu
@needs_rd
@pytest.mark.parametrize("kind", ["q4_0", "q4_k", "q6_k", "awq", "awq_g32", "awq_g64"])
def test_register_direct_tiles(kind):
    """gemm_rd_<kind>_<tile> against the float reference: M up to 64 (ragged; 32-row tiles two high), N
    not a multiple of the tile (128 / 64) nor of 8, K from one step (q4_k: one super-block, two steps) to
    4096, bias, splits incl. uneven (q4_k: splits starting on odd steps, the second half of a super-block);
    AWQ with groups of 128 (one K-step of a row), 32 and 64 weights."""
    group = {"awq_g32": 32, "awq_g64": 64}.get(kind)
    for m, n, k, bias in ((17, 72, 256, True), (32, 4096, 4096, False), (25, 200, 1280, True), (64, 83, 768, False),
                          (40, 6144, 4096, True), (33, 136, 256, False), (2, 4096, 4096, True), (5, 88, 512, False),
                          (16, 6144, 4096, False), (3, 96, 2816, True)):
        if kind in ("q4_k", "q6_k") and k % 256:
            k += 128
        if kind.startswith("awq"):  # AutoAWQ packs 8 output features per int32
            n = -(-n // 8) * 8
        x, w, b = _inputs(kind[:3] if group else kind, m, n, k, bias, SEED + m + n)
        if group:
            w = pack_awq(*random_awq(n, k, group, torch.Generator().manual_seed(SEED + m)), group).to("cuda")
        ref = _ref(x, w, b)
        for tile in gemm_ops.rd_tiles(w.kind):  # 32-row tiles two high past 32 rows
            for splits in (1, 3, 8):
                with cuda_ops.poison_outputs():
                    got = gemm_ops.gemm_launch(x, w, b, tile, splits)
                err = _err(got, ref)
                assert err <= TOL, f"{kind} M={m} N={n} K={k} {tile} x{splits}: rel err {err:.3g} seed={SEED}"
    if kind == "q4_0":
        x, w, _ = _inputs("q4_0", 20, 64, 96, False, SEED)
        with pytest.raises(ValueError, match="K % 128"):
            gemm_ops.gemm_launch(x, w, None, "r32", 1)
    elif kind == "awq":
        x = torch.randn(20, 384, generator=torch.Generator().manual_seed(SEED)).half().cuda()
        w = pack_awq(*random_awq(64, 384, 96, torch.Generator().manual_seed(SEED)), 96).to("cuda")
        with pytest.raises(ValueError, match="power of two"):
            gemm_ops.gemm_launch(x, w, None, "r32", 1)
    elif kind == "q4_k":
        x, w, _ = _inputs("q4_k", 20, 64, 256, False, SEED)
        with pytest.raises(ValueError, match="a tile other than r64"):
            gemm_ops.gemm_launch(x, w, None, "r64", 1)


@gpu
@needs_rd
@pytest.mark.parametrize("kind", ["q4_0", "q4_k", "q6_k", "awq"])
def test_register_direct_glu(kind):
    """The _glu entries give linear then silu_and_mul bit for bit (ragged rows, both halves' tiles at the
    matrix's end, splits incl. uneven), within the float reference's tolerance; the GLU route of
    rms_norm_linear equals the unfused one, eager and under CUDA-graph replay; a matrix whose halves
    are not whole tiles is refused before any launch."""
    for m, n, k in ((17, 256, 256), (32, 28672, 4096), (40, 384, 1280), (64, 512, 768), (3, 256, 512), (16, 28672, 4096)):
        k += 256 if kind in ("q4_k", "q6_k") and k % 256 else 0
        x, w, _ = _inputs(kind, m, n, k, False, SEED + m + n)
        d = n // 2
        y = _ref(x, w, None).half().float()
        ref = torch.nn.functional.silu(y[:, :d]) * y[:, d:]
        for tile in gemm_ops.rd_tiles(kind):
            if not gemm_ops.glu_fits(tile, n):
                continue
            for splits in (1, 3):
                want = ops.silu_and_mul(gemm_ops.gemm_launch(x, w, None, tile, splits))
                with cuda_ops.poison_outputs():
                    got = gemm_ops.gemm_launch(x, w, None, tile, splits, glu=True)
                assert got.shape == (m, d) and torch.equal(got, want), (m, n, k, tile, splits)
                assert _err(got, ref) <= TOL, (m, n, k, tile, splits)
    x, w, _ = _inputs(kind, 20, 200, 256, False, SEED)  # halves of 100 rows: no tile's half divides them
    with pytest.raises(ValueError, match="packed GEMM GLU"):
        gemm_ops.gemm_launch(x, w, None, "r32", 1, glu=True)
    gen = torch.Generator().manual_seed(SEED)
    x, w, _ = _inputs(kind, 32, 28672, 4096, False, SEED)
    res = torch.randn(32, 4096, generator=gen).half().cuda()
    norm = (torch.rand(4096, generator=gen) + 0.5).half().cuda()
    p = ops.problem("rms_norm_linear", x, norm, 1e-5, w, res, None, "silu_and_mul")
    assert ops.registry.select(p).provider.name == "cuda_pack_gemm_rd"
    h, want_res = ops.rms_norm(x, norm, 1e-5, res)
    want = ops.silu_and_mul(ops.linear(h, w))
    got, got_res = ops.rms_norm_linear(x, norm, 1e-5, w, res, None, "silu_and_mul")
    assert torch.equal(got, want) and torch.equal(got_res, want_res)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        out, _ = ops.rms_norm_linear(x, norm, 1e-5, w, res, None, "silu_and_mul")
    for i in range(2):
        x.copy_(torch.randn(32, 4096, generator=torch.Generator().manual_seed(SEED + i)).half())
        g.replay()
        torch.cuda.synchronize()
        h, _ = ops.rms_norm(x, norm, 1e-5, res)
        assert torch.equal(out, ops.silu_and_mul(ops.linear(h, w))), i


@needs_rd
def test_register_direct_traced():
    """The _trace entries (tools/gpu/gemm_trace.py) give the route entries' output bit for bit, unsplit
    and split-K; every block records entry <= each point <= end (the count only when split); a buffer
    too small is refused before any launch."""
    x, w, b = _inputs("q4_0", 29, 6144, 4096, True, SEED)  # ragged rows: every tile takes them
    for tile, t in gemm_ops.RD_TILES.items():
        for splits in (1, 4):
            tr = torch.zeros(4096, 16, dtype=torch.int64, device="cuda")
            want = gemm_ops.gemm_launch(x, w, b, tile, splits)
            got = gemm_ops.gemm_launch(x, w, b, tile, splits, trace=tr)
            assert torch.equal(got, want), (tile, splits)
            blocks = -(-6144 // t.bn) * -(-29 // t.bm) * splits
            rows = tr[:blocks].cpu()
            assert bool((rows[:, 0] > 0).all()) and not bool(tr[blocks:].any()), (tile, splits)
            for i in (1, 2, 3, 4, 6):
                assert bool((rows[:, i] >= rows[:, 0]).all()) and bool((rows[:, 6] >= rows[:, i]).all()), (tile, i)
            assert bool((rows[:, 5] > 0).all()) == (splits > 1), (tile, splits)
    with pytest.raises(ValueError, match="packed GEMM trace: need a contiguous int64 tensor"):
        gemm_ops.gemm_launch(x, w, b, "r32", 4, trace=torch.zeros(16, 16, dtype=torch.int64, device="cuda"))


@gpu
@needs_rd
def test_register_direct_route():
    """ops.linear on q4_0 / awq with 3..64 rows and K % 128 == 0 (q4_k: any K, a multiple of 256) takes the
    register-direct tiles (split-K and CUDA-graph replay included); q4_0 with K % 128 != 0 keeps the
    shared-memory tiles."""
    for kind, m, n, k in (("q4_0", 17, 200, 128), ("q4_0", 32, 4096, 4096), ("q4_0", 48, 16448, 1024),
                          ("q4_0", 64, 4096, 14336), ("q4_0", 20, 96, 1056), ("q4_0", 3, 4096, 4096),
                          ("q4_0", 8, 6144, 4096), ("q4_k", 3, 4096, 4096), ("q4_k", 12, 28672, 4096),
                          ("q4_k", 32, 4096, 14336), ("q4_k", 64, 6144, 4096), ("awq", 4, 4096, 4096),
                          ("awq", 16, 28672, 4096), ("awq", 40, 4096, 14336), ("q6_k", 5, 4096, 14336),
                          ("q6_k", 32, 16448, 4096)):
        x, w, b = _inputs(kind, m, n, k, m == 48, SEED + m)
        rd = k % 128 == 0
        tile, splits = gemm_ops.gemm_shape(m, n, k, *gemm_ops.gemm_slots(kind, x.device), rd=rd)
        sel = ops.registry.select(ops.problem("linear", x, w, b)).provider.name
        assert sel == ("cuda_pack_gemm_rd" if rd else "cuda_pack_gemm"), (kind, m, n, k, sel)
        with cuda_ops.poison_outputs():
            got = ops.linear(x, w, b)
        err = _err(got, _ref(x, w, b))
        assert err <= TOL, f"{kind} M={m} N={n} K={k} {tile} x{splits}: rel err {err:.3g} seed={SEED}"
    x, w, b = _inputs("q4_0", 32, 4096, 4096, True, SEED)
    g = torch.cuda.CUDAGraph()
    ops.linear(x, w, b)
    with torch.cuda.graph(g):
        out = ops.linear(x, w, b)
    for i in range(2):  # the split-K counters re-arm under replay
        x.copy_(torch.randn(32, 4096, generator=torch.Generator().manual_seed(SEED + i)).half())
        g.replay()
        torch.cuda.synchronize()
        assert _err(out, _ref(x, w, b)) <= TOL


@gpu
def test_tiled_layout_matches_row_major():
    """gemm_p_q4_0_<tile>_tl on tile_q4_0's planes: the same products in the same order, so the same
    bits as the row-major kernel, for every decode tile and split."""
    for m, n, k in ((17, 128, 1280), (32, 6144, 4096), (64, 192, 640)):
        x, w, b = _inputs("q4_0", m, n, k, m == 17, SEED + m)
        t = gemm_ops.tile_q4_0(w)
        for tile in gemm_ops.GEMM_TL_TILES:
            for splits in (1, 3, 8):
                with cuda_ops.poison_outputs():
                    want = gemm_ops.gemm_launch(x, w, b, tile, splits)
                    got = gemm_ops.gemm_launch(x, t, b, tile, splits, tiled=True)
                assert torch.equal(got, want), f"M={m} N={n} K={k} {tile} x{splits}"


@gpu
def test_split_k_deterministic_3d_and_graph():
    x, w, b = _inputs("q4_k", 48, 272, 4096, True, SEED)
    x3 = x.reshape(2, 24, 4096)
    assert gemm_ops.gemm_shape(48, 272, 4096, *gemm_ops.gemm_slots("q4_k", x.device))[1] > 1  # split-K route
    y1, y2 = ops.linear(x3, w, b), ops.linear(x3, w, b)
    assert y1.shape == (2, 24, 272) and torch.equal(y1, y2)
    assert _err(y1, _ref(x3, w, b)) <= TOL
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        ops.linear(x3, w, b)
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        out = ops.linear(x3, w, b)
    for i in range(2):  # new x in the captured buffer, replay (the counters must be zero again)
        x3.copy_(torch.randn(2, 24, 4096, generator=torch.Generator().manual_seed(SEED + i)).half())
        g.replay()
        torch.cuda.synchronize()
        assert torch.equal(out, ops.linear(x3, w, b)), f"replay {i} seed={SEED}"
    # the split-K launches share the merge counters (no memset per launch): all re-armed to zero
    assert not cuda_ops.split_counters(x.device, 1).any(), f"counters left non-zero seed={SEED}"
