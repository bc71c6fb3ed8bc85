"""The packed GEMM (csrc/gemm_packed.cu, provider `cuda_pack_gemm`: linear with M > 16 rows on a
PackedWeight; the register-direct tiles: test_gemm_rd.py). CPU: admission on fake sm_70 / sm_90 devices
and refusal reasons, the priority list, the tile / split-K choice and the host wrapper's launch
(intercepted). GPU (marked `gpu`): every
packed kind, M = 17..300, odd N, K tails, bias, every tile x split; outputs poisoned with NaN, error
||out - ref|| / ||ref|| <= 2e-3 against x (fp32) @ W.dequantize(fp32)^T; split-K determinism, a 3-D
x and a CUDA-graph capture. Seed: $ONECAT_TEST_SEED, else random (printed on failure)."""

from __future__ import annotations

import zlib

import pytest
import torch

from onecat.kernels import cuda_ops, gemm_ops, ops
from onecat.kernels.registry import REFERENCE
from onecat.kernels.weights import PACKED_FORMATS, GGUFWeight, random_packed

from .packed_gemm_cases import (SEED, TOL, explain, gpu, gpu_inputs, launches, linear_problem,  # noqa: F401
                                ref_linear, rel_err, small)


def test_priority_list():
    order = ops.registry.order("linear")
    # the register-direct tiles first (from RD_MIN_ROWS rows, sm_80+ q4_0 / q4_k / q6_k / awq), the
    # shared-memory ones (from GEMM_MIN_ROWS), then the GEMV
    assert order.index("cuda_pack_gemm_rd") + 1 == order.index("cuda_pack_gemm") == order.index("cuda_pack") - 1
    assert order.index("cuda_pack_gemm") < order.index("cuda") and order[-1] == REFERENCE


@pytest.mark.parametrize("cap", [(7, 0), (9, 0)])
@pytest.mark.parametrize("kind", PACKED_FORMATS)
def test_admitted_by_rows(small, kind, cap, any_nvrtc):
    w = small[kind]
    rd = kind in gemm_ops.RD_FORMATS and cap >= (8, 0)  # the register-direct tiles: q4_0 / q4_k, 3..64 rows, sm_80+
    for m in (17, 64, 300):
        sel = explain(linear_problem(torch.zeros(m, 256, dtype=torch.float16), w, cap=cap))
        assert sel.provider.name == ("cuda_pack_gemm_rd" if rd and m <= 64 else "cuda_pack_gemm"), (m, sel.refused)
        assert any("the packed GEMV covers M <= 16" in r for r in sel.refused["cuda_pack"]) or sel.refused[
            "cuda_pack"] == [f"lower priority than {sel.provider.name}"]
    x3, bias = torch.zeros(2, 10, 256, dtype=torch.float16), torch.zeros(80, dtype=torch.float16)
    sel = explain(linear_problem(x3, w, bias, cap=cap))
    assert sel.provider.name == ("cuda_pack_gemm_rd" if rd else "cuda_pack_gemm")  # 20 rows of a 3-D x, fp16 bias
    for m in (2, 3, 4, 5, 16):  # rows the GEMV's M = 2..4 kernels or the GEMMs take
        sel = explain(linear_problem(torch.zeros(m, 256, dtype=torch.float16), w, cap=cap))
        want = ("cuda_pack_gemm_rd" if rd and m >= gemm_ops.RD_MIN_ROWS else
                "cuda_pack_gemm" if m >= gemm_ops.GEMM_MIN_ROWS else "cuda_pack")
        assert sel.provider.name == want, (m, sel.refused)
    sel = explain(linear_problem(torch.zeros(1, 256, dtype=torch.float16), w, cap=cap))
    assert sel.provider.name == "cuda_pack"  # one row: the GEMV


def test_refusal_reasons(small, any_nvrtc):
    x = torch.zeros(32, 256, dtype=torch.float16)
    w = small["q4_0"]

    def reasons(p):
        return gemm_ops.supports_linear_packed_gemm(p)

    assert reasons(linear_problem(x, w)) == []
    assert "device is cpu, not a CUDA GPU" in reasons(linear_problem(x, w, cap=None))
    assert "capability 6.1 < 7.0" in reasons(linear_problem(x, w, cap=(6, 1)))
    assert any("dtype bfloat16 not float16" in r for r in reasons(linear_problem(x, w, dtype="bfloat16")))
    assert "M=4 < 5: the packed GEMV (cuda_pack) covers it" in reasons(linear_problem(x[:4], w))
    dense = torch.zeros(80, 256, dtype=torch.float16)
    assert any("weight format dense not a PackedWeight" in r for r in reasons(linear_problem(x, dense)))
    gguf = GGUFWeight.random(80, 256, "q4_0", torch.Generator().manual_seed(1))
    assert any("weight format gguf_q4_0 not a PackedWeight" in r for r in reasons(linear_problem(x, gguf)))
    assert "K=100 not a multiple of 32" in reasons(linear_problem(x, w, k=100))
    assert "K=288 not a multiple of the 256-weight q4_k block" in reasons(linear_problem(x, small["q4_k"], k=288))
    assert "K=288 not a multiple of the 256-weight q6_k block" in reasons(linear_problem(x, small["q6_k"], k=288))
    assert reasons(linear_problem(x, w, k=288)) == []  # q4_0: any multiple of 32
    assert "bias dtype float32 not float16" in reasons(linear_problem(x, w, torch.zeros(80)))
    assert "x not contiguous and 16-byte aligned" in reasons(linear_problem(torch.zeros(256, 32, dtype=torch.float16).t(), w))
    # refused shapes fall back to the reference, with the reasons listed
    sel = explain(linear_problem(x, w, cap=(6, 1)))
    assert sel.provider.name == REFERENCE and "capability 6.1 < 7.0" in sel.refused["cuda_pack_gemm"]
    sel = explain(linear_problem(x, dense))
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


def test_forced_split_is_clamped(launches, small):
    x = torch.zeros(40, 256, dtype=torch.float16)
    gemm_ops.gemm_launch(x, small["q8_0"], None, "m64", 8)  # 4 K-steps: 4 splits of one step
    gemm_ops.gemm_launch(x, small["q8_0"], None, "m32", 3)  # 4 K-steps, 3 asked: 2 of 2 steps
    assert [(c[1][2], c[2][-1]) for c in launches] == [(4, 1), (2, 2)]
    assert launches[1][1][1] == 2  # 40 rows in m32 tiles


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
        x, w, b = gpu_inputs(kind, m, 4112, k, m == 9, SEED + m)
        ref = ref_linear(x, w, b)
        tile, splits = gemm_ops.gemm_shape(m, 4112, k, *gemm_ops.gemm_slots(kind, x.device))
        with cuda_ops.poison_outputs():
            got = gemm_ops.gemm_launch(x, w, b, tile, splits)
        assert rel_err(got, ref) <= TOL, f"{kind} M={m} {tile} x{splits} seed={SEED}"
        p = ops.problem("linear", x, w, b)
        sel = ops.registry.select(p).provider.name
        rd = gemm_ops.supports_linear_packed_gemm_rd(p) == []
        assert sel == ("cuda_pack_gemm_rd" if rd else "cuda_pack_gemm"), (kind, m, sel)
        with cuda_ops.poison_outputs():
            assert rel_err(ops.linear(x, w, b), ref) <= TOL, (kind, m)


@gpu
@pytest.mark.parametrize("kind,m,n,k,bias", CASES + SWEEP)
def test_gemm_vs_reference(kind, m, n, k, bias):
    seed = SEED + zlib.crc32(f"{kind} {m} {n} {k}".encode()) % 1000
    x, w, b = gpu_inputs(kind, m, n, k, bias, seed)
    problem = ops.problem("linear", x, w, b)
    want = "cuda_pack_gemm" if gemm_ops.supports_linear_packed_gemm_rd(problem) else "cuda_pack_gemm_rd"
    assert ops.registry.select(problem).provider.name == want
    with cuda_ops.poison_outputs():
        got = ops.linear(x, w, b)
    err = rel_err(got, ref_linear(x, w, b))
    route = gemm_ops.gemm_shape(m, n, k, *gemm_ops.gemm_slots(kind, x.device), rd=want.endswith("_rd"))
    assert err <= TOL, f"{kind} M={m} N={n} K={k} bias={bias} {route}: rel err {err:.3g} > {TOL} " \
                       f"(NaN: unwritten output) seed={seed}"


@gpu
@pytest.mark.parametrize("kind", PACKED_FORMATS)
def test_every_tile_and_split(kind):
    k = 1280 if kind not in ("q4_k", "q6_k") else 1536  # 20 / 24 K-steps
    for m, n in ((17, 72), (70, 200)):
        x, w, b = gpu_inputs(kind, m, n, k, True, SEED + m)
        ref = ref_linear(x, w, b)
        for tile in gemm_ops.GEMM_TILES:
            for splits in (1, 2, 3, 8, 12):  # 12: 10 / 12 splits of 2 steps, the merge's second batch of 8
                with cuda_ops.poison_outputs():
                    got = gemm_ops.gemm_launch(x, w, b, tile, splits)
                err = rel_err(got, ref)
                assert err <= TOL, f"{kind} M={m} N={n} K={k} {tile} x{splits}: rel err {err:.3g} seed={SEED}"


@gpu
def test_tiled_layout_matches_row_major():
    """gemm_p_q4_0_<tile>_tl on tile_q4_0's planes: the same products in the same order, so the same
    bits as the row-major kernel, for every decode tile and split."""
    for m, n, k in ((17, 128, 1280), (32, 6144, 4096), (64, 192, 640)):
        x, w, b = gpu_inputs("q4_0", m, n, k, m == 17, SEED + m)
        t = gemm_ops.tile_q4_0(w)
        for tile in gemm_ops.GEMM_TL_TILES:
            for splits in (1, 3, 8):
                with cuda_ops.poison_outputs():
                    want = gemm_ops.gemm_launch(x, w, b, tile, splits)
                    got = gemm_ops.gemm_launch(x, t, b, tile, splits, tiled=True)
                assert torch.equal(got, want), f"M={m} N={n} K={k} {tile} x{splits}"


@gpu
def test_split_k_deterministic_3d_and_graph():
    x, w, b = gpu_inputs("q4_k", 48, 272, 4096, True, SEED)
    x3 = x.reshape(2, 24, 4096)
    assert gemm_ops.gemm_shape(48, 272, 4096, *gemm_ops.gemm_slots("q4_k", x.device))[1] > 1  # split-K route
    y1, y2 = ops.linear(x3, w, b), ops.linear(x3, w, b)
    assert y1.shape == (2, 24, 272) and torch.equal(y1, y2)
    assert rel_err(y1, ref_linear(x3, w, b)) <= TOL
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
