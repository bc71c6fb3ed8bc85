"""weights.RowParts (one projection's rows held as consecutive parts in different formats) and linear's `row_parts`
provider (row_parts_ops): construction and its checks, shape / formats / decode / row selection, the problem facts
ops report for it, admission (every device, that format only, first in linear's priority) and linear over it
against the reference on the dequantized concatenation."""

from __future__ import annotations

import dataclasses

import pytest
import torch

from onecat.kernels import cuda_ops, ops, row_parts_ops
from onecat.kernels import reference as ref
from onecat.kernels.registry import REFERENCE, KernelRegistry
from onecat.kernels.weights import GGUFWeight, RowParts, random_packed


def _gen(seed: int = 0) -> torch.Generator:
    return torch.Generator().manual_seed(seed)


def _mixed(k: int = 256, dense_rows: int = 8) -> RowParts:
    """[q | k] in q4_k, v in q6_k (a Q4_K_M qkv), then a dense block."""
    g = _gen()
    return RowParts((GGUFWeight.random(64, k, "q4_k", g), GGUFWeight.random(32, k, "q6_k", g),
                     torch.randn(dense_rows, k, generator=g).half()))


def test_construction_checks():
    g = _gen()
    with pytest.raises(ValueError, match="at least 2 parts"):
        RowParts((GGUFWeight.random(32, 256, "q4_k", g),))
    with pytest.raises(ValueError, match=r"one K .*\(32, 256\), \(32, 512\)"):
        RowParts((GGUFWeight.random(32, 256, "q4_k", g), GGUFWeight.random(32, 512, "q6_k", g)))
    with pytest.raises(ValueError, match="one K"):
        RowParts((GGUFWeight.random(32, 256, "q4_k", g), torch.zeros(256)))
    w = _mixed()
    with pytest.raises(ValueError, match="must not be RowParts"):
        RowParts((w, torch.zeros(4, 256)))


def test_shape_formats_and_decode():
    w = _mixed()
    q, v, d = w.parts
    assert w.format == "row_parts" and w.shape == (104, 256)
    assert w.part_formats == ("gguf_q4_k", "gguf_q6_k", "dense") and w.part_rows == (64, 32, 8)
    assert w.device == torch.device("cpu") and w.nbytes == q.nbytes + v.nbytes + 8 * 256 * 2
    want = torch.cat([q.dequantize(), v.dequantize(), d.float()])
    assert torch.equal(w.dequantize(), want)
    assert w.dequantize(torch.float16).dtype == torch.float16
    moved = w.to("cpu")
    assert isinstance(moved, RowParts) and torch.equal(moved.dequantize(), want)


def _packed_qkv(k: int = 512) -> RowParts:
    g = _gen(1)
    return RowParts((random_packed(96, k, "q4_k", g), random_packed(32, k, "q6_k", g)))


def test_problem_facts():
    w = _packed_qkv()
    x = torch.randn(1, 512).half()
    p = ops.problem("linear", x, w, torch.zeros(128).half())
    assert (p.param("format"), p.param("n"), p.param("k"), p.param("weight_dtype")) == ("row_parts", 128, 512,
                                                                                        "row_parts")
    assert p.param("parts") == (("packed_q4_k", 96), ("packed_q6_k", 32))
    assert p.param("contiguous") and p.param("aligned16") and p.param("weight_aligned32") is None
    assert ops.problem("linear", x, w.parts[0]).param("parts") is None  # a fact of RowParts only
    nw, res = torch.ones(512).half(), torch.randn(1, 512).half()
    q = ops.problem("rms_norm_linear", x, nw, 1e-5, w, res, None, None)
    assert q.param("format") == "row_parts" and q.param("parts") == p.param("parts")


@pytest.mark.parametrize("dtype", [torch.float32, torch.float16])
@pytest.mark.parametrize("m", [1, 5, 20])
def test_linear_matches_reference_on_the_concatenation(m, dtype):
    """Two real formats and a bias: each part through its own provider, outputs concatenated."""
    w = _packed_qkv()
    g = _gen(2)
    x, bias = torch.randn(m, 512, generator=g).to(dtype), torch.randn(128, generator=g).to(dtype)
    assert ops.registry.select(ops.problem("linear", x, w, bias)).provider.name == "row_parts"
    got = ops.linear(x, w, bias)
    want = ref.linear(x, w.dequantize(), bias)
    assert got.dtype == dtype and got.shape == (m, 128)
    torch.testing.assert_close(got, want, rtol=1e-5 if dtype == torch.float32 else 2e-3, atol=1e-5)
    torch.testing.assert_close(ops.linear(x, w), ref.linear(x, w), rtol=1e-5 if dtype == torch.float32 else 2e-3,
                               atol=1e-5)


def test_admitted_for_row_parts_only_and_on_every_device():
    w = _packed_qkv()
    x = torch.randn(1, 512).half()
    p = ops.problem("linear", x, w)
    for dev, cap in (("cpu", None), ("cuda", (7, 0)), ("cuda", (9, 0))):
        sel = ops.registry.explain(dataclasses.replace(p, device=dev, capability=cap), check_available=False)
        assert sel.provider.name == "row_parts", (dev, sel.refused)
        assert all(r == ["lower priority than row_parts"] for r in sel.refused.values()), sel.refused
    for plain in (w.parts[0], torch.randn(128, 512).half()):
        sel = ops.registry.select(ops.problem("linear", x, plain))
        assert sel.provider.name != "row_parts"
        assert any("not row_parts" in r for r in sel.refused["row_parts"]), sel.refused["row_parts"]


@pytest.mark.parametrize("row_parts_first", [True, False])
def test_first_in_linears_priority_whichever_registers_first(row_parts_first):
    assert ops.registry.order("linear")[0] == "row_parts"
    reg = KernelRegistry()
    for spec in ops.registry.ops.values():
        reg.declare(spec)
    steps = [row_parts_ops.register, cuda_ops.register]
    for step in steps if row_parts_first else steps[::-1]:
        step(reg)
    assert reg.order("linear") == ["row_parts", "cuda_hmma", "cuda_pack", "cuda", REFERENCE]
