"""Input generators for every op: small, fresh random calls that cover the shapes providers must
get right (odd sizes, non-multiples of tiles, strided views, GQA, windows, soft-cap, padding).

Each returns list[Case]; tensors are drawn on the CPU from `generator` and moved to `device`.
"""

from __future__ import annotations

import functools
import math

import torch

from . import reference as ref
from .attention_metadata import AttentionMetadata
from .registry import Case
from .weights import GGUFWeight, PackedWeight, RowParts, random_packed


def clone_arg(a):
    """A copy of one op argument that keeps tensor strides (a strided view stays strided)."""
    if isinstance(a, torch.Tensor):
        return torch.empty_strided(a.shape, a.stride(), dtype=a.dtype, device=a.device).copy_(a)
    if isinstance(a, (GGUFWeight, PackedWeight)):
        return a.clone()
    return a


def clone_args(args: tuple) -> tuple:
    return tuple(clone_arg(a) for a in args)


def _randn(gen, *shape, dtype=torch.float16, device="cpu", scale=1.0):
    return (torch.randn(*shape, generator=gen) * scale).to(dtype).to(device)


def rms_norm(dtype, device, gen) -> list[Case]:
    cases = []
    for t, h, res in [(1, 4096, False), (7, 4096, True), (5, 1000, False), (3, 999, True),
                      (2, 8192, True), (4, 40, False)]:
        x = _randn(gen, t, h, dtype=dtype, device=device)
        w = (1 + 0.1 * torch.randn(h, generator=gen)).to(dtype).to(device)
        r = _randn(gen, t, h, dtype=dtype, device=device) if res else None
        cases.append(Case(f"T={t} H={h}{' +res' if res else ''}", (x, w, 1e-6, r)))
    x = _randn(gen, 2, 3, 512, dtype=dtype, device=device)
    cases.append(Case("x[2,3,512]", (x, torch.ones(512, dtype=dtype, device=device), 1e-5, None)))
    return cases


_MAX_POS = 2048


@functools.lru_cache(maxsize=None)
def _cos_sin(d: int, r: int) -> torch.Tensor:
    return ref.rope_cos_sin(d, r, _MAX_POS, 10000.0)


def rotary_embedding(dtype, device, gen) -> list[Case]:
    cases = []
    for t, hq, hk, d, r, neox, fused in [(5, 8, 2, 128, 128, True, False), (3, 4, 4, 64, 64, False, False),
                                         (4, 4, 2, 128, 64, True, False), (3, 2, 1, 64, 32, False, True),
                                         (7, 3, 1, 80, 40, True, True), (1, 32, 8, 128, 128, True, True),
                                         (6, 2, 2, 96, 24, False, False)]:
        cs = _cos_sin(d, r).to(device)
        pos = torch.randint(0, _MAX_POS, (t,), generator=gen).to(device)
        if fused:  # q, k as strided views of one qkv output, as attention layers pass them
            qkv = _randn(gen, t, (hq + 2 * hk) * d, dtype=dtype, device=device)
            q, k = qkv[:, : hq * d], qkv[:, hq * d:(hq + hk) * d]
        else:
            q = _randn(gen, t, hq * d, dtype=dtype, device=device)
            k = _randn(gen, t, hk * d, dtype=dtype, device=device)
        label = f"T={t} Hq={hq} Hk={hk} D={d} r={r} {'neox' if neox else 'gptj'}{' fused' if fused else ''}"
        cases.append(Case(label, (pos, q, k, d, cs, neox)))
    return cases


def _act(dtype, device, gen, extra=()) -> list[Case]:
    cases = []
    for shape in [(1, 2 * 14336), (7, 2 * 1000), (3, 2 * 999), (2, 5, 2 * 256)]:
        x = _randn(gen, *shape, dtype=dtype, device=device, scale=2.0)
        for e in extra or [None]:
            cases.append(Case(f"x{list(shape)}{'' if e is None else ' ' + e}", (x,) + (() if e is None else (e,))))
    return cases


def silu_and_mul(dtype, device, gen) -> list[Case]:
    return _act(dtype, device, gen)


def gelu_and_mul(dtype, device, gen) -> list[Case]:
    return _act(dtype, device, gen, extra=("tanh", "none"))


def linear(dtype, device, gen) -> list[Case]:
    cases = []
    dense = [(1, 1000, 4096, False), (3, 1027, 1024, False), (5, 33, 520, True), (8, 512, 1024, False),
             (13, 96, 4112, True), (16, 256, 2048, False), (1, 64, 1001, False), (20, 64, 256, False)]
    for m, n, k, bias in dense:
        x = _randn(gen, m, k, dtype=dtype, device=device)
        w = _randn(gen, n, k, dtype=dtype, device=device, scale=1 / math.sqrt(k))
        b = _randn(gen, n, dtype=dtype, device=device) if bias else None
        cases.append(Case(f"dense M={m} N={n} K={k}{' +bias' if bias else ''}", (x, w, b)))
    x = _randn(gen, 2, 3, 512, dtype=dtype, device=device)
    cases.append(Case("dense x[2,3,512] N=256", (x, _randn(gen, 256, 512, dtype=dtype, device=device, scale=0.05), None)))
    for m, n, k, t, bias in [(1, 130, 512, "q4_0", False), (5, 67, 256, "q4_1", True), (2, 64, 512, "q4_k", False),
                             (16, 33, 256, "q6_k", False), (3, 40, 96, "q8_0", True), (9, 72, 512, "awq", False),
                             (1, 64, 1024, "awq", True), (12, 70, 512, "q4_0", False),
                             (20, 72, 512, "q4_k", True), (33, 80, 256, "q4_0", False),  # M > 16: the GEMM
                             # M = 1 shapes for K >= 4096 (cuda_ops.gemv_m1_shape): two chunks per row in
                             # flight, an odd chunk count; the prefetching kernels with K past one step
                             (1, 200, 4128, "q4_0", False), (1, 96, 4096, "awq", True),
                             (1, 96, 4352, "q4_k", False), (1, 72, 8448, "q6_k", False), (1, 130, 4096, "q6_k", False)]:
        x = _randn(gen, m, k, dtype=dtype, device=device)
        b = _randn(gen, n, dtype=dtype, device=device) if bias else None
        cases.append(Case(f"packed_{t} M={m} N={n} K={k}{' +bias' if bias else ''}",
                          (x, random_packed(n, k, t, gen, device), b)))
    # one projection's rows in parts of different formats (RowParts: a Q4_K_M qkv's [q | k] in q4_k and v in
    # q6_k; packed parts beside a dense one, M > 16): the row_parts provider, each part through its own
    for m, parts, k, bias in [(1, ((96, "q4_k"), (32, "q6_k")), 512, True),
                              (20, ((64, "q4_0"), (40, "dense"), (33, "q8_0")), 256, False)]:
        x = _randn(gen, m, k, dtype=dtype, device=device)
        w = RowParts(tuple(_weight(gen, n, k, t, dtype, device) for n, t in parts))
        b = _randn(gen, w.shape[0], dtype=dtype, device=device) if bias else None
        label = "+".join(f"{t} {n}" for n, t in parts)
        cases.append(Case(f"row_parts {label} M={m} K={k}{' +bias' if bias else ''}", (x, w, b)))
    for m, n, k, t in [(1, 1001, 4096, "q4_0"), (4, 256, 1056, "q4_0"), (16, 64, 512, "q4_0"),
                       (1, 300, 2048, "q8_0"), (7, 129, 96, "q8_0"), (11, 64, 1024, "q8_0")]:
        x = _randn(gen, m, k, dtype=dtype, device=device)
        cases.append(Case(f"{t} M={m} N={n} K={k}", (x, GGUFWeight.random(n, k, t, gen, device), None)))
    return cases


def _fused_linear_cases(dtype, device, gen, shapes):
    for m, n, k, t in shapes:
        x = _randn(gen, m, k, dtype=dtype, device=device)
        w = (_randn(gen, n, k, dtype=dtype, device=device, scale=1 / math.sqrt(k)) if t == "dense"
             else random_packed(n, k, t, gen, device))
        yield f"{t} M={m} N={n} K={k}", x, w


def rms_norm_linear(dtype, device, gen) -> list[Case]:
    """Normed projections: M = 1 in every packed format (the normed-input GEMV; with and without a
    residual, a bias, the GLU with odd row counts per half, K not a multiple of the 128-thread
    prologue), batches and a dense weight (the unfused route)."""
    shapes = [(1, 130, 512, "q4_0"), (1, 66, 256, "q4_1"), (1, 96, 512, "q4_k"), (1, 34, 256, "q6_k"),
              (1, 40, 96, "q8_0"), (1, 72, 512, "awq"), (1, 960, 576, "q4_1"), (1, 2 * 1536, 576, "q4_1"),
              (1, 96, 4096, "q4_0"), (3, 64, 256, "q4_0"), (20, 72, 512, "q4_k"), (2, 64, 96, "dense"),
              (1, 2 * 8200, 1056, "q4_0"), (1, 8320, 256, "q4_k"),  # N > 8192: the one-K-warp instances
              (1, 4100, 512, "q4_0"), (1, 4104, 512, "q4_0")]  # 8-warp blocks, a partial last one
    cases = []
    for i, (name, x, w) in enumerate(_fused_linear_cases(dtype, device, gen, shapes)):
        k = x.shape[-1]
        nw = (1 + 0.1 * torch.randn(k, generator=gen)).to(dtype).to(device)
        res = _randn(gen, *x.shape, dtype=dtype, device=device) if i % 3 != 1 else None
        act = "silu_and_mul" if i % 2 == 0 and w.shape[0] % 2 == 0 else None
        bias = _randn(gen, w.shape[0], dtype=dtype, device=device) if i % 4 == 3 and act is None else None
        tag = f"{name}{' res' if res is not None else ''}{' glu' if act else ''}{' bias' if bias is not None else ''}"
        cases.append(Case(tag, (x, nw, 1e-5, w, res, bias, act)))
    return cases


def _weight(gen, n, k, fmt, dtype, device):
    return (_randn(gen, n, k, dtype=dtype, device=device, scale=1 / math.sqrt(k)) if fmt == "dense"
            else random_packed(n, k, fmt, gen, device))


def linear_rms_norm_linear(dtype, device, gen) -> list[Case]:
    """o_proj, then the post-attention norm and gate_up: 3..64 rows in the register-direct formats (the _norm /
    RowNorm GEMMs: one-row tiles, 32-row tiles, a long K split 8 ways, 33..64 rows on the wgmma tiles), and
    one row in q4_k (the joined GEMVs: short and long rows in front, gate_up of <= and > 8192 rows behind), one row
    in q4_0, two rows, a dense weight, another format and no activation (the unfused route)."""
    cases = []
    for m, h, k, i, fin, fout, act in [
            (5, 256, 512, 128, "q4_0", "q4_0", True), (32, 512, 1024, 256, "q4_k", "q4_0", True),
            (20, 256, 8192, 256, "q4_0", "q6_k", True), (64, 512, 512, 256, "awq", "q4_0", True),
            (40, 256, 8192, 8192, "q4_0", "q4_0", True),
            (1, 256, 512, 128, "q4_0", "q4_0", True), (1, 256, 4096, 128, "q4_k", "q4_k", True),
            (1, 512, 1024, 256, "q4_k", "q4_k", True), (1, 256, 512, 4608, "q4_k", "q4_k", True),
            (2, 128, 256, 64, "q4_1", "q4_0", True),
            (4, 128, 128, 64, "dense", "dense", True), (6, 256, 256, 128, "q4_0", "q4_0", False)]:
        x = _randn(gen, m, k, dtype=dtype, device=device)
        res = _randn(gen, m, h, dtype=dtype, device=device)
        nw = (1 + 0.1 * torch.randn(h, generator=gen)).to(dtype).to(device)
        w_in, w = _weight(gen, h, k, fin, dtype, device), _weight(gen, 2 * i, h, fout, dtype, device)
        label = f"M={m} in {fin} {h}x{k} out {fout} {2 * i}x{h}{' glu' if act else ''}"
        cases.append(Case(label, (x, w_in, res, nw, 1e-5, w, None, "silu_and_mul" if act else None)))
    return cases


def linear_rms_norm_qkv_rotary_cache(dtype, device, gen) -> list[Case]:
    """down, then the next layer's input norm, qkv, rotary and cache write: 3..64 rows in the register-direct
    formats with GPT-J rotary (full and partial, a padding slot, a long K split 8 ways, 33..64 rows); one row in
    q4_k (the joined GEMVs: GPT-J full and partial, NeoX); one row in q4_0, NeoX batches and a dense weight (the
    unfused route)."""
    cases = []
    for t, hq, hk, d, r, neox, fin, fw, k, pad in [
            (5, 8, 2, 64, 64, False, "q4_0", "q4_0", 512, True), (24, 4, 2, 128, 64, False, "q4_k", "q4_k", 1024, False),
            (40, 8, 2, 64, 64, False, "q4_0", "q6_k", 8192, True), (17, 4, 4, 64, 32, False, "awq", "q4_0", 512, False),
            (6, 4, 2, 64, 64, True, "q4_0", "q4_0", 512, False), (1, 8, 2, 64, 64, False, "q4_0", "q4_0", 512, False),
            (1, 4, 2, 128, 64, False, "q4_k", "q4_k", 4096, False), (1, 8, 2, 64, 64, True, "q4_k", "q4_k", 4096, False),
            (1, 8, 2, 64, 32, False, "q4_k", "q4_k", 1024, False),
            (3, 4, 2, 32, 32, False, "dense", "dense", 256, False)]:
        h, n = 256, (hq + 2 * hk) * d
        x = _randn(gen, t, k, dtype=dtype, device=device)
        res = _randn(gen, t, h, dtype=dtype, device=device)
        nw = (1 + 0.1 * torch.randn(h, generator=gen)).to(dtype).to(device)
        w_in, w = _weight(gen, h, k, fin, dtype, device), _weight(gen, n, h, fw, dtype, device)
        pos = torch.randint(0, _MAX_POS, (t,), generator=gen).to(device)
        nb, bs = 5, 16
        kc = _randn(gen, nb, bs, hk, d, dtype=dtype, device=device)
        vc = _randn(gen, nb, bs, hk, d, dtype=dtype, device=device)
        slots = torch.randperm(nb * bs, generator=gen)[:t]
        if pad:
            slots[1] = -1  # padding: q rotated, caches untouched
        label = (f"M={t} in {fin} {h}x{k} qkv {fw} Hq={hq} Hk={hk} D={d} r={r} {'neox' if neox else 'gptj'}"
                 f"{' pad' if pad else ''}")
        cases.append(Case(label, (x, w_in, res, nw, 1e-5, w, None, pos, d, _cos_sin(d, r).to(device), neox, kc, vc,
                                  slots.to(device), hq, hk)))
    return cases


def rotary_and_cache(dtype, device, gen) -> list[Case]:
    cases = []
    for t, hq, hk, d, r, neox, bs in [(5, 8, 2, 128, 128, True, 16), (3, 9, 3, 64, 64, False, 16),
                                      (4, 4, 2, 128, 64, True, 8), (7, 3, 1, 80, 40, True, 16),
                                      (1, 32, 8, 128, 128, True, 32), (6, 2, 2, 96, 24, False, 16)]:
        cs = _cos_sin(d, r).to(device)
        pos = torch.randint(0, _MAX_POS, (t,), generator=gen).to(device)
        qkv = _randn(gen, t, (hq + 2 * hk) * d, dtype=dtype, device=device)  # views of one projection
        q, k, v = qkv[:, : hq * d], qkv[:, hq * d:(hq + hk) * d], qkv[:, (hq + hk) * d:]
        nb = 9
        kc = _randn(gen, nb, bs, hk, d, dtype=dtype, device=device)
        vc = _randn(gen, nb, bs, hk, d, dtype=dtype, device=device)
        slots = torch.randperm(nb * bs, generator=gen)[:t]
        if t > 2:
            slots[1] = -1  # padding token: q rotated, caches untouched
        label = f"T={t} Hq={hq} Hk={hk} D={d} r={r} {'neox' if neox else 'gptj'} bs={bs}"
        cases.append(Case(label, (pos, q, k, v, d, cs, neox, kc, vc, slots.to(device))))
    return cases


def rms_norm_qkv_rotary_cache(dtype, device, gen) -> list[Case]:
    """An attention layer's input: M = 1 in packed formats (the normed-input GEMV with rotary and the
    cache write; GPT-J and NeoX (R = 4 and, q6_k, 2 rows per warp), partial rotary, a bias, a padding
    slot, no residual), a batch and a dense weight (the unfused route)."""
    cases = []
    for t, hq, hk, d, r, neox, fmt, extra in [
            (1, 9, 3, 64, 64, False, "q4_1", "res"), (1, 8, 2, 128, 128, False, "q4_0", ""),
            (1, 4, 2, 128, 64, False, "q4_k", "res bias"), (1, 6, 2, 64, 64, False, "q8_0", "res pad"),
            (1, 4, 1, 64, 32, False, "q6_k", "res"), (1, 4, 2, 128, 128, False, "awq", "res"),
            (1, 8, 2, 64, 64, True, "q4_0", "res"), (1, 4, 2, 128, 64, True, "q4_k", "res bias pad"),
            (1, 4, 1, 64, 32, True, "q6_k", "res"), (1, 6, 2, 96, 48, True, "awq", ""),
            (3, 9, 3, 64, 64, False, "q4_1", "res"),
            (1, 32, 8, 128, 128, False, "q4_0", "res pad"), (1, 32, 8, 128, 64, True, "q4_0", "res"),  # 6144 rows
            (2, 4, 2, 32, 32, False, "dense", "res")]:
        n, k = (hq + 2 * hk) * d, 512
        x = _randn(gen, t, k, dtype=dtype, device=device)
        w = (_randn(gen, n, k, dtype=dtype, device=device, scale=1 / math.sqrt(k)) if fmt == "dense"
             else random_packed(n, k, fmt, gen, device))
        nw = (1 + 0.1 * torch.randn(k, generator=gen)).to(dtype).to(device)
        res = _randn(gen, t, k, dtype=dtype, device=device) if "res" in extra else None
        bias = _randn(gen, n, dtype=dtype, device=device) if "bias" in extra else None
        pos = torch.randint(0, _MAX_POS, (t,), generator=gen).to(device)
        nb, bs = 5, 16
        kc = _randn(gen, nb, bs, hk, d, dtype=dtype, device=device)
        vc = _randn(gen, nb, bs, hk, d, dtype=dtype, device=device)
        slots = torch.randperm(nb * bs, generator=gen)[:t]
        if "pad" in extra:
            slots[0] = -1  # padding: q rotated, caches untouched
        label = f"{fmt} M={t} Hq={hq} Hk={hk} D={d} r={r} {'neox' if neox else 'gptj'} {extra}".rstrip()
        cases.append(Case(label, (x, nw, 1e-5, w, res, bias, pos, d, _cos_sin(d, r).to(device), neox, kc, vc,
                                  slots.to(device), hq, hk)))
    return cases


def reshape_and_cache(dtype, device, gen) -> list[Case]:
    cases = []
    for t, hk, d, fused in [(5, 2, 128, False), (3, 8, 64, True), (4, 1, 36, False), (1, 4, 128, True)]:
        nb, bs = 9, 16
        kc = _randn(gen, nb, bs, hk, d, dtype=dtype, device=device)
        vc = _randn(gen, nb, bs, hk, d, dtype=dtype, device=device)
        if fused:  # key/value as views of one [T, 2, Hk, D] projection output
            kv = _randn(gen, t, 2, hk, d, dtype=dtype, device=device)
            key, value = kv[:, 0], kv[:, 1]
        else:
            key = _randn(gen, t, hk, d, dtype=dtype, device=device)
            value = _randn(gen, t, hk, d, dtype=dtype, device=device)
        slots = torch.randperm(nb * bs, generator=gen)[:t]
        if t > 2:
            slots[1] = -1  # padding token
        cases.append(Case(f"T={t} Hk={hk} D={d}{' fused' if fused else ''}",
                          (key, value, kc, vc, slots.to(device))))
    return cases


def paged_metadata(q_lens, seq_lens, block_size, num_blocks, gen, device="cpu") -> AttentionMetadata:
    """Metadata for requests with the given new-token and total lengths, on randomly chosen blocks."""
    need = [(s + block_size - 1) // block_size for s in seq_lens]
    perm = torch.randperm(num_blocks, generator=gen)
    tables = torch.zeros(len(seq_lens), max(need), dtype=torch.int32)
    slots, used = [], 0
    for i, (q, s, n) in enumerate(zip(q_lens, seq_lens, need)):
        tables[i, :n] = perm[used:used + n].int()
        used += n
        for pos in range(s - q, s):
            slots.append(int(tables[i, pos // block_size]) * block_size + pos % block_size)
    qsl = [0]
    for q in q_lens:
        qsl.append(qsl[-1] + q)
    return AttentionMetadata(
        query_start_loc=torch.tensor(qsl, dtype=torch.int32, device=device),
        seq_lens=torch.tensor(seq_lens, dtype=torch.int32, device=device),
        block_tables=tables.to(device), slot_mapping=torch.tensor(slots, dtype=torch.int64, device=device),
        query_start_loc_cpu=qsl, seq_lens_cpu=list(seq_lens), max_query_len=max(q_lens),
        max_seq_len=max(seq_lens))


def paged_attention(dtype, device, gen) -> list[Case]:
    cases = []
    for label, q_lens, seq_lens, hq, hk, d, window, cap in [
        ("decode", [1, 1, 1], [37, 5, 64], 8, 8, 64, None, None),
        ("decode GQA 4", [1, 1], [100, 17], 8, 2, 128, None, None),
        ("mixed prefill", [5, 1, 3], [5, 40, 19], 4, 2, 64, None, None),
        ("sliding window 7", [4, 1], [30, 12], 4, 1, 64, 7, None),
        ("soft-cap 30", [2, 1], [20, 33], 2, 2, 128, None, 30.0),
    ]:
        bs, nb = 16, 32
        md = paged_metadata(q_lens, seq_lens, bs, nb, gen, device)
        q = _randn(gen, sum(q_lens), hq, d, dtype=dtype, device=device)
        kc = _randn(gen, nb, bs, hk, d, dtype=dtype, device=device)
        vc = _randn(gen, nb, bs, hk, d, dtype=dtype, device=device)
        cases.append(Case(label, (q, kc, vc, md, 1 / math.sqrt(d), window, cap)))
    return cases


def argmax(dtype, device, gen) -> list[Case]:
    cases = []
    for b, v in [(1, 128256), (4, 32000), (3, 1001), (2, 7)]:
        x = _randn(gen, b, v, dtype=dtype, device=device, scale=3.0)
        cases.append(Case(f"B={b} V={v}", (x,)))
    x = _randn(gen, 2, 4096, dtype=dtype, device=device)
    x[0, 100] = x[0, 3000] = 50.0  # tie: the first index wins
    cases.append(Case("tie B=2 V=4096", (x,)))
    x = _randn(gen, 2, 49152, dtype=dtype, device=device)
    x[0, 40000] = x[0, 9000] = 50.0  # a tie across the split kernel's chunks
    x[1, 30001] = float("nan")  # NaN counts as the largest (torch.argmax)
    cases.append(Case("split tie / NaN B=2 V=49152", (x,)))
    cases.append(Case("split odd B=5 V=50001", (_randn(gen, 5, 50001, dtype=dtype, device=device, scale=3.0),)))
    return cases


def embedding(dtype, device, gen) -> list[Case]:
    """Tables dense (in `dtype`) and in every packed format (and raw GGUF blocks), ids with repeats
    and both ends of the vocabulary."""
    cases = []
    for t, n, k in [("dense", 1000, 576), ("q8_0", 1000, 576), ("q4_0", 300, 4096), ("q4_1", 257, 96),
                    ("q4_k", 129, 512), ("q6_k", 64, 768), ("gguf_q4_0", 70, 64)]:
        if t == "dense":
            w = _randn(gen, n, k, dtype=dtype, device=device)
        elif t.startswith("gguf_"):
            w = GGUFWeight.random(n, k, t[5:], gen, device)
        else:
            w = random_packed(n, k, t, gen, device)
        ids = torch.cat([torch.tensor([0, n - 1, 0]), torch.randint(0, n, (4,), generator=gen)]).to(device)
        cases.append(Case(f"{t} N={n} K={k} T={len(ids)}", (w, ids, dtype)))
    w = random_packed(4096, 576, "q8_0", gen, device)  # a decode step: one token, the last row
    cases.append(Case("q8_0 N=4096 K=576 T=1", (w, torch.tensor([4095], device=device), dtype)))
    return cases
