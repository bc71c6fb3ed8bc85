"""The `sample` op (sampling_ops): the torch reference's semantics on the CPU (each filter alone and
combined in vLLM's order, ties, greedy, -inf, reproducibility per (seed, offset) and independence
from the batch, bad input), Philox-4x32-10 against Random123's known answers, a chi-square test of
>= 10^5 reference draws against the renormalized truncated distribution, the CUDA provider's
admission and launch variants (host side), and on a GPU (marked `gpu`) the kernel against the
reference token for token (V up to 262144, B up to 256, fp16/fp32, odd sizes, strides, ties,
outputs poisoned) plus a CUDA-graph replay. GPU seed: $ONECAT_TEST_SEED, else random (printed).

Run the GPU part: .venv/bin/python -m pytest -q tests/kernels/test_sampling.py -m gpu
"""

from __future__ import annotations

import dataclasses
import math
import os
import random

import pytest
import torch

from onecat.kernels import cuda_ops, ops, sampling_ops
from onecat.kernels.registry import REFERENCE
from onecat.kernels.sampling_ops import (philox4x32_10, random_sampling_params, sample_reference,
                                         sampling_keep_mask)

SEED = int(os.environ.get("ONECAT_TEST_SEED", random.randrange(2**31)))


@pytest.fixture(autouse=True, scope="module")
def _one_thread():
    """Small tensors: torch's intra-op threads cost more than they save (and the CI box is shared)."""
    n = torch.get_num_threads()
    torch.set_num_threads(1)
    yield
    torch.set_num_threads(n)


def params(b, temperature=1.0, top_k=0, top_p=1.0, min_p=0.0, seed=0, offset=0, device="cpu"):
    full = lambda v, dt: (v if isinstance(v, torch.Tensor) else torch.full((b,), v, dtype=dt)).to(device)  # noqa: E731
    return (full(temperature, torch.float32), full(top_k, torch.int32), full(top_p, torch.float32),
            full(min_p, torch.float32), full(seed, torch.int64), full(offset, torch.int64))


def kept(logits, **kw):
    """The kept set of row 0 as a sorted list of token ids."""
    keep, _ = sampling_keep_mask(logits, *params(logits.shape[0], **kw)[:4])
    return keep[0].nonzero().flatten().tolist()


def oracle_keep(row: torch.Tensor, temperature: float, top_k: int, top_p: float, min_p: float) -> set[int]:
    """The kept set of one row written out plainly (lists, distinct values, Python ints and floats),
    from the same float32 z and e as the reference: checks the filter logic, not the arithmetic."""
    z = row.float()[None] * (torch.ones(1) / torch.tensor([temperature]))[:, None]
    e = torch.exp(z - z.max()).flatten().tolist()
    z = z.flatten().tolist()
    s = [i for i in range(len(z)) if e[i] >= float(torch.tensor(min_p))]
    if 0 < top_k < len(z):
        vals = sorted((z[i] for i in s), reverse=True)
        if len(vals) >= top_k:
            s = [i for i in s if z[i] >= vals[top_k - 1]]
    if top_p < 1:
        q = {i: int(e[i] * 2.0 ** 31) for i in s}
        target = float(torch.tensor(top_p)) * sum(q.values())
        for t in sorted({e[i] for i in s}, reverse=True):
            if sum(q[i] for i in s if e[i] >= t) >= target:
                s = [i for i in s if e[i] >= t]
                break
    return set(s)


# -- Philox ----------------------------------------------------------------------------------------
RANDOM123_KAT = [  # Random123 tests/kat_vectors: philox4x32 10 rounds (counter, key, output)
    ((0, 0, 0, 0), (0, 0), (0x6627E8D5, 0xE169C58D, 0xBC57AC4C, 0x9B00DBD8)),
    ((0xFFFFFFFF,) * 4, (0xFFFFFFFF,) * 2, (0x408F276D, 0x41C83B0E, 0xA20BC7C6, 0x6D5451FD)),
    ((0x243F6A88, 0x85A308D3, 0x13198A2E, 0x03707344), (0xA4093822, 0x299F31D0),
     (0xD16CFE09, 0x94FDCCEB, 0x5001E420, 0x24126EA1)),
]


@pytest.mark.parametrize("counter,key,want", RANDOM123_KAT)
def test_philox_known_answers(counter, key, want):
    t = lambda v: torch.tensor([v], dtype=torch.int64)  # noqa: E731
    got = philox4x32_10(tuple(t(c) for c in counter), tuple(t(k) for k in key))
    assert [int(g) for g in got] == list(want)


def test_uniforms_open_interval_and_layout():
    seed = torch.tensor([7, -3], dtype=torch.int64)
    off = torch.tensor([0, 2**33 + 5], dtype=torch.int64)
    u = sampling_ops.philox_uniforms(seed, off, 4097)
    assert u.shape == (2, 4097) and u.dtype == torch.float32
    assert bool((u > 0).all() and (u < 1).all())
    assert abs(float(u.double().mean()) - 0.5) < 0.01
    # token i uses word i % 4 of counter i // 4: recompute token 4093 of row 1 by hand
    s, o = -3 & 0xFFFFFFFFFFFFFFFF, 2**33 + 5
    t = lambda v: torch.tensor([v], dtype=torch.int64)  # noqa: E731
    words = philox4x32_10((t(4093 // 4), t(o & 0xFFFFFFFF), t(o >> 32), t(0)), (t(s & 0xFFFFFFFF), t(s >> 32)))
    assert float(u[1, 4093]) == ((int(words[4093 % 4]) >> 9) + 0.5) * 2.0 ** -23


# -- semantics of each filter ------------------------------------------------------------------------
LOGP = torch.tensor([[0.5, 0.3, 0.15, 0.05]]).log()
EXACT = torch.tensor([[0.0, -math.log(2), -math.log(4), -math.log(4)]])  # e = 1, 1/2, 1/4, 1/4 exactly in float32


def test_greedy_is_argmax_and_ignores_filters():
    x = torch.tensor([[1.0, 3.0, 3.0, -2.0], [0.0, 0.0, 0.0, 0.0], [-1.0, -1.0, 5.0, 5.0]], dtype=torch.float16)
    for t in (0.0, 0.5e-5):
        for kw in ({}, dict(top_k=1), dict(top_p=0.1, min_p=0.9)):
            out = sample_reference(x, *params(3, temperature=t, seed=11, **kw))
            assert out.tolist() == [1, 0, 2], (t, kw)  # first index on ties, as torch.argmax


def test_all_neg_inf_row_is_token_0_and_neg_inf_never_drawn():
    x = torch.randn(3, 50)
    x[0] = float("-inf")
    x[1, :49] = float("-inf")
    x[2, ::2] = float("-inf")
    for off in range(20):
        out = sample_reference(x, *params(3, temperature=2.0, offset=off, seed=5))
        assert out[0] == 0 and out[1] == 49 and out[2] % 2 == 1


def test_min_p_alone():
    # p / p_max = [1, 0.6, 0.3, 0.1]: min_p 0.3 keeps the first three (0.3 >= 0.3 up to rounding: use 0.29)
    assert kept(LOGP, min_p=0.29) == [0, 1, 2]
    assert kept(LOGP, min_p=0.31) == [0, 1]
    assert kept(LOGP, min_p=1.0) == [0] and kept(LOGP, min_p=0.0) == [0, 1, 2, 3]


def test_top_k_alone_and_ties_at_kth():
    assert kept(LOGP, top_k=2) == [0, 1] and kept(LOGP, top_k=4) == [0, 1, 2, 3] and kept(LOGP, top_k=0) == [0, 1, 2, 3]
    x = torch.tensor([[5.0, 4.0, 4.0, 1.0, 4.0, 0.0]])
    assert kept(x, top_k=2) == [0, 1, 2, 4]  # every token tied with the k-th value survives
    assert kept(x, top_k=1) == [0]
    assert kept(x, top_k=5) == [0, 1, 2, 3, 4]


def test_top_p_alone_and_ties_at_threshold():
    assert kept(LOGP, top_p=0.75) == [0, 1]  # 0.5 < 0.75 <= 0.8
    assert kept(LOGP, top_p=0.85) == [0, 1, 2]
    assert kept(LOGP, top_p=0.4) == [0]
    assert kept(LOGP, top_p=1.0) == [0, 1, 2, 3]
    x = torch.tensor([[0.4, 0.2, 0.2, 0.2]]).log()
    assert kept(x, top_p=0.5) == [0, 1, 2, 3]  # 0.4 < 0.5; the three tied at 0.2 all come in
    # exact fixed-point masses q = [2^31, 2^30, 2^29, 2^29]: mass equal to top_p * total reaches it
    assert kept(EXACT, top_p=0.5) == [0] and kept(EXACT, top_p=0.75) == [0, 1]
    assert kept(EXACT, top_p=0.7500001) == [0, 1, 2, 3]


def test_vllm_order_min_p_then_top_k_then_top_p_on_the_remainder():
    x = torch.tensor([[0.3, 0.25, 0.2, 0.15, 0.1]]).log()
    # top-p after top-k measures mass within the top-2 (0.3 / 0.55 = 0.545 >= 0.5): token 0 alone;
    # applied to the full distribution first it would keep {0, 1} (0.3 < 0.5 <= 0.55).
    assert kept(x, top_k=2, top_p=0.5) == [0]
    # min-p first: p / p_max = [1, .83, .67, .5, .33]; min_p 0.6 leaves {0, 1, 2}; top_k 5 is then off,
    # and top-p 0.6 of the remaining 0.75 mass (0.45) needs {0, 1}.
    assert kept(x, min_p=0.6, top_k=5, top_p=0.6) == [0, 1]
    assert kept(x, min_p=0.6, top_k=2, top_p=1.0) == [0, 1]


def test_keep_mask_matches_plain_oracle():
    gen = torch.Generator().manual_seed(3)
    for _ in range(40):
        v = int(torch.randint(2, 300, (1,), generator=gen))
        x = (torch.randn(1, v, generator=gen) * 3).round().half()  # ties everywhere
        t = float(torch.empty(1).uniform_(0.2, 2.0, generator=gen))
        k = int(torch.randint(0, v + 2, (1,), generator=gen))
        p = float(torch.empty(1).uniform_(0.05, 1.0, generator=gen)) if v % 3 else 1.0
        mp = float(torch.empty(1).uniform_(0.0, 0.3, generator=gen)) if v % 2 else 0.0
        got = set(kept(x, temperature=t, top_k=k, top_p=p, min_p=mp))
        assert got == oracle_keep(x[0], t, k, p, mp), (v, t, k, p, mp)


def test_samples_come_from_kept_set_and_cover_it():
    gen = torch.Generator().manual_seed(0)
    x = (torch.randn(1, 200, generator=gen) * 2).expand(4000, 200)
    pr = params(4000, temperature=0.9, top_k=20, top_p=0.8, min_p=0.05, seed=42)
    pr = pr[:5] + (torch.arange(4000),)
    out = sample_reference(x, *pr)
    want = oracle_keep(x[0], 0.9, 20, 0.8, 0.05)
    assert 2 <= len(want) < 20 and set(out.tolist()) == want


# -- reproducibility ---------------------------------------------------------------------------------
def test_reproducible_per_seed_and_offset_independent_of_batch():
    gen = torch.Generator().manual_seed(1)
    b, v = 12, 3000
    x = torch.randn(b, v, generator=gen) * 2
    pr = random_sampling_params(b, v, gen)
    out = sample_reference(x, *pr)
    assert torch.equal(out, sample_reference(x.clone(), *[t.clone() for t in pr]))
    perm = torch.randperm(b, generator=gen)
    assert torch.equal(sample_reference(x[perm], *[t[perm] for t in pr]), out[perm])
    for i in (1, 5, 11):  # alone, and inside a batch of strangers
        alone = sample_reference(x[i:i + 1], *[t[i:i + 1] for t in pr])
        assert int(alone) == int(out[i])
    other = torch.randn(5, v, generator=gen)
    po = random_sampling_params(5, v, gen)
    mixed = sample_reference(torch.cat([other, x[3:4]]), *[torch.cat([a, t[3:4]]) for a, t in zip(po, pr)])
    assert int(mixed[-1]) == int(out[3])


def test_seed_and_offset_drive_the_draws():
    x = torch.zeros(1, 1000).expand(64, 1000)  # uniform over 1000 tokens
    by_offset = sample_reference(x, *params(64, seed=9)[:5], torch.arange(64))
    by_seed = sample_reference(x, *params(64)[:4], torch.arange(64) * 7919, torch.zeros(64, dtype=torch.int64))
    same = sample_reference(x, *params(64, seed=9, offset=3))
    assert len(set(by_offset.tolist())) > 55 and len(set(by_seed.tolist())) > 55
    assert len(set(same.tolist())) == 1 and int(same[0]) == int(by_offset[3])


# -- distribution ------------------------------------------------------------------------------------
CHI2_P_MIN = 1e-4  # seeds are fixed, so the outcome is deterministic; a correct sampler fails with
# probability 1e-4 over the choice of seeds. The same draws against a wrong target must give p < 1e-12.
CHI2_LOGITS = [2.0, 1.7, 1.5, 1.2, 1.0, 0.8, 0.5, 0.3, 0.0, -0.5, -1.0, -3.0]


def _chi2_pvalue(counts: torch.Tensor, probs: torch.Tensor) -> float:
    n = float(counts.sum())
    exp = probs.double() * n
    assert float(exp.min()) >= 5, "chi-square needs >= 5 expected draws per bin"
    stat = float(((counts.double() - exp) ** 2 / exp).sum())
    df = len(probs) - 1
    f64 = lambda v: torch.tensor(v, dtype=torch.float64)  # noqa: E731
    return float(torch.special.gammaincc(f64(df / 2), f64(stat / 2)))  # P(chi2_df >= stat)


@pytest.mark.parametrize("cfg,n_kept", [(dict(temperature=1.3), 12), (dict(temperature=1.0, top_k=6), 6),
                                         (dict(temperature=0.8, top_k=9, top_p=0.9, min_p=0.05), 7)],
                         ids=["plain", "top_k", "min_p+top_k+top_p"])
def test_chi_square_against_truncated_distribution(cfg, n_kept):
    n = 100_000
    x = torch.tensor([CHI2_LOGITS]).expand(n, -1)
    pr = list(params(n, seed=2024, **cfg))
    pr[4][n // 2:] = torch.arange(n - n // 2) * 104729 + 17  # half: one stream (offsets), half: many seeds
    pr[5][: n // 2] = torch.arange(n // 2)
    out = sample_reference(x, *pr)
    keep = sorted(oracle_keep(x[0], cfg["temperature"], cfg.get("top_k", 0), cfg.get("top_p", 1.0),
                              cfg.get("min_p", 0.0)))
    counts = torch.bincount(out, minlength=len(CHI2_LOGITS))
    assert set(out.unique().tolist()) == set(keep)
    z = torch.tensor(CHI2_LOGITS, dtype=torch.float64) / cfg["temperature"]
    truncated = torch.softmax(z[keep], 0)
    assert _chi2_pvalue(counts[keep], truncated) >= CHI2_P_MIN
    assert len(keep) == n_kept  # e = p / p_max: 1 .69 .54 .37 .29 .22 .15 .12 .08 | .04 ... at T=0.8: min-p
    # keeps 9, top-k 9 the same 9, top-p 0.9 of their mass (3.45) needs the first 7 (3.25 >= 3.11 > 3.10)
    if n_kept < len(CHI2_LOGITS):
        wrong_counts, wrong = counts, torch.softmax(z, 0)  # the same draws, judged as if untruncated
    else:
        wrong_counts, wrong = counts, torch.softmax(z / 1.1, 0)  # ... or at a 10% higher temperature
    assert _chi2_pvalue(wrong_counts, wrong) < 1e-12  # the test can fail


# -- bad input ---------------------------------------------------------------------------------------
@pytest.mark.parametrize("change,message", [
    (lambda a: a.__setitem__(0, torch.randn(4)), "2-D tensor"),
    (lambda a: a.__setitem__(0, a[0].double()), "dtype torch.float64"),
    (lambda a: a.__setitem__(1, a[1].double()), "temperature must be torch.float32"),
    (lambda a: a.__setitem__(2, a[2].long()), "top_k must be torch.int32"),
    (lambda a: a.__setitem__(6, a[6][:2]), "offset must be torch.int64 [3]"),
    (lambda a: a.__setitem__(5, 7), "seed must be a torch.int64 tensor"),
    (lambda a: a[1].__setitem__(1, -0.5), "temperature must be finite and >= 0 (rows [1])"),
    (lambda a: a[1].__setitem__(2, float("nan")), "temperature must be finite"),
    (lambda a: a[2].__setitem__(0, -1), "top_k must be >= 0"),
    (lambda a: a[3].__setitem__(0, 0.0), "top_p must be in (0, 1]"),
    (lambda a: a[3].__setitem__(2, 1.5), "top_p must be in (0, 1]"),
    (lambda a: a[4].__setitem__(1, 1.01), "min_p must be in [0, 1]"),
    (lambda a: a[0].__setitem__((2, 5), float("nan")), "NaN or +inf (rows [2])"),
    (lambda a: a[0].__setitem__((0, 1), float("inf")), "NaN or +inf (rows [0])"),
])
def test_bad_input_is_a_clear_error(change, message):
    args = [torch.randn(3, 10), *params(3)]
    change(args)
    with pytest.raises(ValueError, match=None) as err:
        ops.sample(*args)
    assert message in str(err.value), str(err.value)


def test_vocab_limit():
    with pytest.raises(ValueError, match="vocab 0 outside"):
        ops.sample(torch.randn(2, 0), *params(2))


# -- admission and the provider's host side ----------------------------------------------------------
def _problem(x, **over):
    p = ops.problem("sample", x, *params(x.shape[0]))
    return dataclasses.replace(p, **{"device": "cuda", "capability": (7, 0), **over})


def test_admission_reasons():
    prov = ops.registry.providers["sample"]["cuda_sample"]
    x = torch.randn(4, 32000, dtype=torch.float16)
    assert prov.supports(_problem(x)) == []
    assert prov.supports(_problem(x.float())) == []
    assert any("Volta has no BF16" in r for r in prov.supports(_problem(x.bfloat16())))
    assert any("not a CUDA GPU" in r for r in prov.supports(dataclasses.replace(_problem(x), device="cpu",
                                                                               capability=None)))
    assert any("capability 6.1 < 7.0" in r for r in prov.supports(_problem(x, capability=(6, 1))))
    assert any("rows not contiguous" in r for r in prov.supports(_problem(x.t().contiguous().t())))
    strided = ops.problem("sample", x, *[torch.stack([t, t], -1)[:, 0] for t in params(4)])
    assert any("parameters (temperature ... offset) not contiguous" in r
               for r in prov.supports(dataclasses.replace(strided, device="cuda", capability=(7, 0))))
    big = dataclasses.replace(_problem(x), params=(("row_contiguous", True), ("vocab", (1 << 20) + 1)))
    assert any("vocab 1048577 > 1048576" in r for r in prov.supports(big))
    sel = ops.registry.select(ops.problem("sample", x, *params(4)))
    assert sel.provider.name == REFERENCE and "cuda_sample" in sel.refused


def test_launch_variants(monkeypatch):
    calls = []
    monkeypatch.setattr(cuda_ops, "_launch", lambda k, grid, block, *a, device: calls.append((k.name, grid, block, a)))
    cases = [(torch.randn(5, 32000, dtype=torch.float16), "sample_f16_v8"),
             (torch.randn(5, 32001, dtype=torch.float16), "sample_f16_v1"),
             (torch.randn(5, 4100, dtype=torch.float16)[:, 1:4097], "sample_f16_v1"),  # rows not 16-byte aligned
             (torch.randn(5, 4104, dtype=torch.float16)[:, 8:], "sample_f16_v8"),  # strided, aligned
             (torch.randn(5, 1000), "sample_f32_v4"), (torch.randn(5, 1001), "sample_f32_v1")]
    for x, name in cases:
        calls.clear()
        pr = params(5)
        out = sampling_ops.sample_cuda(x, *pr)
        assert out.shape == (5,) and out.dtype == torch.int64
        (kname, grid, block, args), = calls
        assert kname == name and grid == (5, 1, 1) and block == (sampling_ops.THREADS, 1, 1)
        assert args[1] == x.data_ptr() and args[8] == x.stride(0) and args[9] == x.shape[1]
        assert args[2:8] == tuple(t.data_ptr() for t in pr)


def test_kernel_source_constants_match():
    """THREADS, the greedy threshold and the mass scale are written twice (Python, CUDA)."""
    src = (sampling_ops.cuda_ops.build.CSRC / "sampling.cu").read_text()
    assert f"#define SAMPLE_THREADS {sampling_ops.THREADS}" in src
    assert "kGreedyBelow = 1e-5f" in src and sampling_ops.GREEDY_BELOW == float(torch.tensor(1e-5))
    assert f"kMassScale = {float(2 ** sampling_ops.MASS_BITS):.1f}f" in src
    assert math.ldexp(1, -23) == 1.1920928955078125e-07 and "kUniformScale = 1.1920928955078125e-07f" in src


# -- GPU: the kernel against the reference, token for token -----------------------------------------
def _gpu_logits(b, v, dtype, gen, ties=False):
    cg = torch.Generator("cuda").manual_seed(int(torch.randint(0, 2**62, (1,), generator=gen)))
    scale = torch.tensor([0.5, 1.0, 2.0, 4.0, 8.0], device="cuda").repeat(b)[:b, None]  # flat .. peaked rows
    x = torch.randn(b, v, generator=cg, device="cuda") * scale
    return (x.round() if ties else x).to(dtype)


def _compare(x, pr, what, steps=3):
    """Kernel vs reference over `steps` consecutive offsets (a request's stream); outputs poisoned."""
    pr = list(pr)
    sampled = 0
    for step in range(steps):
        with cuda_ops.poison_outputs():
            got = sampling_ops.sample_cuda(x, *pr)
        want = sample_reference(x, *pr)
        bad = (got != want).nonzero().flatten().tolist()
        assert not bad, (f"{what} step {step} seed={SEED}: rows {bad[:8]} kernel {got[bad[:8]].tolist()} "
                         f"reference {want[bad[:8]].tolist()}")
        sampled += int((want != torch.argmax(x, -1)).sum())
        pr[5] = pr[5] + 1
    return sampled


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.float16, torch.float32], ids=["fp16", "fp32"])
@pytest.mark.parametrize("v", [1000, 32000, 49152, 128256, 262144])
def test_kernel_matches_reference(v, dtype):
    gen = torch.Generator().manual_seed(SEED + v)
    b = 256 if v in (1000, 262144) else 64
    x = _gpu_logits(b, v, dtype, gen)
    pr = random_sampling_params(b, v, gen, "cuda")
    assert ops.registry.select(ops.problem("sample", x, *pr)).provider.name == "cuda_sample"
    sampled = _compare(x, pr, f"V={v} {dtype}")
    assert sampled >= b // 4, "too few rows drew something other than the argmax: the test would be blind"


@pytest.mark.gpu
@pytest.mark.parametrize("dtype", [torch.float16, torch.float32], ids=["fp16", "fp32"])
def test_kernel_odd_sizes_strides_ties(dtype):
    gen = torch.Generator().manual_seed(SEED)
    for b, v in [(3, 7), (17, 1001), (9, 32001), (5, 128257)]:
        _compare(_gpu_logits(b, v, dtype, gen), random_sampling_params(b, v, gen, "cuda"), f"B={b} V={v}")
    wide = _gpu_logits(33, 4104, dtype, gen)
    # rows unaligned, of odd length, strided but aligned
    for x, wide_loads in ((wide[:, 1:4097], False), (wide[:, 5:], False), (wide[:, 8:], True)):
        assert sampling_ops.sample_variant(x).endswith("_v1") != wide_loads
        _compare(x, random_sampling_params(33, x.shape[1], gen, "cuda"), f"view {tuple(x.shape)} stride {x.stride()}")
    x = _gpu_logits(64, 32000, dtype, gen, ties=True)
    x[3] = float("-inf")
    x[4, :31000] = float("-inf")
    pr = random_sampling_params(64, 32000, gen, "cuda")
    pr[1][:] = torch.tensor([1, 2, 10, 100, 0, 31999, 32000, 7], dtype=torch.int32, device="cuda").repeat(8)
    _compare(x, pr, "ties")
    t = torch.tensor([1e-5, 100.0, 0.9999e-5, 0.05], device="cuda").repeat(16)
    _compare(x, (t, *pr[1:]), "temperature extremes")
    x = torch.full((4, 1000), float("-inf"), dtype=dtype, device="cuda")
    x[:, 10:14] = EXACT.to(dtype).cuda()  # top-p mass exactly at the threshold (fp16 rounds the logs: still compared)
    pr = params(4, top_p=torch.tensor([0.5, 0.75, 0.7500001, 0.25]), seed=3, device="cuda")
    _compare(x, pr, "exact top-p boundary")


@pytest.mark.gpu
def test_kernel_cuda_graph_replay():
    gen = torch.Generator().manual_seed(SEED)
    x = _gpu_logits(8, 32000, torch.float16, gen)
    pr = random_sampling_params(8, 32000, gen, "cuda")
    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):
        ops.sample(x, *pr)  # compiles and loads before capture
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        out = ops.sample(x, *pr)
    for _ in range(3):
        x.copy_(_gpu_logits(8, 32000, torch.float16, gen))
        pr[5].add_(1)
        g.replay()
        torch.cuda.synchronize()
        assert torch.equal(out, sample_reference(x, *pr))
