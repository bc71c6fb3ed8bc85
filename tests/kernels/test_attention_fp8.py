"""CPU: FP8 KV-cache bit rules. The reference (torch FP8 casts) round-trips; the integer algorithms
the kernels use (attention_fp8.cuh, ported line for line to numpy here) agree with it bit for bit;
the reference attention over an FP8 cache equals attention over its dequantized copy."""

from __future__ import annotations

import math

import numpy as np
import pytest
import torch

from onecat.kernels import attention_ops, ops
from onecat.kernels import reference as ref
from onecat.kernels.inputs import paged_metadata

E4M3, E5M2 = torch.float8_e4m3fn, torch.float8_e5m2


def np_float_to_fp8(x: np.ndarray, e4m3: bool) -> np.ndarray:
    """attention_fp8.cuh float_to_fp8, on float32 arrays (same integer steps)."""
    u = x.astype(np.float32).view(np.uint32)
    sign = (u >> 24) & 0x80
    a = u & 0x7FFFFFFF
    af = a.view(np.float32)
    if e4m3:
        sub = np.rint(np.minimum(af, 1.0) * np.float32(512.0)).astype(np.uint32)
        r = ((a + 0x7FFFF + ((a >> 20) & 1)) >> 20) - ((127 - 7) << 3)
        out = np.where(af >= 448.0, 0x7E, np.where(af < 0.015625, sub, r))
    else:
        sub = np.rint(np.minimum(af, 1.0) * np.float32(65536.0)).astype(np.uint32)
        r = ((a + 0xFFFFF + ((a >> 21) & 1)) >> 21) - ((127 - 15) << 2)
        out = np.where(af >= 57344.0, 0x7B, np.where(af < 6.103515625e-05, sub, r))
    return (sign | out).astype(np.uint8)


def np_fp8_to_half_bits(b: np.ndarray, e4m3: bool) -> np.ndarray:
    """fp8x4_to_half2x2 for one byte: FP16 bits (E4M3: of value * 2^-8)."""
    t = b.astype(np.uint32) << 8
    if e4m3:
        t = ((t >> 1) & 0x3F80) | (t & 0x8000)
    return t.astype(np.uint16)


def _samples(gen: torch.Generator) -> torch.Tensor:
    """float32 values over the whole FP8 range: all FP16 bit patterns (finite), random scales,
    rounding ties, boundaries."""
    h = torch.arange(0, 1 << 16, dtype=torch.int32).to(torch.int16).view(torch.float16).float()
    h = h[torch.isfinite(h)]
    r = torch.randn(100000, generator=gen) * torch.exp2(torch.randint(-20, 18, (100000,), generator=gen).float())
    edges = torch.tensor([448.0, 464.0, 465.0, 1e9, 57344.0, 61440.0, 2.0 ** -6, 2.0 ** -9 * 1.5,
                          2.0 ** -10, 2.0 ** -14, 2.0 ** -16 * 2.5, 0.0, -0.0])
    return torch.cat([h, r, edges, -edges])


@pytest.mark.parametrize("dtype", [E4M3, E5M2])
def test_kernel_quantizer_matches_reference(dtype, gen):
    x = _samples(gen)
    want = ref.fp8_quantize(x, 1.0, dtype).view(torch.uint8).numpy()
    got = np_float_to_fp8(x.numpy(), dtype == E4M3)
    bad = np.nonzero(want != got)[0]
    assert bad.size == 0, f"{bad.size} mismatches, e.g. x={x[bad[:5]].tolist()} want={want[bad[:5]]} got={got[bad[:5]]}"


@pytest.mark.parametrize("dtype", [E4M3, E5M2])
def test_kernel_decoder_matches_reference(dtype):
    b = np.arange(256, dtype=np.uint8)
    if dtype == E4M3:
        b = b[(b & 0x7F) != 0x7F]  # NaN encodings: never written
    else:
        b = b[(b & 0x7C) != 0x7C]  # inf/NaN: never written
    want = torch.from_numpy(b.copy()).view(dtype).float().numpy()
    half = np_fp8_to_half_bits(b, dtype == E4M3).view(np.float16).astype(np.float32)
    got = half * (attention_ops._FP8_UNIT["e4m3" if dtype == E4M3 else "e5m2"])
    np.testing.assert_array_equal(got, want)


@pytest.mark.parametrize("dtype", [E4M3, E5M2])
def test_reference_round_trip(dtype, gen):
    x = torch.randn(4, 2, 64, generator=gen).half() * 3
    scale = 0.05
    q = ref.fp8_quantize(x, scale, dtype)
    back = ref.kv_dequantize(q, scale)
    rel = 2.0 ** -4 if dtype == E4M3 else 2.0 ** -3  # half an ulp of 3 / 2 mantissa bits
    assert torch.all((back - x.float()).abs() <= rel * x.float().abs() + scale * 2.0 ** -9)
    big = torch.tensor([1e4, -1e4, 448.0 * scale]).half()
    assert ref.kv_dequantize(ref.fp8_quantize(big, scale, dtype), scale).abs().max() <= ref.FP8_DTYPES[dtype] * scale
    assert torch.isfinite(ref.kv_dequantize(ref.fp8_quantize(big * 100, 1e-3, dtype), 1e-3)).all()


@pytest.mark.parametrize("dtype", [E4M3, E5M2])
def test_reshape_and_cache_fp8_reference(dtype, gen):
    nb, bs, hk, d, t = 6, 16, 2, 64, 9
    kc = torch.zeros(nb, bs, hk, d, dtype=dtype)
    vc = torch.zeros(nb, bs, hk, d, dtype=dtype)
    key, value = torch.randn(t, hk, d, generator=gen).half(), torch.randn(t, hk, d, generator=gen).half()
    slots = torch.randperm(nb * bs, generator=gen)[:t]
    slots[2] = -1
    ops.reshape_and_cache(key, value, kc, vc, slots, 0.02, 0.03)  # CPU: dispatches to the reference
    flat_k = kc.view(torch.uint8).view(nb * bs, hk, d)
    flat_v = vc.view(torch.uint8).view(nb * bs, hk, d)
    ok = slots >= 0
    assert torch.equal(flat_k[slots[ok]], ref.fp8_quantize(key[ok], 0.02, dtype).view(torch.uint8))
    assert torch.equal(flat_v[slots[ok]], ref.fp8_quantize(value[ok], 0.03, dtype).view(torch.uint8))
    assert int((flat_k != 0).any(-1).any(-1).sum()) == int(ok.sum())  # nothing else written


@pytest.mark.parametrize("dtype", [E4M3, E5M2])
def test_paged_attention_fp8_reference_is_dequantized(dtype, gen):
    q_lens, seq_lens, hq, hk, d, bs, nb = [1, 4, 2], [40, 17, 33], 8, 2, 64, 16, 16
    md = paged_metadata(q_lens, seq_lens, bs, nb, gen)
    q = torch.randn(sum(q_lens), hq, d, generator=gen).half()
    kc = ref.fp8_quantize(torch.randn(nb, bs, hk, d, generator=gen), 0.01, dtype)
    vc = ref.fp8_quantize(torch.randn(nb, bs, hk, d, generator=gen), 0.02, dtype)
    got = ops.paged_attention(q, kc, vc, md, 1 / math.sqrt(d), None, None, 0.01, 0.02)
    want = ref.paged_attention(q.float(), ref.kv_dequantize(kc, 0.01), ref.kv_dequantize(vc, 0.02), md, 1 / math.sqrt(d))
    torch.testing.assert_close(got.float(), want, rtol=2e-3, atol=2e-3)


def test_split_kv_plan():
    # decode, llama3-8b heads, 8K context, batch 4 on an H200 (132 SMs): several partitions
    nparts, part = attention_ops.split_kv_plan(4, 8, 1, 8192, 64, 132, 4, 32, 128)
    blocks = nparts * 4 * 8
    assert 132 < blocks <= attention_ops.BLOCKS_PER_SM * 132 and part % 64 == 0 and part >= attention_ops.MIN_PART
    assert (nparts - 1) * part < 8192 <= nparts * part
    # three resident blocks per SM with 32-key tiles: more, shorter partitions
    n3, p3 = attention_ops.split_kv_plan(4, 8, 1, 8192, 32, 132, 4, 32, 128, blocks_per_sm=3)
    assert nparts < n3 and 2 * 132 < n3 * 4 * 8 <= 3 * 132 and p3 % 32 == 0 and (n3 - 1) * p3 < 8192 <= n3 * p3
    # a long prefill fills the GPU with row chunks: one partition, any length
    assert attention_ops.split_kv_plan(1, 8, 512, 32768, 32, 132, 8192, 32, 128)[0] == 1
    # partials stay within the workspace limit
    n, p = attention_ops.split_kv_plan(1, 1, 64, 1 << 20, 32, 80, 1024, 8, 256)
    assert n == 1 or n * 1024 * 8 * 256 * 4 <= attention_ops.WORKSPACE_LIMIT


def test_attention_routes():
    from onecat.kernels import build
    from onecat.kernels.registry import Problem

    try:  # the GPU machine may carry only NVRTC 13, which cannot target sm_70 (CI has 12.9)
        build.toolchain(70)
    except Exception as e:
        pytest.skip(f"no NVRTC here that targets sm_70: {e}")

    def route(cap, **kw):
        facts = dict(head_dim=128, kv_dtype="float16", gqa=4, sliding_window=False, soft_cap=False, block_size=16,
                     phase="decode", layout_ok=True) | kw
        p = Problem("paged_attention", "cuda", cap, "float16", tuple(sorted(facts.items())))
        return ops.registry.explain(p, check_available=False)

    assert route((7, 0)).provider.name == "cuda_split_kv"
    assert "needs sm_80+" in route((7, 0)).refused["cuda_decode_rd"][0]
    for cap, kv in (((8, 0), "float16"), ((9, 0), "float8_e4m3fn"), ((9, 0), "float8_e5m2")):
        assert route(cap, kv_dtype=kv).provider.name == "cuda_decode_rd", (cap, kv)  # sm_80+ decode
    assert route((9, 0), head_dim=64, gqa=8).provider.name == "cuda_decode_rd"
    assert route((9, 0), head_dim=256, gqa=2, kv_dtype="float8_e4m3fn").provider.name == "cuda_decode_rd"  # Gemma 3
    assert route((9, 0), head_dim=256, gqa=2).provider.name == "cuda_decode_rd"  # FP16 too (Q in shared memory)
    for kw, why in ((dict(gqa=16), "GQA group 16 > 8"), (dict(phase="verify"), "phase verify")):
        sel = route((9, 0), **kw)
        assert sel.provider.name == "cuda_split_kv" and any(why in r for r in sel.refused["cuda_decode_rd"]), kw
    assert route((7, 0), phase="prefill").provider.name == "cuda_flash_prefill"
    assert route((9, 0), phase="verify", kv_dtype="float8_e4m3fn").provider.name == "cuda_split_kv"
    assert route((7, 0), phase="prefill", kv_dtype="float8_e4m3fn").provider.name == "cuda_flash_prefill"
    assert route((7, 0), phase="prefill", block_size=2048).provider.name == "cuda_flash_prefill"
    assert route((9, 0), phase="prefill").provider.name == "torch_sdpa"
    sel = route((9, 0), phase="prefill")
    assert sel.refused["cuda_flash_prefill"] == ["lower priority than torch_sdpa"]
    assert route((9, 0), phase="prefill", soft_cap=True).provider.name == "cuda_flash_prefill"
    assert "phase decode" in route((7, 0)).refused["cuda_flash_prefill"][0]
    sel = route((7, 0), block_size=12)
    assert sel.provider.name == "torch" and any("block_size 12" in r for r in sel.refused["cuda_split_kv"])
    sel = route((7, 0), head_dim=96)
    assert sel.provider.name == "torch" and any("head_dim 96" in r for r in sel.refused["cuda_split_kv"])
    p = Problem("reshape_and_cache", "cuda", (7, 0), "float16", tuple(sorted(dict(
        kv_dtype="float8_e5m2", head_dim=128, value_dtype="float16", slot_dtype="int64", layout_ok=True).items())))
    assert ops.registry.explain(p, check_available=False).provider.name == "cuda_fp8"


@pytest.mark.parametrize("kv", [torch.float16, E4M3, E5M2])
def test_split_kv_host_side(kv, monkeypatch, gen):
    """Launch arguments pack into the kernels' signatures; a long context splits into partitions
    with a grid that covers every partition, KV head and row chunk, merged in the same launch (a
    counter array) or, under graph capture with too small an array, by a second (reduce) launch."""
    import functools
    import struct

    from onecat.kernels import cuda_ops
    calls = []

    def fake_launch(kernel, grid, block, *args, device):
        struct.pack_into(kernel._fmt, kernel._buf, 0, *args)
        calls.append((kernel.name, grid, block, args))

    monkeypatch.setattr(cuda_ops, "_launch", fake_launch)
    monkeypatch.setattr(cuda_ops, "_counter_arrays", functools.lru_cache(maxsize=None)(lambda device: []))
    capturing = [True]
    monkeypatch.setattr(cuda_ops, "_capturing", lambda device: capturing[0])
    md = paged_metadata([1, 1], [9000, 40], 16, 600, gen)
    q = torch.randn(2, 32, 128, generator=gen).half()
    kc = torch.zeros(600, 16, 8, 128, dtype=kv)
    suffix = {torch.float16: "f16", E4M3: "e4m3", E5M2: "e5m2"}[kv]
    v_mul = {torch.float16: 1.0, E4M3: 0.25 * 256, E5M2: 0.25}[kv]

    # under capture with no counter array yet: partials, then attn_reduce (nothing allocated)
    out = attention_ops.paged_attention(q, kc, kc, md, 0.1, None, None, 0.5, 0.25)
    assert out.shape == q.shape and out.dtype == q.dtype
    (dname, grid, block, args), (rname, rgrid, rblock, rargs) = calls
    assert dname == f"attn_decode_d128_{suffix}" and rname == "attn_reduce" and args[3] == 0
    nparts, part = args[-6], args[-5]
    assert grid == (1, 8, 2 * nparts) and nparts > 1 and nparts * part >= 9000 and block == (128, 1, 1)
    assert rgrid == (2, 32, 1) and rblock == (128, 1, 1)
    assert args[-1] == pytest.approx(v_mul) and rargs[-1] == pytest.approx(v_mul)
    assert cuda_ops._counter_arrays(q.device) == []

    # eager: one launch, a zeroed counter array covering the grid's (request, KV head, row chunk)
    capturing[0] = False
    calls.clear()
    attention_ops.paged_attention(q, kc, kc, md, 0.1, None, None, 0.5, 0.25)
    ((dname, grid, block, args),) = calls
    (counters,) = cuda_ops._counter_arrays(q.device)
    assert dname == f"attn_decode_d128_{suffix}" and args[3] == counters.data_ptr() and args[-6] > 1
    assert counters.dtype == torch.int32 and counters.numel() >= 2 * 8 * 1 and not counters.any()
    # under capture again: the same array (a captured graph keeps its address)
    capturing[0] = True
    calls.clear()
    attention_ops.paged_attention(q, kc, kc, md, 0.1, None, None, 0.5, 0.25)
    assert len(calls) == 1 and calls[0][3][3] == counters.data_ptr()
    # a grid larger than the array: grows outside capture only (the old array stays alive)
    need = counters.numel() + 1
    assert cuda_ops.split_counters(q.device, need) is None
    capturing[0] = False
    bigger = cuda_ops.split_counters(q.device, need)
    assert bigger.numel() >= need and cuda_ops._counter_arrays(q.device) == [counters, bigger]
    assert cuda_ops.split_counters(q.device, 5) is bigger


def test_prefill_split_keeps_reduce(monkeypatch, gen):
    """Prefill's split-KV (few requests) keeps its second launch: the prefill entries take no counters."""
    from onecat.kernels import cuda_ops
    calls = []
    monkeypatch.setattr(cuda_ops, "_launch",
                        lambda kernel, grid, block, *args, device: calls.append((kernel.name, args)))
    md = paged_metadata([40], [9000], 16, 600, gen)
    q = torch.randn(40, 8, 64, generator=gen).half()
    kc = torch.zeros(600, 16, 1, 64, dtype=torch.float16)
    attention_ops.flash_prefill(q, kc, kc, md, 0.1)
    assert [c[0] for c in calls] == ["attn_prefill_d64_f16", "attn_reduce"] and calls[0][1][-6] > 1
    assert len(calls[0][1]) == len(attention_ops._SIG)


@pytest.mark.parametrize("form,threads,name,per_sm", [("w4", 128, "attn_decode_rd_d128_e4m3", 3),
                                                      ("w1", 32, "attn_decode_rd_d128_e4m3_w1", 12),
                                                      ("deep", 128, "attn_decode_rd_d128_e4m3_deep", 2)])
def test_register_direct_decode_host_side(form, threads, name, per_sm, monkeypatch, gen):
    """paged_attention_rd's launch: its kernels' signature, the block size of its form (4-warp route,
    one-warp blocks, or 4-warp blocks with deeper loads at 2 per SM), partitions planned for that many
    resident blocks on the (fake: 80) SMs, the merge fused (a counter array)."""
    import struct

    from onecat.kernels import cuda_ops
    calls = []

    def fake_launch(kernel, grid, block, *args, device):
        struct.pack_into(kernel._fmt, kernel._buf, 0, *args)
        calls.append((kernel.name, grid, block, args))

    monkeypatch.setattr(cuda_ops, "_launch", fake_launch)
    md = paged_metadata([1] * 4, [8192] * 4, 16, 2100, gen)
    q = torch.randn(4, 32, 128, generator=gen).half()
    kc = torch.zeros(2100, 16, 8, 128, dtype=E4M3)
    attention_ops.paged_attention_rd(q, kc, kc, md, 0.1, None, None, 0.5, 0.25, form=form)
    ((kname, grid, block, args),) = calls
    nparts, part = args[-6], args[-5]
    want = attention_ops.split_kv_plan(4, 8, 1, 8192, 16 if form == "w1" else 64, 80, 4, 32, 128, per_sm)
    assert kname == name and block == (threads, 1, 1) and (nparts, part) == want and grid == (1, 8, 4 * nparts)
    assert nparts > 1 and args[3] != 0 and 4 * 8 * nparts <= per_sm * 80


@pytest.mark.parametrize("batch,kv,d,name", [
    (1, "f16", 128, "attn_decode_rd_d128_f16"), (40, "f16", 128, "attn_decode_rd_d128_f16_deep"),
    (41, "f16", 128, "attn_decode_rd_d128_f16_w1"), (8, "e4m3", 128, "attn_decode_rd_d128_e4m3"),
    (10, "e5m2", 128, "attn_decode_rd_d128_e5m2_deep"), (40, "e4m3", 128, "attn_decode_rd_d128_e4m3_deep"),
    (41, "e4m3", 128, "attn_decode_rd_d128_e4m3_w1"), (24, "f16", 64, "attn_decode_rd_d64_f16"),
    (25, "f16", 64, "attn_decode_rd_d64_f16_w1"), (1, "e5m2", 256, "attn_decode_rd_d256_e5m2"),
    (41, "e4m3", 256, "attn_decode_rd_d256_e4m3"), (4, "f16", 256, "attn_decode_rd_d256_f16")])
def test_register_direct_decode_form_route(batch, kv, d, name, monkeypatch, gen):
    """paged_attention_rd's default form on the fake 80 SMs, 8 KV heads (the batch bucket's groups):
    deep (D 128) past one group per SM and up to 4 (bucket 8 -> 64 groups: w4; 10 -> bucket 16 -> 128:
    deep; 40 -> 320: deep); else, or at D 64, 4-warp blocks while the groups fit one wave of 3 per SM
    (240), one-warp blocks past it (D 64 bucket 24 -> 192: w4, 25 -> 32 -> 256: w1); D 256 always the
    4-warp entries (2 per SM), FP16 included."""
    from onecat.kernels import cuda_ops
    calls = []
    monkeypatch.setattr(cuda_ops, "_launch", lambda kernel, grid, block, *args, device: calls.append(kernel.name))
    md = paged_metadata([1] * batch, [700] * batch, 16, batch * 44 + 4, gen)
    q = torch.randn(batch, 32, d, generator=gen).half()
    dtype = {"f16": torch.float16, "e4m3": E4M3, "e5m2": torch.float8_e5m2}[kv]
    kc = torch.zeros(batch * 44 + 4, 16, 8, d, dtype=dtype)
    attention_ops.paged_attention_rd(q, kc, kc, md, 0.1, None, None, *(() if kv == "f16" else (0.5, 0.25)))
    assert calls == [name]


def test_register_direct_decode_bad_form(gen):
    """A form that is not one, or deep at a head dim without deep entries, is refused before any launch."""
    md = paged_metadata([1] * 2, [100] * 2, 16, 20, gen)
    q = torch.randn(2, 8, 64).half()
    kc = torch.zeros(20, 16, 2, 64, dtype=torch.float16)
    have = r"\(entries: w4 D 64/128/256, w1 D 64/128, deep D 128\)"
    with pytest.raises(ValueError, match="no form 'w2' for head dim 64 " + have):
        attention_ops.paged_attention_rd(q, kc, kc, md, 0.1, form="w2")
    with pytest.raises(ValueError, match="no form 'deep' for head dim 64 " + have):
        attention_ops.paged_attention_rd(q, kc, kc, md, 0.1, form="deep")
    q, kc = torch.randn(2, 8, 256).half(), torch.zeros(20, 16, 2, 256, dtype=torch.float16)
    with pytest.raises(ValueError, match="no form 'w1' for head dim 256 " + have):
        attention_ops.paged_attention_rd(q, kc, kc, md, 0.1, form="w1")


def test_register_direct_decode_trace_launch(monkeypatch, gen):
    """paged_attention_rd(trace=...): the trace entry of the 4-warp kernel, the route's arguments plus the
    trace pointer (tools/gpu/decode_trace.py reads what it records)."""
    import struct

    from onecat.kernels import cuda_ops
    calls = []

    def fake_launch(kernel, grid, block, *args, device):
        struct.pack_into(kernel._fmt, kernel._buf, 0, *args)
        calls.append((kernel.name, block, args))

    monkeypatch.setattr(cuda_ops, "_launch", fake_launch)
    md = paged_metadata([1] * 4, [8192] * 4, 16, 2100, gen)
    q = torch.randn(4, 32, 128, generator=gen).half()
    kc = torch.zeros(2100, 16, 8, 128, dtype=E4M3)
    trace = torch.zeros(4096, 16, dtype=torch.int64)
    attention_ops.paged_attention_rd(q, kc, kc, md, 0.1, None, None, 0.5, 0.25, trace=trace)
    ((name, block, args),) = calls
    assert name == "attn_decode_rd_d128_e4m3_trace" and block == (128, 1, 1)
    assert len(args) == len(attention_ops._SIG_FUSED) + 1 and args[-1] == trace.data_ptr()


def test_register_direct_decode_trace_buffer_checked(gen):
    """A trace buffer too small (or not int64) for the launch's blocks, or a head dim without trace
    entries (D 64), is refused before any launch."""
    md = paged_metadata([1] * 4, [8192] * 4, 16, 2100, gen)
    q = torch.randn(4, 32, 128, generator=gen).half()
    kc = torch.zeros(2100, 16, 8, 128, dtype=E4M3)
    for bad in (torch.zeros(16, dtype=torch.int64), torch.zeros(4096, 16, dtype=torch.int32)):
        with pytest.raises(ValueError, match="trace: need a contiguous int64 tensor"):
            attention_ops.paged_attention_rd(q, kc, kc, md, 0.1, None, None, 0.5, 0.25, trace=bad)
    kc64 = torch.zeros(2100, 16, 8, 64, dtype=E4M3)
    with pytest.raises(ValueError, match="trace entries are D 128 only, got head dim 64"):
        attention_ops.paged_attention_rd(q[..., :64], kc64, kc64, md, 0.1, None, None, 0.5, 0.25,
                                         trace=torch.zeros(4096, 16, dtype=torch.int64))
