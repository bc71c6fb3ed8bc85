"""GPU: attention providers against an FP32 reference over the paged cache (the same cache bytes,
FP8 dequantized by the reference's rules). Grid: batch 1..16 with ragged lengths, contexts 1..32K,
heads 32/8, 24/4, 9/3, 4/1, head dims 64/128/256, block sizes 16/32/256/2048, sliding window,
soft-cap, prefix hits (queries start mid-sequence), verify q = 2..16, prefill through the tensor-core
prefill kernel (ragged batches mixed with decode rows, prefixes up to 32K), FP16/E4M3/E5M2 caches,
FP8 cache writes bit-exact; CUDA-graph capture + replays; the split-KV merge fused into the decode
launch (one launch, counters re-armed to zero) and its two-launch fallback; the sm_80+ register-direct
decode (cuda_decode_rd) over the decode cases. Seed: $ONECAT_TEST_SEED,
else random."""

from __future__ import annotations

import dataclasses
import functools
import math
import os
import random
import zlib

import pytest
import torch

from onecat.kernels import attention_ops, cuda_ops, ops
from onecat.kernels import reference as ref
from onecat.kernels.inputs import paged_metadata

pytestmark = pytest.mark.gpu
SEED = int(os.environ.get("ONECAT_TEST_SEED", random.randrange(2**31)))
KV_DTYPES = {"f16": torch.float16, "e4m3": torch.float8_e4m3fn, "e5m2": torch.float8_e5m2}
TOL = 5e-3  # ||out - ref|| / ||ref|| (FP16 output rounding + FP32 accumulation order)


def _cache(gen, shape, kv: str, scale: float):
    """FP16 N(0, 1), or N(0, 1) stored as fp8(x / scale) (so the bytes span the FP8 range)."""
    x = torch.randn(*shape, generator=gen, device="cuda")
    return x.half() if kv == "f16" else ref.fp8_quantize(x, scale, KV_DTYPES[kv])


def _run(gen, q_lens, seq_lens, hq, hk, d, bs, kv="f16", window=None, cap=None, provider="cuda_split_kv", fn=None,
         host_written=False):
    """`provider`'s function (admitted for the problem), or `fn` (an unrouted form) on the same inputs.
    host_written: the metadata as a decode graph passes it (the kernels load K / V before their wait)."""
    nb = sum(-(-s // bs) for s in seq_lens) + 3
    md = paged_metadata(q_lens, seq_lens, bs, nb, torch.Generator().manual_seed(int(gen.initial_seed()) + 1), "cuda")
    md = dataclasses.replace(md, host_written=True) if host_written else md
    q = torch.randn(sum(q_lens), hq, d, generator=gen, device="cuda").half()
    ks, vs = (0.013, 0.021) if kv != "f16" else (1.0, 1.0)
    kc, vc = _cache(gen, (nb, bs, hk, d), kv, ks), _cache(gen, (nb, bs, hk, d), kv, vs)
    args = (q, kc, vc, md, 1 / math.sqrt(d), window, cap) + ((ks, vs) if kv != "f16" else ())
    p = ops.problem("paged_attention", *args)
    prov = ops.registry.providers["paged_attention"][provider]
    assert not prov.refusal(p), prov.refusal(p)
    with cuda_ops.poison_outputs():
        got = (fn or prov.fn)(*args)
    want = ref.paged_attention(q.float(), ref.kv_dequantize(kc, ks) if kv != "f16" else kc.float(),
                               ref.kv_dequantize(vc, vs) if kv != "f16" else vc.float(), md, 1 / math.sqrt(d),
                               window, cap)
    torch.cuda.synchronize()
    err = float((got.double() - want.double()).norm() / want.double().norm())
    label = f"q={q_lens} ctx={seq_lens} H={hq}/{hk} D={d} bs={bs} kv={kv} win={window} cap={cap} seed={SEED}"
    assert err <= TOL, f"{label}: rel err {err:.3g} (NaN: unwritten output)"


def _gen(*key) -> torch.Generator:
    """A generator seeded from the case's key: the same inputs in every process (crc32, where hash() of
    strings changes with each interpreter's PYTHONHASHSEED)."""
    return torch.Generator("cuda").manual_seed(SEED + zlib.crc32(repr(key).encode()) % 100003)


HEADS = [(32, 8), (24, 4), (9, 3), (4, 1)]


@pytest.mark.parametrize("kv", ["f16", "e4m3", "e5m2"])
@pytest.mark.parametrize("d", [64, 128, 256])
@pytest.mark.parametrize("hq,hk", HEADS)
def test_decode(kv, d, hq, hk):
    rnd = random.Random(SEED + d + hq)
    for batch in (1, 3, 16):
        seq = [rnd.randint(1, 3000) for _ in range(batch)]
        _run(_gen("dec", kv, d, hq, batch), [1] * batch, seq, hq, hk, d, rnd.choice([16, 32]), kv)


@pytest.mark.parametrize("kv", ["f16", "e4m3"])
@pytest.mark.parametrize("ctx", [1, 17, 8192, 32768])
def test_decode_long(kv, ctx):
    _run(_gen("long", kv, ctx), [1, 1, 1, 1], [ctx, max(1, ctx // 3), ctx, 5], 32, 8, 128, 16, kv)


# the sm_80+ register-direct decode (csrc/attention_decode_rd.cu): one query token, D 64 / 128, group <= 8
RD = "cuda_decode_rd"
rd_gpu = pytest.mark.skipif(torch.cuda.is_available() and torch.cuda.get_device_capability() < (8, 0),
                            reason="register-direct decode needs sm_80+ (mma.sync m16n8k16)")


@rd_gpu
@pytest.mark.parametrize("kv", ["f16", "e4m3", "e5m2"])
@pytest.mark.parametrize("d", [64, 128, 256])
@pytest.mark.parametrize("hq,hk", HEADS + [(64, 8), (16, 16)])
def test_decode_rd(kv, d, hq, hk):
    rnd = random.Random(SEED + d + hq + hk)
    for batch in (1, 3, 16):  # block sizes past the kernel's 512-key page segment too
        seq = [rnd.randint(1, 3000) for _ in range(batch)]
        _run(_gen("rd", kv, d, hq, hk, batch), [1] * batch, seq, hq, hk, d, rnd.choice([8, 16, 32, 1024]), kv,
             provider=RD)


@rd_gpu
@pytest.mark.parametrize("kv", ["f16", "e4m3", "e5m2"])
@pytest.mark.parametrize("ctx", [1, 17, 8192, 32768])
def test_decode_rd_long(kv, ctx):
    _run(_gen("rdlong", kv, ctx), [1, 1, 1, 1], [ctx, max(1, ctx // 3), ctx, 5], 32, 8, 128, 16, kv, provider=RD)
    _run(_gen("rdlong256", kv, ctx), [1, 1], [ctx, 5], 16, 8, 256, 16, kv, provider=RD)  # Gemma 3's head dim


@rd_gpu
@pytest.mark.parametrize("d", [64, 128])
def test_decode_rd_window_softcap(d):
    _run(_gen("rdwin", d), [1, 1, 1], [5000, 300, 7], 8, 4, d, 16, window=1024, provider=RD)
    _run(_gen("rdwin2", d), [1, 1], [4000, 100], 8, 1, d, 32, "e4m3", window=37, cap=50.0, provider=RD)
    _run(_gen("rdcap", d), [1, 1], [3000, 11], 16, 8, d, 16, cap=30.0, provider=RD)


@pytest.mark.parametrize("q", [2, 3, 7, 8, 16])
@pytest.mark.parametrize("d", [64, 128, 256])
def test_verify(q, d):
    rnd = random.Random(SEED + q * d)
    seq = [rnd.randint(q, 5000) for _ in range(5)]
    _run(_gen("ver", q, d), [q] * 5, seq, 32, 8, d, 16)
    _run(_gen("ver8", q, d), [q, 1, q], [q, 900, 4000], 9, 3, d, 32, "e5m2")


@pytest.mark.parametrize("d", [64, 128, 256])
def test_window_softcap(d):
    _run(_gen("win", d), [1, 3, 1], [5000, 300, 7], 8, 4, d, 16, window=1024)
    _run(_gen("win2", d), [16, 1], [4000, 100], 8, 1, d, 32, "e4m3", window=37, cap=50.0)
    _run(_gen("cap", d), [1, 1], [3000, 11], 16, 8, d, 16, cap=30.0)


@pytest.mark.parametrize("provider", ["cuda_split_kv", "cuda_flash_prefill", "torch_sdpa"])
@pytest.mark.parametrize("d", [64, 128, 256])
def test_prefill_and_prefix_hits(provider, d):
    if provider == "torch_sdpa" and torch.cuda.get_device_capability() < (8, 0):
        pytest.skip("SDPA prefill route is for sm80+")
    # fresh prompts, chunked prefill / prefix hits (queries start mid-sequence), mixed with decode
    _run(_gen("pf", d), [300, 1, 77], [300, 2000, 1077], 32, 8, d, 16, provider=provider)
    _run(_gen("pf2", d), [129, 64], [4000, 64], 24, 4, d, 32, provider=provider)
    _run(_gen("pf3", d), [33, 200], [1000, 2200], 4, 1, d, 16, window=128, provider=provider)
    if provider != "torch_sdpa":
        _run(_gen("pf4", d), [33, 200], [1000, 2200], 4, 1, d, 16, "e4m3", window=128, provider=provider)


@pytest.mark.parametrize("d", [64, 128, 256])
@pytest.mark.parametrize("hq,hk", HEADS)
def test_flash_prefill_ragged(d, hq, hk):
    """Ragged batches of 1..16 requests: fresh prompts, prefix hits and decode rows mixed."""
    rnd = random.Random(SEED + 7 * d + hq)
    for batch in (1, 6, 16):
        q_lens = [rnd.choice([1, rnd.randint(17, 600), rnd.randint(17, 64)]) for _ in range(batch)]
        q_lens[0] = max(q_lens[0], 17)  # a prefill batch
        seq = [q + rnd.choice([0, 0, rnd.randint(1, 2500)]) for q in q_lens]
        kv = rnd.choice(["f16", "f16", "e4m3", "e5m2"])
        window = rnd.choice([None, None, rnd.randint(16, 900)])
        cap = rnd.choice([None, None, 30.0])
        _run(_gen("fpr", d, hq, batch), q_lens, seq, hq, hk, d, rnd.choice([16, 32, 256]), kv, window, cap,
             provider="cuda_flash_prefill")


@pytest.mark.parametrize("kv", ["f16", "e4m3"])
@pytest.mark.parametrize("bs", [16, 2048])
def test_flash_prefill_long(kv, bs):
    """Prefix-cache hits over contexts up to 32K, a fresh 4K prompt, a window over a long prefix."""
    _run(_gen("fpl", kv, bs), [64, 300, 17], [32768, 20000, 32768], 32, 8, 128, bs, kv, provider="cuda_flash_prefill")
    _run(_gen("fpl2", kv, bs), [4096], [4096], 32, 8, 128, bs, kv, provider="cuda_flash_prefill")
    _run(_gen("fpl3", kv, bs), [200, 33], [30000, 9000], 24, 4, 256, bs, kv, window=4096, cap=50.0,
         provider="cuda_flash_prefill")


@pytest.mark.parametrize("d", [64, 128, 256])
def test_block_size_2048(d):
    """Pages of 2048 tokens (one page-id table entry per 512-key segment or two): decode, verify."""
    _run(_gen("bs2k", d), [1, 1, 1, 1], [9000, 2048, 2049, 5], 32, 8, d, 2048)
    _run(_gen("bs2k8", d), [8, 1], [4100, 30000], 9, 3, d, 2048, "e4m3", window=3000)


@pytest.mark.parametrize("kv", ["e4m3", "e5m2"])
def test_reshape_and_cache_fp8_bit_exact(kv):
    gen = _gen("cache", kv)
    nb, bs, hk, d, t = 40, 16, 8, 128, 300
    dt = KV_DTYPES[kv]
    kc = torch.zeros(nb, bs, hk, d, dtype=dt, device="cuda")
    vc = torch.zeros_like(kc)
    kv_in = torch.randn(t, 2, hk, d, generator=gen, device="cuda").half() * 40  # saturates some
    key, value = kv_in[:, 0], kv_in[:, 1]  # strided views, as a fused projection gives them
    slots = torch.randperm(nb * bs, device="cuda")[:t]
    slots[5] = -1
    p = ops.problem("reshape_and_cache", key, value, kc, vc, slots, 0.07, 0.11)
    assert ops.registry.select(p).provider.name == "cuda_fp8"
    ops.reshape_and_cache(key, value, kc, vc, slots, 0.07, 0.11)
    kr, vr = torch.zeros_like(kc), torch.zeros_like(vc)
    ref.reshape_and_cache(key, value, kr, vr, slots, 0.07, 0.11)
    torch.cuda.synchronize()
    assert torch.equal(kc.view(torch.uint8), kr.view(torch.uint8))
    assert torch.equal(vc.view(torch.uint8), vr.view(torch.uint8))


def test_mixed_step_through_the_op():
    """A mixed step as the scheduler builds it (decode rows, then prompt chunks) through
    ops.paged_attention: decode rows on the decode route, prompts on the prefill route, against the
    FP32 reference for the whole batch."""
    gen = torch.Generator().manual_seed(SEED)
    q_lens, seq_lens, hq, hk, d, bs = [1] * 12 + [300, 77], [700 + 37 * i for i in range(12)] + [300, 1077], 32, 8, 128, 16
    nb = sum(-(-s // bs) for s in seq_lens) + 3
    md = paged_metadata(q_lens, seq_lens, bs, nb, gen, "cuda")
    q = torch.randn(sum(q_lens), hq, d, device="cuda").half()
    kc, vc = torch.randn(nb, bs, hk, d, device="cuda").half(), torch.randn(nb, bs, hk, d, device="cuda").half()
    with cuda_ops.poison_outputs():
        got = ops.paged_attention(q, kc, vc, md, 0.1)
    want = ref.paged_attention(q.float(), kc.float(), vc.float(), md, 0.1)
    err = float((got.double() - want.double()).norm() / want.double().norm())
    assert err <= TOL, f"seed={SEED}: rel err {err:.3g}"


def test_dispatch_and_graph_replay():
    gen = torch.Generator().manual_seed(SEED)
    q_lens, seq_lens, hq, hk, d, bs, nb = [1] * 4, [9000, 123, 4097, 1], 32, 8, 128, 16, 1200
    md = paged_metadata(q_lens, seq_lens, bs, nb, gen, "cuda")
    q = torch.randn(4, hq, d, device="cuda").half()
    kc = torch.randn(nb, bs, hk, d, device="cuda").half()
    vc = torch.randn(nb, bs, hk, d, device="cuda").half()
    assert ops.registry.select(ops.problem("paged_attention", q, kc, vc, md, 0.1)).provider.name != "torch"
    step = lambda: ops.paged_attention(q, kc, vc, md, 0.1)  # noqa: E731
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        step()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        out = step()
    for _ in range(2):
        q.copy_(torch.randn_like(q))
        g.replay()
        torch.cuda.synchronize()
        want = ref.paged_attention(q.float(), kc.float(), vc.float(), md, 0.1)
        err = float((out.double() - want.double()).norm() / want.double().norm())
        assert err <= TOL, err


@pytest.fixture
def decode_launches(monkeypatch):
    """Records the attention launches (passed through to the real ones)."""
    calls = []
    real = cuda_ops._launch

    def launch(kernel, grid, block, *args, **kw):
        if kernel.name.startswith("attn_"):
            calls.append((kernel.name, grid, args))
        real(kernel, grid, block, *args, **kw)

    monkeypatch.setattr(cuda_ops, "_launch", launch)
    return calls


def _assert_fused(calls, label):
    """One decode launch that split the keys (nparts > 1) and merged them itself (a counter array,
    no attn_reduce), every counter of the array back at zero after it. Arguments counted from the
    front: traced entries take a pointer after them."""
    assert len(calls) == 1 and calls[0][0].startswith("attn_decode_"), (label, [c[0] for c in calls])
    args = calls[0][2]
    nparts, counters = args[len(attention_ops._SIG_FUSED) - 6], args[3]
    assert nparts > 1 and counters != 0, (label, nparts)
    torch.cuda.synchronize()
    (arr,) = [a for a in cuda_ops._counter_arrays(cuda_ops._device_key(torch.device("cuda")))
              if a.data_ptr() == counters]
    assert not arr.any(), f"{label}: counters not re-armed"


FUSED_CASES = [  # (q_lens, seq_lens, hq, hk, d, bs, kv, window, cap)
    ([1], [512], 9, 3, 64, 16, "f16", None, None),  # smollm2 decode, batch 1
    ([1], [200], 9, 3, 64, 16, "f16", None, None),
    ([1] * 4, [512, 3000, 17, 1], 9, 3, 64, 16, "f16", None, None),  # batch 4: short contexts fill a prefix
    ([1] * 4, [8192, 700, 4097, 65], 32, 8, 128, 16, "f16", None, None),
    ([1] * 4, [5000, 64, 1999, 300], 16, 2, 256, 32, "f16", None, None),
    ([4, 4], [900, 4], 9, 3, 64, 16, "f16", None, None),  # verify: 12 rows
    ([16, 8], [3000, 500], 32, 8, 128, 16, "f16", None, None),  # verify: 64 rows, 4 row chunks
    ([7, 16], [2000, 6000], 9, 3, 256, 32, "f16", None, None),  # verify: 3 row chunks, D 256
    ([1] * 4, [6000, 900, 33, 2], 32, 8, 128, 16, "e4m3", None, None),  # FP8 (v_mul)
    ([1, 5], [3000, 700], 9, 3, 64, 32, "e5m2", None, None),
    ([1] * 4, [6000, 1500, 300, 9], 8, 2, 128, 16, "f16", 1024, None),  # sliding window: lo > 0
    ([3, 1], [5000, 70], 9, 3, 64, 16, "e4m3", 333, 30.0),  # window + verify + FP8 + soft cap
    ([1, 1], [4000, 11], 16, 4, 128, 16, "f16", None, 50.0),  # soft cap
]


@pytest.mark.parametrize("case", range(len(FUSED_CASES)))
def test_fused_split_merge(case, decode_launches):
    """The split-KV merge inside the decode launch (the last block of each (request, KV head, row
    chunk) merges): batch 1 and 4 decode, verify with several row chunks, FP8, sliding window, soft
    cap, contexts that fill a prefix of the partitions; twice in a row (counters re-armed)."""
    q_lens, seq, hq, hk, d, bs, kv, window, cap = FUSED_CASES[case]
    for rep in range(2):
        decode_launches.clear()
        _run(_gen("fused", case, rep), q_lens, seq, hq, hk, d, bs, kv, window, cap)
        _assert_fused(decode_launches, f"case {case} rep {rep}")


@rd_gpu
@pytest.mark.parametrize("case", [i for i, c in enumerate(FUSED_CASES)
                                  if max(c[0]) == 1 and (c[4] <= 128 or c[6] != "f16")])
def test_decode_rd_fused_split_merge(case, decode_launches):
    """The register-direct decode's launch merges its partitions itself, as the Volta kernel's."""
    q_lens, seq, hq, hk, d, bs, kv, window, cap = FUSED_CASES[case]
    for rep in range(2):
        decode_launches.clear()
        _run(_gen("rdfused", case, rep), q_lens, seq, hq, hk, d, bs, kv, window, cap, provider=RD)
        _assert_fused(decode_launches, f"case {case} rep {rep}")
        assert decode_launches[0][0].startswith("attn_decode_rd_"), decode_launches[0][0]


@rd_gpu
@pytest.mark.parametrize("kv", ["f16", "e4m3", "e5m2"])
@pytest.mark.parametrize("form,d", [("w1", 64), ("w1", 128), ("deep", 128), ("w4", 128)])
def test_decode_rd_forced_forms(form, d, kv, decode_launches):
    """paged_attention_rd(form=...): the one-warp-block form, the deep one (two / three load sets at 2
    blocks per SM) and the 4-warp one, each whatever decode_rd_form would pick: decode over ragged
    contexts, block sizes 8 / 32, window + soft cap, its fused merge (many partitions) re-arming the
    counters."""
    fn = functools.partial(attention_ops.paged_attention_rd, form=form)
    rnd = random.Random(SEED + d)
    for batch, hq, hk, bs in ((1, 32, 8, 16), (3, 24, 4, 8), (16, 9, 3, 32), (32, 32, 8, 16)):
        seq = [rnd.randint(1, 9000) for _ in range(batch)]
        _run(_gen(form, kv, d, batch), [1] * batch, seq, hq, hk, d, bs, kv, provider=RD, fn=fn)
    decode_launches.clear()
    _run(_gen(form + "win", kv, d), [1, 1], [5000, 70], 16, 4, d, 16, kv, window=700, cap=30.0, provider=RD, fn=fn)
    _assert_fused(decode_launches, form)
    name = decode_launches[0][0]
    assert name == f"attn_decode_rd_d{d}_{kv}" + {"w4": "", "w1": "_w1", "deep": "_deep"}[form], name
    assert decode_launches[0][1][2] > 2, decode_launches[0][:2]


@rd_gpu
@pytest.mark.parametrize("kv", ["f16", "e4m3", "e5m2"])
def test_decode_rd_two_launch(kv, monkeypatch):
    """Without a counter array (split_counters gives None under graph capture when its array is too
    small) the register-direct kernel writes split partials and attn_reduce merges them: the same output.
    (E4M3 decoded in hardware, sm_89+, stores those partials x 2^-8: attn_reduce's v_mul carries the
    integer decode's 2^8; s22 found them 256x too large.)"""
    monkeypatch.setattr(cuda_ops, "split_counters", lambda *a, **k: None)
    rnd = random.Random(SEED + 23)
    for d in (64, 128, 256):
        seq = [rnd.randint(1000, 9000) for _ in range(3)] + [rnd.randint(1, 40)]
        _run(_gen("rd2l", kv, d), [1] * 4, seq, 32, 8, d, 16, kv, provider=RD)


@rd_gpu
@pytest.mark.parametrize("kv", ["f16", "e4m3", "e5m2"])
@pytest.mark.parametrize("d", [64, 128, 256])
def test_decode_rd_host_written(kv, d):
    """With the metadata host-written (a decode graph's), the register-direct kernel reads the lengths
    and page ids and loads its first steps' K / V before the wait (the token's own key after it):
    ragged contexts (warps with fewer steps than the preloaded ones, partitions cut short), block
    sizes 8 / 16 / 32 (the 512-key page segments), window + soft cap, many and few partitions."""
    rnd = random.Random(SEED + 11 + d)
    for batch, hq, hk, bs in ((1, 32, 8, 16), (3, 24, 4, 8), (4, 32, 8, 32), (16, 9, 3, 16)):
        seq = [rnd.randint(1, 12000) for _ in range(batch - 1)] + [rnd.randint(1, 300)]
        _run(_gen("hw", kv, d, batch), [1] * batch, seq, hq, hk, d, bs, kv, provider=RD, host_written=True)
    _run(_gen("hwwin", kv, d), [1, 1], [5000, 70], 16, 4, d, 16, kv, window=700, cap=30.0, provider=RD,
         host_written=True)


@rd_gpu
@pytest.mark.parametrize("kv", ["f16", "e4m3", "e5m2"])
def test_decode_rd_d128_traced(kv, decode_launches):
    """The D 128 4-warp kernel's traced entries (not routed; tools/gpu/decode_trace.py) give the
    reference's result over ragged contexts, block sizes 8 / 32, window + soft cap, many partitions,
    repeated launches, and every launched block records its entry and end."""
    trace = torch.zeros(8 * 32 * 1024, 16, dtype=torch.int64, device="cuda")
    fn = functools.partial(attention_ops.paged_attention_rd, trace=trace)
    rnd = random.Random(SEED + 1)
    for rep in range(2):
        for batch, hq, hk, bs in ((1, 32, 8, 16), (3, 24, 4, 8), (16, 32, 8, 32)):
            seq = [rnd.randint(1, 9000) for _ in range(batch)]
            _run(_gen("xtrace", kv, batch, rep), [1] * batch, seq, hq, hk, 128, bs, kv, provider=RD, fn=fn)
    decode_launches.clear()
    _run(_gen("xwintrace", kv), [1, 1], [5000, 70], 16, 4, 128, 16, kv, window=700, cap=30.0, provider=RD, fn=fn)
    _assert_fused(decode_launches, "traced")
    assert decode_launches[0][0].endswith("_trace"), decode_launches[0][:2]
    rows = trace.cpu()
    rows = rows[rows[:, 0] != 0]
    assert len(rows) > 0 and bool((rows[:, 6] >= rows[:, 0]).all())


def test_fused_fallback_two_launches(monkeypatch, decode_launches):
    """No counter array large enough under graph capture: partials, then attn_reduce (same result)."""
    monkeypatch.setattr(cuda_ops, "_counter_arrays", functools.lru_cache(maxsize=None)(lambda device: []))
    monkeypatch.setattr(cuda_ops, "_capturing", lambda device: True)
    _run(_gen("fallback"), [1] * 4, [512, 3000, 17, 1], 9, 3, 64, 16)
    assert [c[0] for c in decode_launches] == ["attn_decode_d64_f16", "attn_reduce"]
    assert decode_launches[0][2][3] == 0 and decode_launches[0][2][-6] > 1
    _run(_gen("fallback8"), [4, 1], [900, 4000], 32, 8, 128, 16, "e4m3", window=700)
    assert [c[0] for c in decode_launches[2:]] == ["attn_decode_d128_e4m3", "attn_reduce"]


@pytest.mark.parametrize("batch,hq,hk,d", [(1, 9, 3, 64), (4, 32, 8, 128)])
@pytest.mark.parametrize("host_written", [False, True])
def test_fused_graph_replays(batch, hq, hk, d, host_written, decode_launches):
    """A captured decode step (planned for 512 / 4096 keys) replayed three times in a row with new
    queries and shorter contexts: the fused merge's counters re-arm between replays. host_written:
    the metadata as the engine's graphs pass it (on sm_90 the kernel reads lengths and page ids
    before waiting on the kernel ahead of it, here the one writing the queries)."""
    gen = torch.Generator().manual_seed(SEED + batch)
    max_len = 512 if batch == 1 else 4096
    q_lens, seq_lens, bs = [1] * batch, [max_len] * batch, 16
    nb = batch * max_len // bs + 3
    md = dataclasses.replace(paged_metadata(q_lens, seq_lens, bs, nb, gen, "cuda"), host_written=host_written)
    q_src = torch.randn(batch, hq, d, device="cuda").half()
    norm_w = torch.ones(d, device="cuda").half()
    kc = torch.randn(nb, bs, hk, d, device="cuda").half()
    vc = torch.randn(nb, bs, hk, d, device="cuda").half()

    def step():  # the queries come from a kernel just ahead of the attention (rms_norm: a PDL one)
        q = ops.rms_norm(q_src.view(-1, d), norm_w, 1e-6).view(batch, hq, d)
        return q, ops.paged_attention(q, kc, vc, md, 0.125)

    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        step()  # warm-up: allocates the counter array outside capture
    torch.cuda.current_stream().wait_stream(s)
    decode_launches.clear()
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        q, out = step()
    _assert_fused(decode_launches, "capture")
    rnd = random.Random(SEED)
    for rep in range(3):
        lens = [max_len] * batch if rep == 0 else [rnd.randint(1, max_len) for _ in range(batch)]
        md.seq_lens.copy_(torch.tensor(lens, dtype=torch.int32))
        q_src.copy_(torch.randn_like(q_src))
        g.replay()
        torch.cuda.synchronize()
        want = ref.paged_attention(q.float(), kc.float(), vc.float(),
                                   dataclasses.replace(md, seq_lens_cpu=lens, max_seq_len=max(lens)), 0.125)
        err = float((out.double() - want.double()).norm() / want.double().norm())
        assert err <= TOL, f"replay {rep} lens {lens} seed={SEED}: rel err {err:.3g}"
    counters = decode_launches[0][2][3]
    (arr,) = [a for a in cuda_ops._counter_arrays(cuda_ops._device_key(torch.device("cuda")))
              if a.data_ptr() == counters]
    assert not arr.any(), "counters not re-armed after the replays"
