"""AWQ / GPTQ / compressed-tensors pack-quantized: known-answer words, slow scalar references written
from the formats' specs, round-trip properties, act-order g_idx, the GPTQ v1 zero-point offset."""

import numpy as np
import pytest
import torch
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from onecat.quant import int4, int4_ct

SETTINGS = settings(deadline=None, max_examples=25, suppress_health_check=[HealthCheck.too_slow])
F32 = np.float32
AWQ_ORDER = [0, 2, 4, 6, 1, 3, 5, 7]   # nibble i of a word holds column 8c + AWQ_ORDER[i]


def u32(word) -> int:
    return int(word) & 0xFFFFFFFF


def nib(word, i, bits=4) -> int:
    return (u32(word) >> (bits * i)) & ((1 << bits) - 1)


# ---- slow references -------------------------------------------------------------------------------

def awq_dequant_slow(qweight, qzeros, scales, gs):
    k_dim, n_dim = qweight.shape[0], qweight.shape[1] * 8
    out = np.zeros((n_dim, k_dim), np.float32)
    for k in range(k_dim):
        for n in range(n_dim):
            slot = AWQ_ORDER.index(n % 8)
            q = nib(qweight[k, n // 8], slot)
            z = nib(qzeros[k // gs, n // 8], slot)
            out[n, k] = F32(q - z) * F32(scales[k // gs, n])
    return out


def gptq_dequant_slow(qweight, qzeros, scales, g_idx, bits=4, offset=1):
    pf = 32 // bits
    k_dim, n_dim = qweight.shape[0] * pf, qweight.shape[1]
    out = np.zeros((n_dim, k_dim), np.float32)
    for k in range(k_dim):
        g = int(g_idx[k])
        for n in range(n_dim):
            q = nib(qweight[k // pf, n], k % pf, bits)
            z = nib(qzeros[g, n // pf], n % pf, bits) + offset
            out[n, k] = F32(q - z) * F32(scales[g, n])
    return out


def ct_dequant_slow(packed, scale, shape, zp_packed=None, g_idx=None, group_size=None, bits=4):
    pf, off = 32 // bits, 1 << (bits - 1)
    n_dim, k_dim = shape
    out = np.zeros((n_dim, k_dim), np.float32)
    for n in range(n_dim):
        for k in range(k_dim):
            g = int(g_idx[k]) if g_idx is not None else k // group_size
            q = nib(packed[n, k // pf], k % pf, bits) - off
            z = 0 if zp_packed is None else nib(zp_packed[n // pf, g], n % pf, bits) - off
            out[n, k] = F32(q - z) * F32(scale[n, g])
    return out


def awq_quant_slow(w, gs):
    """AutoAWQ pseudo_quantize_tensor (zero_point=True) with the fp16-stored scale."""
    n_dim, k_dim = w.shape
    q = np.zeros((k_dim, n_dim), np.int64)
    s_out = np.zeros((k_dim // gs, n_dim), np.float16)
    z_out = np.zeros((k_dim // gs, n_dim), np.int64)
    for g in range(k_dim // gs):
        for n in range(n_dim):
            col = w[n, g * gs:(g + 1) * gs]
            s = np.float16(max(F32(col.max()) - F32(col.min()), F32(1e-5)) / F32(15))
            s_out[g, n] = s
            z = min(max(-np.round(F32(col.min()) / F32(s)), 0), 15)
            z_out[g, n] = z
            for j in range(gs):
                q[g * gs + j, n] = min(max(np.round(F32(col[j]) / F32(s)) + z, 0), 15)
    return q, z_out, s_out


def gptq_quant_slow(w, g_idx, n_groups, sym, offset):
    n_dim, k_dim = w.shape
    q = np.zeros((n_dim, k_dim), np.int64)
    s_out = np.zeros((n_groups, n_dim), np.float16)
    z_out = np.zeros((n_groups, n_dim), np.int64)
    for g in range(n_groups):
        cols = [k for k in range(k_dim) if g_idx[k] == g]
        for n in range(n_dim):
            vals = w[n, cols]
            xmin, xmax = min(F32(vals.min()), F32(0)), max(F32(vals.max()), F32(0))
            if sym:
                xmax = max(abs(xmin), xmax)
                xmin = -xmax
            if xmin == 0 and xmax == 0:
                xmin, xmax = F32(-1), F32(1)
            s = np.float16((F32(xmax) - F32(xmin)) / F32(15))
            z = 8 if sym else min(max(np.round(-F32(xmin) / F32(s)), offset), 15)
            s_out[g, n], z_out[g, n] = s, z
            for k in cols:
                q[n, k] = min(max(np.round(F32(w[n, k]) / F32(s)) + z, 0), 15)
    return q, z_out, s_out


# ---- packing ---------------------------------------------------------------------------------------

def test_pack_words_known_answer():
    cols = torch.arange(8).reshape(1, 8)
    assert u32(int4.pack_int32(cols, 4, int4.AWQ_PACK_ORDER)[0, 0]) == 0x75316420
    assert u32(int4.pack_int32(cols, 4)[0, 0]) == 0x76543210
    assert u32(int4.pack_int32(torch.tensor([[15] * 8]), 4)[0, 0]) == 0xFFFFFFFF
    assert int4.pack_int32(torch.tensor([[15] * 8]), 4).dtype == torch.int32
    for order in (None, int4.AWQ_PACK_ORDER):
        v = torch.randint(0, 16, (5, 32), generator=torch.Generator().manual_seed(1))
        assert torch.equal(int4.unpack_int32(int4.pack_int32(v, 4, order), 4, order), v)


# ---- AWQ -------------------------------------------------------------------------------------------

def test_awq_known_answer():
    qweight = torch.tensor([[0x75316420]], dtype=torch.int32)        # columns 0..7 hold 0..7
    qzeros = torch.tensor([[0x11111111]], dtype=torch.int32)                  # zero point 1 everywhere
    scales = torch.tensor([[0.5] * 8], dtype=torch.float16)
    w = int4.awq_dequantize(qweight, qzeros, scales, group_size=1)
    assert w.shape == (8, 1) and w[:, 0].tolist() == [(c - 1) * 0.5 for c in range(8)]


def test_awq_dequant_vs_slow_reference():
    g = torch.Generator().manual_seed(0)
    qweight = torch.randint(-(2**31), 2**31, (64, 3), dtype=torch.int32, generator=g)
    qzeros = torch.randint(-(2**31), 2**31, (2, 3), dtype=torch.int32, generator=g)
    scales = torch.rand(2, 24, generator=g).half()
    ours = int4.awq_dequantize(qweight, qzeros, scales, group_size=32)
    ref = awq_dequant_slow(qweight.numpy(), qzeros.numpy(), scales.numpy(), 32)
    assert np.array_equal(ours.numpy().view(np.uint32), ref.view(np.uint32))


@SETTINGS
@given(st.integers(0, 2**32 - 1), st.sampled_from([16, 32, 64]), st.floats(-8, 8))
@example(340, 16, 0.0)  # a group of one sign (its max past the grid's end: q clamped)
def test_awq_quantize_vs_slow_reference_and_roundtrip(seed, gs, log_mag):
    g = torch.Generator().manual_seed(seed)
    w = torch.randn(16, 64, generator=g) * 2.0**log_mag
    out = int4.awq_quantize(w, group_size=gs)
    q_ref, z_ref, s_ref = awq_quant_slow(w.numpy(), gs)
    assert np.array_equal(int4.unpack_int32(out["qweight"], 4, int4.AWQ_PACK_ORDER).numpy(), q_ref)
    assert np.array_equal(int4.unpack_int32(out["qzeros"], 4, int4.AWQ_PACK_ORDER).numpy(), z_ref)
    assert np.array_equal(out["scales"].numpy(), s_ref)
    y = int4.awq_dequantize(out["qweight"], out["qzeros"], out["scales"], group_size=gs)
    s = out["scales"].float().repeat_interleave(gs, 0).t()
    z = int4.unpack_int32(out["qzeros"], 4, int4.AWQ_PACK_ORDER).float().repeat_interleave(gs, 0).t()
    # within half a step of w on the grid's range [-z s, (15 - z) s]; past it (a group of one sign: z clamped to 0 or
    # 15, seed 340 gs 16) the grid's end, as AWQ clamps q
    target = torch.minimum(torch.maximum(w, -z * s), (15 - z) * s)
    assert bool(((y - target).abs() <= s * (0.5 + 16 * 2.0**-11) + 1e-30).all())
    again = int4.awq_quantize(y, group_size=gs, scales=out["scales"],
                              zeros=int4.unpack_int32(out["qzeros"], 4, int4.AWQ_PACK_ORDER))
    assert all(torch.equal(again[k], out[k]) for k in out)


# ---- GPTQ ------------------------------------------------------------------------------------------

def test_gptq_known_answer_v1_offset():
    qweight = torch.tensor([[0x76543210] * 8], dtype=torch.int32)           # q[k, n] = k, K = 8, N = 8
    qzeros = torch.tensor([[0x77777777]], dtype=torch.int32)                 # v1: stored 7 -> Z = 8
    scales = torch.full((1, 8), 0.25, dtype=torch.float16)
    w = int4.gptq_dequantize(qweight, qzeros, scales)
    assert w.shape == (8, 8) and w[0].tolist() == [(k - 8) * 0.25 for k in range(8)]
    w2 = int4.gptq_dequantize(qweight, qzeros, scales, checkpoint_format="gptq_v2")   # Z = 7
    assert w2[0].tolist() == [(k - 7) * 0.25 for k in range(8)]
    # nibble 15 in a v1 file reads as zero point 16 (no wrap-around), as the CUDA/exllama kernels do
    w3 = int4.gptq_dequantize(qweight, torch.tensor([[-1]], dtype=torch.int32), scales)
    assert w3[0].tolist() == [(k - 16) * 0.25 for k in range(8)]


def test_gptq_sym_quantize_writes_0x77777777():
    g = torch.Generator().manual_seed(9)
    out = int4.gptq_quantize(torch.randn(16, 64, generator=g), group_size=32, sym=True)
    assert bool((out["qzeros"] == 0x77777777).all())
    assert torch.equal(out["g_idx"], (torch.arange(64) // 32).to(torch.int32))
    v2 = int4.gptq_quantize(torch.randn(16, 64, generator=g), group_size=32, sym=True, checkpoint_format="gptq_v2")
    assert bool((v2["qzeros"] == 0x88888888 - 2**32).all())   # 0x88888888 as int32


def test_gptq_dequant_vs_slow_reference_act_order():
    g = torch.Generator().manual_seed(1)
    qweight = torch.randint(-(2**31), 2**31, (8, 16), dtype=torch.int32, generator=g)     # K = 64, N = 16
    qzeros = torch.randint(-(2**31), 2**31, (4, 2), dtype=torch.int32, generator=g)
    scales = torch.rand(4, 16, generator=g).half()
    g_idx = torch.randint(0, 4, (64,), generator=g).to(torch.int32)
    for fmt, off in (("gptq", 1), ("gptq_v2", 0)):
        ours = int4.gptq_dequantize(qweight, qzeros, scales, g_idx, checkpoint_format=fmt)
        ref = gptq_dequant_slow(qweight.numpy(), qzeros.numpy(), scales.numpy(), g_idx.numpy(), offset=off)
        assert np.array_equal(ours.numpy().view(np.uint32), ref.view(np.uint32))
    # without g_idx: contiguous groups of K / G
    ours = int4.gptq_dequantize(qweight, qzeros, scales)
    ref = gptq_dequant_slow(qweight.numpy(), qzeros.numpy(), scales.numpy(), np.arange(64) // 16)
    assert np.array_equal(ours.numpy().view(np.uint32), ref.view(np.uint32))


@SETTINGS
@given(st.integers(0, 2**32 - 1), st.booleans(), st.sampled_from(["gptq", "gptq_v2"]), st.booleans(),
       st.floats(-8, 8))
def test_gptq_quantize_vs_slow_reference_and_roundtrip(seed, sym, fmt, act_order, log_mag):
    g = torch.Generator().manual_seed(seed)
    w = torch.randn(16, 64, generator=g) * 2.0**log_mag
    w[:, :8] = w[:, :8].abs()                     # some groups without negative weights (zero point 0 cases)
    perm = torch.randperm(64, generator=g) if act_order else None
    out = int4.gptq_quantize(w, group_size=16, sym=sym, perm=perm, checkpoint_format=fmt)
    off = 1 if fmt == "gptq" else 0
    g_idx = out["g_idx"]
    if act_order:
        expect = torch.empty(64, dtype=torch.int64)
        expect[perm] = torch.arange(64) // 16
        assert torch.equal(g_idx.long(), expect)
    q_ref, z_ref, s_ref = gptq_quant_slow(w.numpy(), g_idx.numpy(), 4, sym, off)
    assert np.array_equal(int4.unpack_int32(out["qweight"].t(), 4).numpy(), q_ref)
    assert np.array_equal(int4.unpack_int32(out["qzeros"], 4).numpy() + off, z_ref)
    assert np.array_equal(out["scales"].numpy(), s_ref)
    y = int4.gptq_dequantize(out["qweight"], out["qzeros"], out["scales"], g_idx, checkpoint_format=fmt)
    s = out["scales"].float().t()[:, g_idx.long()]
    slack = 1.0 if (fmt == "gptq" and not sym) else 0.5  # v1 cannot store zero point 0 -> may clip a step
    assert bool(((y - w).abs() <= s * (slack + 16 * 2.0**-11) + 1e-30).all())
    again = int4.gptq_quantize(y, group_size=16, g_idx=g_idx, checkpoint_format=fmt, scales=out["scales"],
                               zeros=torch.from_numpy(z_ref))
    assert all(torch.equal(again[k], out[k]) for k in out)


def test_gptq_8bit_roundtrip():
    w = torch.randn(8, 32, generator=torch.Generator().manual_seed(8))
    out = int4.gptq_quantize(w, bits=8, group_size=16, sym=False, checkpoint_format="gptq_v2")
    assert out["qweight"].shape == (8, 8) and out["qzeros"].shape == (2, 2)
    y = int4.gptq_dequantize(out["qweight"], out["qzeros"], out["scales"], bits=8, checkpoint_format="gptq_v2")
    s = out["scales"].float().repeat_interleave(16, 0).t()
    # half a step, plus what rounding the scale to fp16 (rel. 2**-11) can add over 255 steps
    assert bool(((y - w).abs() <= s * (0.5 + 256 * 2.0**-11)).all())


# ---- compressed-tensors ----------------------------------------------------------------------------

def test_ct_known_answer():
    packed = torch.tensor([[0x76543210]], dtype=torch.int32)                 # offset-binary: values -8..-1
    w = int4_ct.ct_dequantize(packed, torch.tensor([[0.5]], dtype=torch.bfloat16), torch.tensor([1, 8]))
    assert w.tolist() == [[-4.0, -3.5, -3.0, -2.5, -2.0, -1.5, -1.0, -0.5]]
    # asymmetric, zero point -2 for the single row (packed along dim 0: nibble 0 of word [0, 0] = -2 + 8)
    zp = torch.tensor([[6]], dtype=torch.int32)
    w = int4_ct.ct_dequantize(packed, torch.tensor([[1.0]]), torch.tensor([1, 8]), weight_zero_point=zp)
    assert w.tolist() == [[-6.0, -5.0, -4.0, -3.0, -2.0, -1.0, 0.0, 1.0]]
    out = int4_ct.ct_quantize(torch.tensor([[7.5, -7.5, 0.0, 1.0] * 2]), group_size=None)
    assert out["weight_scale"].tolist() == [[1.0]] and u32(out["weight_packed"][0, 0]) == 0x980F980F


def test_ct_dequant_vs_slow_reference():
    g = torch.Generator().manual_seed(4)
    n, k = 12, 70                                             # K not a multiple of 8: padded words
    packed = torch.randint(-(2**31), 2**31, (n, 9), dtype=torch.int32, generator=g)
    scale = torch.rand(n, 3, generator=g).to(torch.bfloat16)
    zp = torch.randint(-(2**31), 2**31, (2, 3), dtype=torch.int32, generator=g)
    shape = torch.tensor([n, k])
    ours = int4_ct.ct_dequantize(packed, scale, shape, zp, group_size=32)
    ref = ct_dequant_slow(packed.numpy(), scale.float().numpy(), (n, k), zp.numpy(), group_size=32)
    assert np.array_equal(ours.numpy().view(np.uint32), ref.view(np.uint32))
    g_idx = torch.randint(0, 3, (k,), generator=g)
    ours = int4_ct.ct_dequantize(packed, scale, shape, weight_g_idx=g_idx)
    ref = ct_dequant_slow(packed.numpy(), scale.float().numpy(), (n, k), g_idx=g_idx.numpy())
    assert np.array_equal(ours.numpy().view(np.uint32), ref.view(np.uint32))


@SETTINGS
@given(st.integers(0, 2**32 - 1), st.booleans(), st.sampled_from([None, 16, 32]), st.booleans(), st.floats(-8, 8))
def test_ct_roundtrip(seed, symmetric, group_size, with_g_idx, log_mag):
    g = torch.Generator().manual_seed(seed)
    w = torch.randn(16, 72, generator=g) * 2.0**log_mag
    g_idx = torch.randint(0, 3, (72,), generator=g) if with_g_idx else None
    out = int4_ct.ct_quantize(w, symmetric=symmetric, group_size=group_size, g_idx=g_idx)
    assert ("weight_zero_point" in out) == (not symmetric) and ("weight_g_idx" in out) == with_g_idx
    y = int4_ct.ct_dequantize(**out, group_size=group_size)
    gi = g_idx if with_g_idx else torch.arange(72) // (group_size or 72)
    s = out["weight_scale"].float()[:, gi]
    assert bool(((y - w).abs() <= s * (0.5 + 16 * 2.0**-8) + 1e-30).all())
    zp = None
    if not symmetric:
        zp = int4.unpack_int32(out["weight_zero_point"].t(), 4)[:, :16].t() - 8
    again = int4_ct.ct_quantize(y, symmetric=symmetric, group_size=group_size, g_idx=g_idx,
                                scales=out["weight_scale"], zero_points=zp)
    assert all(torch.equal(again[k], out[k]) for k in out)


def test_ct_quantize_rule_per_group():
    """Scale / zero point rule of compressed-tensors' calculate_qparams, checked on one group."""
    w = torch.tensor([[-1.0, 3.0, 0.5, 2.0, 0.0, 1.0, -0.5, 0.25]])
    sym = int4_ct.ct_quantize(w, group_size=None, scale_dtype=torch.float32)
    assert sym["weight_scale"].item() == pytest.approx(3.0 / 7.5)
    asym = int4_ct.ct_quantize(w, group_size=None, symmetric=False, scale_dtype=torch.float32)
    s = 4.0 / 15
    assert asym["weight_scale"].item() == pytest.approx(s)
    zp = int4.unpack_int32(asym["weight_zero_point"].t(), 4)[0, 0].item() - 8
    assert zp == round(-8 - (-1.0) / s)


# ---- bad input ---------------------------------------------------------------------------------------

def test_int4_errors():
    qw = torch.zeros(128, 2, dtype=torch.int32)
    with pytest.raises(ValueError, match=r"'l.qweight' \(awq\): qzeros has shape \(2, 2\), expected \(1, 2\)"):
        int4.awq_dequantize(qw, torch.zeros(2, 2, dtype=torch.int32), torch.zeros(1, 16), name="l.qweight")
    with pytest.raises(ValueError, match=r"awq.*in_features 128 is not a multiple of group_size 96"):
        int4.awq_dequantize(qw, torch.zeros(1, 2, dtype=torch.int32), torch.zeros(1, 16), group_size=96)
    with pytest.raises(ValueError, match=r"awq.*qweight must be torch.int32"):
        int4.awq_dequantize(qw.float(), torch.zeros(1, 2, dtype=torch.int32), torch.zeros(1, 16))
    with pytest.raises(ValueError, match=r"awq.*out_features 12 is not a multiple of 8"):
        int4.awq_quantize(torch.zeros(12, 128))
    with pytest.raises(ValueError, match=r"gptq.*g_idx values must lie in \[0, 2\)"):
        int4.gptq_dequantize(torch.zeros(2, 8, dtype=torch.int32), torch.zeros(2, 1, dtype=torch.int32),
                             torch.zeros(2, 8), torch.full((16,), 5))
    with pytest.raises(ValueError, match=r"gptq.*unknown checkpoint_format 'gptq_v3'"):
        int4.gptq_dequantize(torch.zeros(2, 8, dtype=torch.int32), torch.zeros(1, 1, dtype=torch.int32),
                             torch.zeros(1, 8), checkpoint_format="gptq_v3")
    with pytest.raises(ValueError, match=r"pack-quantized.*weight_packed has shape \(4, 2\), expected \(4, 3\)"):
        int4_ct.ct_dequantize(torch.zeros(4, 2, dtype=torch.int32), torch.zeros(4, 1), torch.tensor([4, 24]))
    with pytest.raises(ValueError, match=r"pack-quantized.*cannot infer group_size"):
        int4_ct.ct_dequantize(torch.zeros(4, 9, dtype=torch.int32), torch.zeros(4, 3), torch.tensor([4, 70]))
    with pytest.raises(ValueError, match=r"inf/NaN"):
        int4.gptq_quantize(torch.full((8, 32), float("nan")))
    with pytest.raises(ValueError, match=r"scale overflows torch.float16"):
        int4.awq_quantize(torch.tensor([[1e9, -1e9] * 64] * 8))
