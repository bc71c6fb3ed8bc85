"""x_stages: x in the wgmma tiles' stage layout, carried between ops (gate_up's output for down), and the ops layer's
promise that any provider that does not take stages gets x row-major. The wgmma kernels that write and copy stages are
tested on the GPU in test_gemm_wg.py / test_linear_norm.py; here the layout's inverse and the routing on the CPU."""

from __future__ import annotations

import pytest
import torch

from onecat.kernels import ops
from onecat.kernels.weights import random_packed
from onecat.kernels.x_stages import WG_X_SLICE, XStages, wg_x_stages, x_from_stages

from .test_linear_norm import _down_qkv_args, _glu_args


def test_stages_layout():
    """wg_x_stages puts x[n, k] where csrc/gemm_wg.cu's producer warps store it: tile n // 64, step k // 128,
    slice 2 j + h // 2 (k % 128 = 32 i + 8 j + 2 h + e), core matrix h % 2, 8-row group, row, pair i; rows past M 0."""
    m, k = 70, 256
    x = (torch.arange(m * k) % 2039).half().view(m, k)
    st = wg_x_stages(x)
    assert st.shape == (2, 2, 8 * WG_X_SLICE) and st.dtype == torch.uint8
    halves = st.view(2, 2, -1).view(torch.float16)
    n, kk = torch.meshgrid(torch.arange(m), torch.arange(k), indexing="ij")
    r = kk % 128
    i, j, h, e = r // 32, r % 32 // 8, r % 8 // 2, r % 2
    g, rg = n % 8, n % 64 // 8
    byte = (2 * j + h // 2) * WG_X_SLICE + rg * 256 + (h % 2) * 128 + g * 16 + i * 4 + e * 2
    assert torch.equal(halves[n // 64, kk // 128, byte // 2], x)
    assert float(halves.double().sum()) == float(x.double().sum())  # and nothing else: rows past M are zero


@pytest.mark.parametrize("m,k", [(1, 128), (40, 256), (64, 384), (70, 256), (128, 128)])
def test_stages_round_trip(m, k):
    """x_from_stages inverts wg_x_stages (ragged rows, one and several row tiles), whatever the padding holds."""
    x = torch.randn(m, k, generator=torch.Generator().manual_seed(m + k)).half()
    st = wg_x_stages(x)
    assert tuple(st.shape) == XStages.layout(m, k) == (-(-m // 64), k // 128, 8 * WG_X_SLICE)
    pad = st.view(st.shape[0], st.shape[1], 8, WG_X_SLICE)[..., 2048:]
    pad.fill_(0xFF)  # the slices' padding: never read back
    assert torch.equal(x_from_stages(st, m, k), x)
    xs = XStages.of(x)
    assert torch.equal(xs.tensor(), x) and xs.tensor().is_contiguous()
    assert (xs.shape, xs.dtype, xs.device, xs.numel(), xs.dim()) == ((m, k), torch.float16, x.device, m * k, 2)


def test_ops_give_other_providers_x_row_major():
    """An XStages x reaches a provider that does not take stages (here the CPU's references) as the tensor it holds:
    linear and linear_rms_norm_qkv_rotary_cache give what they give on x itself, bit for bit."""
    gen = torch.Generator().manual_seed(7)
    x = torch.randn(40, 512, generator=gen).half()
    w = random_packed(256, 512, "q4_0", gen)
    assert ops.registry.select(ops.problem("linear", XStages.of(x), w)).provider.takes_x_stages is False
    assert torch.equal(ops.linear(XStages.of(x), w), ops.linear(x, w))
    b = _down_qkv_args(40, 256, 512, 4, 2, 64, 64)
    kc, vc = b[11].clone(), b[12].clone()
    want_q, want_r = ops.linear_rms_norm_qkv_rotary_cache(*b)
    got_q, got_r = ops.linear_rms_norm_qkv_rotary_cache(XStages.of(b[0]), *b[1:11], kc, vc, *b[13:])
    assert torch.equal(got_q, want_q) and torch.equal(got_r, want_r)
    assert torch.equal(kc, b[11]) and torch.equal(vc, b[12])


def test_feeds_is_a_hint():
    """linear_rms_norm_linear's feeds changes nothing where no route takes stages: the same tensors."""
    a = _glu_args(40, 256, 512, 128)
    down = random_packed(256, 128, "q4_0", torch.Generator().manual_seed(1))
    got, got_res = ops.linear_rms_norm_linear(*a, down)
    want, want_res = ops.linear_rms_norm_linear(*a)
    assert isinstance(got, torch.Tensor) and torch.equal(got, want) and torch.equal(got_res, want_res)
