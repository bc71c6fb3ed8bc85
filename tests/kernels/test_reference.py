"""The torch references: every declared op runs on generated CPU inputs within its own fp16
tolerance of a float32 evaluation, and hand checks of the semantics (rms_norm formula, NeoX vs
GPT-J rotary, paged attention vs dense causal SDPA, GGUF dequantization, argmax ties)."""

from __future__ import annotations

import math

import pytest
import torch
import torch.nn.functional as F

from onecat.kernels import GGUFWeight, ops
from onecat.kernels import reference as ref
from onecat.kernels.inputs import clone_arg, paged_metadata
from onecat.kernels.registry import REFERENCE, Case
from onecat.kernels.weights import RowParts


def rel_err(out: torch.Tensor, want: torch.Tensor) -> float:
    out, want = out.double(), want.double()
    return float((out - want).norm() / want.norm().clamp_min(1e-30))


def _upcast(x):
    if isinstance(x, torch.Tensor) and x.is_floating_point() and x.dtype != torch.float32:
        return x.float()
    if isinstance(x, tuple):
        return tuple(_upcast(v) for v in x)
    return x


# ops whose `unfused` provider (other ops in sequence, each through its own admitted provider) runs on the CPU too,
# so the runtime selections name each projection (linear_norm_ops): it must give the reference's bits there
CPU_COMPOSED = {"linear_rms_norm_linear", "linear_rms_norm_qkv_rotary_cache"}


def _cpu_provider(op: str, args: tuple) -> str:
    """What ops.<op> runs on the CPU: the composed ops' `unfused`, linear's `row_parts` for a RowParts (each part
    through the reference), else the reference."""
    if op in CPU_COMPOSED:
        return "unfused"
    return "row_parts" if op == "linear" and isinstance(args[1], RowParts) else REFERENCE


@pytest.mark.parametrize("op", sorted(ops.registry.ops))
@pytest.mark.parametrize("dtype", [torch.float16, torch.bfloat16, torch.float32])
def test_every_reference_runs(op, dtype):
    """Generated inputs -> reference on CPU: right dtype, finite, inputs untouched, and through
    `ops.<op>` (which admits the reference on CPU) the very same result."""
    spec = ops.registry.ops[op]
    assert spec.make_inputs is not None and dtype.__repr__().split(".")[-1] in spec.tolerances
    cases = spec.make_inputs(dtype, "cpu", torch.Generator().manual_seed(0))
    assert len(cases) >= 4 and all(isinstance(c, Case) for c in cases)
    for case in cases:
        before = [clone_arg(a) for a in case.args]
        args = tuple(clone_arg(a) for a in case.args)
        outs = spec.tensors_out(Case(case.label, args), spec.reference(*args, **case.kwargs))
        for o in outs:
            assert o.dtype in (dtype, torch.int64), case.label
            if o.is_floating_point():
                assert torch.isfinite(o).all(), case.label
        if op != "reshape_and_cache":
            for a, b in zip(case.args, before):
                if isinstance(a, torch.Tensor):
                    same = torch.equal(a, b) or (a.is_floating_point() and a.shape == b.shape and torch.allclose(
                        a, b, rtol=0, atol=0, equal_nan=True))  # inputs may hold NaN on purpose (argmax)
                    assert same, f"{case.label}: reference modified an input"
        args2 = tuple(clone_arg(a) for a in case.args)
        assert ops.registry.select(ops.problem(op, *args2)).provider.name == _cpu_provider(op, args2)
        outs2 = spec.tensors_out(Case(case.label, args2), getattr(ops, op)(*args2, **case.kwargs))
        for a, b in zip(outs, outs2):
            assert torch.equal(a, b), case.label


@pytest.mark.parametrize("threads", [1, 8])
def test_row_parts_reference_is_the_route_bit_for_bit_at_any_thread_count(threads):
    """A RowParts projection: the reference and the CPU route (row_parts, each part through the reference) give the
    same bits however many threads the CPU BLAS uses, and the whole decoded product within FP32 rounding. The
    reference once took one product over the decoded concatenation: MKL then summed a part's rows in another order
    from 4 threads up (s43: test_every_reference_runs failed on the GPU machine's 16-core CPU, not on 2-core CI)."""
    spec, saved = ops.registry.ops["linear"], torch.get_num_threads()
    torch.set_num_threads(threads)
    try:
        cases = [c for c in spec.make_inputs(torch.float32, "cpu", torch.Generator().manual_seed(0))
                 if isinstance(c.args[1], RowParts)]
        assert len(cases) >= 2
        for case in cases:
            x, w, *rest = case.args
            bias = rest[0] if rest else None
            want = ref.linear(x, w, bias)
            assert torch.equal(ops.linear(x, w, bias), want), case.label
            whole = F.linear(x, w.dequantize(torch.float32), bias)
            torch.testing.assert_close(want, whole, rtol=1e-5, atol=1e-5, msg=case.label)
    finally:
        torch.set_num_threads(saved)


@pytest.mark.parametrize("op", sorted(ops.registry.ops))
def test_fp16_reference_within_tolerance_of_fp32(op):
    """The op's float16 tolerance admits the float16 reference itself, measured against a float32
    evaluation of the same inputs (so a GPU kernel as exact as the reference passes)."""
    spec = ops.registry.ops[op]
    tol = spec.tolerances["float16"]
    for case in spec.make_inputs(torch.float16, "cpu", torch.Generator().manual_seed(1)):
        a16 = tuple(clone_arg(a) for a in case.args)
        a32 = tuple(_upcast(clone_arg(a)) for a in case.args)
        o16 = spec.tensors_out(Case(case.label, a16), spec.reference(*a16, **case.kwargs))
        o32 = spec.tensors_out(Case(case.label, a32), spec.reference(*a32, **case.kwargs))
        for x, y in zip(o16, o32):
            if tol == 0:
                assert torch.equal(x.to(y.dtype), y), case.label
            else:
                assert rel_err(x, y) <= tol, (case.label, rel_err(x, y), tol)


def test_rms_norm_formula():
    x = torch.tensor([[1.0, 2.0, 3.0, 4.0], [0.5, -0.5, 0.0, 2.0]])
    w = torch.tensor([1.0, 1.0, 2.0, 0.5])
    want = torch.stack([x[i] / math.sqrt(sum(v * v for v in x[i].tolist()) / 4 + 1e-6) * w for i in range(2)])
    torch.testing.assert_close(ref.rms_norm(x, w, 1e-6), want)
    r = torch.tensor([[1.0, 0.0, -1.0, 0.0], [0.0, 0.0, 1.0, 1.0]])
    y, new_res = ref.rms_norm(x, w, 1e-6, r)
    torch.testing.assert_close(new_res, x + r)
    torch.testing.assert_close(y, ref.rms_norm(x + r, w, 1e-6))
    y16, res16 = ref.rms_norm(x.half(), w.half(), 1e-6, r.half())
    assert y16.dtype == res16.dtype == torch.float16


def _rope_hand(x, pos, base, neox):
    """One head, rotary_dim = head_dim = len(x), written out pair by pair."""
    d = len(x)
    out = list(x)
    for j in range(d // 2):
        theta = pos * base ** (-2 * j / d)
        a, b = (j, j + d // 2) if neox else (2 * j, 2 * j + 1)
        out[a] = x[a] * math.cos(theta) - x[b] * math.sin(theta)
        out[b] = x[b] * math.cos(theta) + x[a] * math.sin(theta)
    return out


@pytest.mark.parametrize("neox", [True, False])
def test_rotary_known_vectors(neox):
    x = [1.0, 2.0, 3.0, 4.0, -1.0, 0.5, 0.25, 2.0]
    cs = ref.rope_cos_sin(8, 8, 16, 100.0)
    pos = torch.tensor([0, 3, 7])
    q = torch.tensor([x] * 3)
    qo, ko = ref.rotary_embedding(pos, q, q.clone(), 8, cs, is_neox=neox)
    torch.testing.assert_close(qo[0], q[0])  # position 0 is the identity
    for i, p in enumerate(pos.tolist()):
        torch.testing.assert_close(qo[i], torch.tensor(_rope_hand(x, p, 100.0, neox)), atol=1e-6, rtol=1e-5)
    torch.testing.assert_close(ko, qo)


def test_rotary_neox_is_gptj_on_permuted_dims():
    gen = torch.Generator().manual_seed(0)
    d = 16
    cs = ref.rope_cos_sin(d, d, 32, 10000.0)
    pos = torch.randint(0, 32, (5,), generator=gen)
    q, k = torch.randn(5, 2 * d, generator=gen), torch.randn(5, d, generator=gen)
    perm = torch.cat([torch.arange(0, d, 2), torch.arange(1, d, 2)])  # interleaved -> halves
    ph = lambda t: t.view(5, -1, d)[..., perm].reshape(5, -1)  # noqa: E731
    qn, kn = ref.rotary_embedding(pos, ph(q), ph(k), d, cs, is_neox=True)
    qg, kg = ref.rotary_embedding(pos, q, k, d, cs, is_neox=False)
    torch.testing.assert_close(qn, ph(qg))
    torch.testing.assert_close(kn, ph(kg))


def test_rotary_partial_leaves_tail():
    gen = torch.Generator().manual_seed(0)
    q, k = torch.randn(3, 2 * 64, generator=gen), torch.randn(3, 64, generator=gen)
    cs = ref.rope_cos_sin(64, 32, 16, 10000.0)
    pos = torch.tensor([1, 5, 9])
    for neox in (True, False):
        qo, ko = ref.rotary_embedding(pos, q, k, 64, cs, neox)
        torch.testing.assert_close(qo.view(3, 2, 64)[..., 32:], q.view(3, 2, 64)[..., 32:])
        full = ref.rotary_embedding(pos, q.view(6, 64)[:, :32].reshape(3, 64), k[:, :32], 32, cs, neox)[0]
        torch.testing.assert_close(qo.view(3, 2, 64)[..., :32].reshape(3, 64), full)


def _dense_reference(q, k, v, scale, window=None, cap=None):
    """q [Tq, H, D] (the last Tq positions of the sequence), k/v [ctx, H, D]: causal, float32."""
    tq, ctx = q.shape[0], k.shape[0]
    qpos = torch.arange(ctx - tq, ctx)[:, None]
    kpos = torch.arange(ctx)[None, :]
    mask = kpos <= qpos
    if window:
        mask &= kpos > qpos - window
    if cap is None:
        out = F.scaled_dot_product_attention(q.transpose(0, 1), k.transpose(0, 1), v.transpose(0, 1),
                                             attn_mask=mask, scale=scale)
        return out.transpose(0, 1)
    s = torch.einsum("qhd,khd->hqk", q, k) * scale
    s = cap * torch.tanh(s / cap)
    p = torch.softmax(s.masked_fill(~mask, -math.inf), dim=-1)
    return torch.einsum("hqk,khd->qhd", p, v)


@pytest.mark.parametrize("q_lens,seq_lens,hq,hk,window,cap", [
    ([1, 1, 1], [37, 5, 64], 4, 4, None, None),
    ([5, 1, 3], [5, 40, 19], 8, 2, None, None),  # prefill + decode, GQA 4
    ([4, 2], [30, 12], 4, 1, 7, None),  # MQA, sliding window
    ([3, 1], [20, 33], 2, 2, None, 30.0),  # soft-cap
    ([6], [6], 6, 3, 3, 5.0),  # all at once
])
def test_paged_attention_vs_dense(q_lens, seq_lens, hq, hk, window, cap):
    gen = torch.Generator().manual_seed(sum(seq_lens))
    d, bs, nb = 32, 8, 40
    md = paged_metadata(q_lens, seq_lens, bs, nb, gen)
    kc = torch.full((nb, bs, hk, d), float("nan"))  # unused slots must never be read
    vc = torch.full((nb, bs, hk, d), float("nan"))
    ks = [torch.randn(s, hk, d, generator=gen) for s in seq_lens]
    vs = [torch.randn(s, hk, d, generator=gen) for s in seq_lens]
    for i, s in enumerate(seq_lens):  # fill each request's cache through its block table
        slots = torch.tensor([int(md.block_tables[i, p // bs]) * bs + p % bs for p in range(s)])
        ref.reshape_and_cache(ks[i], vs[i], kc, vc, slots)
    q = torch.randn(sum(q_lens), hq, d, generator=gen)
    out = ref.paged_attention(q, kc, vc, md, 1 / math.sqrt(d), window, cap)
    g = hq // hk
    for i, (qs, qe) in enumerate(zip(md.query_start_loc_cpu, md.query_start_loc_cpu[1:])):
        want = _dense_reference(q[qs:qe], ks[i].repeat_interleave(g, 1), vs[i].repeat_interleave(g, 1),
                                1 / math.sqrt(d), window, cap)
        torch.testing.assert_close(out[qs:qe], want, atol=2e-5, rtol=1e-4)


def test_mixed_step_runs_decode_rows_and_prompts_as_two_problems(monkeypatch):
    """ops.paged_attention splits a mixed step (decode/verify rows ahead of prompt chunks) into a
    decode problem and a prefill problem; the outputs are the one-batch reference's, row for row."""
    gen = torch.Generator().manual_seed(3)
    q_lens, seq_lens, hq, hk, d, bs, nb = [1, 3, 1, 40, 1, 25], [50, 20, 9, 40, 70, 33], 4, 2, 32, 8, 48
    md = paged_metadata(q_lens, seq_lens, bs, nb, gen)
    kc, vc = torch.randn(nb, bs, hk, d, generator=gen), torch.randn(nb, bs, hk, d, generator=gen)
    q = torch.randn(sum(q_lens), hq, d, generator=gen)
    seen = []
    select = ops.registry.select
    monkeypatch.setattr(ops.registry, "select", lambda p: seen.append((p.op, p.param("phase"))) or select(p))
    got = ops.paged_attention(q, kc, vc, md, 0.2, None, 10.0)
    assert seen == [("paged_attention", "verify"), ("paged_attention", "prefill")]
    assert md.num_leading_decodes == 3
    head, tail = md.split(3)
    assert head.query_start_loc_cpu == [0, 1, 4, 5] and tail.query_start_loc_cpu == [0, 40, 41, 66]
    assert tail.query_start_loc.tolist() == [0, 40, 41, 66] and tail.seq_lens.tolist() == [40, 70, 33]
    assert (head.max_query_len, tail.max_query_len, tail.max_seq_len) == (3, 40, 70)
    assert md.split(3) is md.split(3)  # made once per step, whatever the number of layers
    torch.testing.assert_close(got, ref.paged_attention(q, kc, vc, md, 0.2, None, 10.0), rtol=0, atol=0)
    seen.clear()
    ops.paged_attention(q[5:], kc, vc, tail, 0.2)  # a prompt first: one problem, as before
    assert seen == [("paged_attention", "prefill")]


def test_reshape_and_cache_slots_and_padding():
    kc, vc = torch.zeros(3, 4, 2, 8), torch.zeros(3, 4, 2, 8)
    key, value = torch.randn(3, 2, 8), torch.randn(3, 2, 8)
    ref.reshape_and_cache(key, value, kc, vc, torch.tensor([5, -1, 11]))
    torch.testing.assert_close(kc[1, 1], key[0])
    torch.testing.assert_close(vc[2, 3], value[2])
    assert kc.count_nonzero() == 2 * 2 * 8  # the padding token wrote nothing


def test_gguf_blocks_by_hand():
    d = torch.tensor([0.5], dtype=torch.float16).view(torch.uint8)
    qs = torch.tensor([0x10 * (j % 16) + j % 16 for j in range(16)], dtype=torch.uint8)  # lo = hi = j
    w = GGUFWeight(torch.cat([d, qs]).view(1, 18), "q4_0", (1, 32))
    want = torch.tensor([(j % 16 - 8) * 0.5 for j in range(16)] * 2)
    torch.testing.assert_close(w.dequantize()[0], want)
    q8 = torch.arange(-16, 16, dtype=torch.int8).view(torch.uint8)
    w8 = GGUFWeight(torch.cat([d, q8]).view(1, 34), "q8_0", (1, 32))
    torch.testing.assert_close(w8.dequantize()[0], torch.arange(-16, 16).float() * 0.5)
    assert w.format == "gguf_q4_0" and w8.format == "gguf_q8_0" and w.shape == (1, 32)
    with pytest.raises(ValueError):
        GGUFWeight(torch.zeros(1, 17, dtype=torch.uint8), "q4_0", (1, 32))


@pytest.mark.parametrize("ggml_type", ["q4_0", "q8_0"])
def test_gguf_dequantize_matches_gguf_py(ggml_type):
    gguf = pytest.importorskip("gguf")
    w = GGUFWeight.random(7, 96, ggml_type, torch.Generator().manual_seed(0))
    qt = getattr(gguf.GGMLQuantizationType, ggml_type.upper())
    want = gguf.quants.dequantize(w.raw.numpy(), qt)
    torch.testing.assert_close(w.dequantize(), torch.from_numpy(want).float().reshape(7, 96))
    x = torch.randn(3, 96, dtype=torch.float64)
    y = ref.linear(x, w)
    torch.testing.assert_close(y, x @ torch.from_numpy(want).double().reshape(7, 96).T)


def test_argmax_first_on_ties():
    x = torch.tensor([[1.0, 3.0, 3.0, 2.0], [0.0, -1.0, 0.0, -2.0]], dtype=torch.float16)
    assert ref.argmax(x).tolist() == [1, 0]
    assert ref.argmax(x[0]).item() == 1 and ref.argmax(x).dtype == torch.int64


# -- packed weights (weights.PackedWeight): bit-exact with the original formats' decode ----------
@pytest.mark.parametrize("ggml_type", ["q4_0", "q4_1", "q8_0", "q4_k", "q6_k"])
def test_packed_gguf_bit_exact(ggml_type):
    from onecat.kernels.weights import pack
    quant = pytest.importorskip("onecat.quant")
    w = GGUFWeight.random(6, 512, ggml_type, torch.Generator().manual_seed(3))
    want = quant.ggml.dequantize(w.raw, (6, 512), ggml_type.upper())
    p = pack(w)
    assert p.format == f"packed_{ggml_type}" and p.shape == (6, 512)
    assert torch.equal(w.dequantize(), want) and torch.equal(p.dequantize(), want)
    gguf = pytest.importorskip("gguf")
    qt = getattr(gguf.GGMLQuantizationType, ggml_type.upper())
    g = torch.from_numpy(gguf.quants.dequantize(w.raw.numpy(), qt)).float().reshape(6, 512)
    assert torch.equal(p.dequantize(), g)
    x = torch.randn(3, 512, dtype=torch.float64)
    torch.testing.assert_close(ref.linear(x, p), x @ want.double().T)


def test_packed_awq_bit_exact():
    from onecat.kernels.weights import pack_awq, random_awq
    int4 = pytest.importorskip("onecat.quant.int4")
    gen = torch.Generator().manual_seed(4)
    t = int4.awq_quantize(torch.randn(24, 256, generator=gen) * 0.05, group_size=128)
    for qw, qz, s in [(t["qweight"], t["qzeros"], t["scales"]), random_awq(16, 384, 128, gen)]:
        want = int4.awq_dequantize(qw, qz, s, group_size=128)
        assert torch.equal(pack_awq(qw, qz, s, 128).dequantize(), want)


@pytest.mark.parametrize("kind", ["gguf_q4_0", "q4_1", "q6_k", "awq"])
def test_select_rows_and_embedding_rows(kind):
    """PackedWeight / GGUFWeight.select_rows (a slice or int64 ids, repeats allowed) decode to the
    whole matrix's rows; the embedding reference is those rows in the asked dtype."""
    from onecat.kernels.weights import random_packed
    gen = torch.Generator().manual_seed(5)
    w = GGUFWeight.random(40, 256, kind[5:], gen) if kind.startswith("gguf_") else random_packed(40, 256, kind, gen)
    full = w.dequantize()
    ids = torch.tensor([39, 0, 7, 7])
    assert w.select_rows(slice(3, 20)).shape == (17, 256)
    assert torch.equal(w.select_rows(slice(3, 20)).dequantize(), full[3:20])
    assert torch.equal(w.select_rows(ids).dequantize(), full[ids])
    assert torch.equal(ref.embedding(w, ids, torch.float16), full[ids].half())
    with pytest.raises(TypeError, match="cannot select rows"):
        ref.embedding(object(), ids, torch.float16)


def test_packed_nibble_layout_magic():
    """The word layout the kernels rely on: (v & 0x000F000F) | 0x64006400 = fp16 (1024 + q0, 1024 + q1)."""
    from onecat.kernels.weights import _pack_nibbles
    q = torch.arange(8).repeat(1, 4) % 16
    b = _pack_nibbles(q)
    v = int.from_bytes(bytes(b[0, :4].tolist()), "little")
    halves = lambda u: torch.tensor([u & 0xFFFF, u >> 16], dtype=torch.int32).to(torch.int16).view(torch.float16)  # noqa: E731
    for s, vv in ((0, v), (2, v >> 8)):
        lo = halves((vv & 0x000F000F) | 0x64006400).float() - 1024
        hi = (halves((vv & 0x00F000F0) | 0x64006400).float() - 1024) / 16
        assert lo.tolist() == [2 * s, 2 * s + 1] and hi.tolist() == [2 * s + 2, 2 * s + 3]
