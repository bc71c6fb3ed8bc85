"""The CUDA providers' host side on the CPU, with launches intercepted: for every generated case a
provider admits on a (fake) sm_70, the launch has a legal grid/block, arguments that pack into the
kernel's signature, and outputs of the reference's shapes and dtypes."""

from __future__ import annotations

import dataclasses
import struct

import pytest
import torch

from onecat.kernels import cuda_ops, ops
from onecat.kernels.driver import Kernel
from onecat.kernels.inputs import clone_arg
from onecat.kernels.registry import REFERENCE, Case


@pytest.fixture
def launches(monkeypatch):
    calls = []

    def fake_launch(kernel, grid, block, *args, device, smem=0):
        assert isinstance(kernel, Kernel)
        assert 0 <= smem <= 48 * 1024, (kernel.name, smem)  # dynamic shared memory without the opt-in
        assert len(grid) == 3 and 1 <= grid[0] < 2**31 and 1 <= grid[1] <= 65535 and 1 <= grid[2] <= 65535
        assert len(block) == 3 and block[0] % 32 == 0 and 32 <= block[0] * block[1] * block[2] <= 1024
        assert len(args) == len(kernel.signature), kernel.name
        struct.pack_into(kernel._fmt, kernel._buf, 0, *args)  # types and count match the signature
        for code, a in zip(kernel.signature, args):
            assert isinstance(a, float if code == "f" else int), (kernel.name, code, a)
        calls.append((kernel.name, grid, block, args))

    monkeypatch.setattr(cuda_ops, "_launch", fake_launch)
    return calls




# two launches a case: the projection in front (its _norm epilogue), then the normed one behind (sm_70: the joined
# GEMVs; the register-direct GEMMs' launches need a fake sm_80+ device's slot counts: test_linear_norm.py::test_launches)
JOINED = {"linear_rms_norm_linear": "rs_glu", "linear_rms_norm_qkv_rotary_cache": "rs_rope"}


@pytest.mark.parametrize("op", sorted(ops.registry.ops))
def test_wrapper_launches(op, launches):
    spec = ops.registry.ops[op]
    # "unfused" and linear's "row_parts" compose other ops (each launching through its own provider, tested there)
    providers = [p for n, p in ops.registry.providers[op].items() if n not in (REFERENCE, "unfused", "row_parts")]
    admitted = 0
    for case in spec.make_inputs(torch.float16, "cpu", torch.Generator().manual_seed(0)):
        p = dataclasses.replace(ops.problem(op, *case.args, **case.kwargs), device="cuda", capability=(7, 0))
        for prov in providers:
            if prov.supports(p):
                continue
            admitted += 1
            launches.clear()
            args = tuple(clone_arg(a) for a in case.args)
            got = spec.tensors_out(Case(case.label, args), prov.fn(*args, **case.kwargs))
            want = spec.tensors_out(case, spec.reference(*case.args, **case.kwargs))
            if launches and launches[0][0].startswith("attn_decode_"):
                # split-KV decode: the partitions' merge is fused (a counter array) whenever there
                # are several, so one launch
                nparts, counters = launches[0][3][-6], launches[0][3][3]
                assert len(launches) == 1 and (counters != 0) == (nparts > 1), (prov.name, case.label, nparts)
            elif launches and launches[0][0].startswith("attn_") and len(launches) == 2:
                # split-KV prefill: the partitions' merge is a second launch, exactly when there are several
                nparts = launches[0][3][-6]
                assert nparts > 1 and launches[1][0] == "attn_reduce", (prov.name, case.label, nparts)
            elif op in JOINED:
                names = [n for n, *_ in launches]
                assert len(names) == 2 and names[0].endswith("_norm") and names[1].endswith("_" + JOINED[op]), names
            else:
                assert len(launches) == 1, (prov.name, case.label)
            assert [(g.shape, g.dtype) for g in got] == [(w.shape, w.dtype) for w in want], case.label
    if providers:
        assert admitted >= 3, f"{op}: too few generated cases admitted by {[p.name for p in providers]}"


def test_variant_choice(launches):
    x = torch.zeros(3, 4096, dtype=torch.float16)
    cuda_ops.rms_norm(x, torch.ones(4096, dtype=torch.float16), 1e-6)
    cuda_ops.rms_norm(x[:, :999], torch.ones(999, dtype=torch.float16), 1e-6, x[:, :999].contiguous())
    cuda_ops.linear(torch.zeros(5, 64, dtype=torch.float16), torch.zeros(40, 64, dtype=torch.float16))
    names = [c[0] for c in launches]
    assert names == ["rms_norm_v8", "rms_norm_add_v1", "gemv_f16_m8"]
    assert launches[0][1] == (3, 1, 1) and launches[0][2] == (128, 1, 1)  # 512 vectors, 4 per thread
    assert launches[2][1] == (5, 1, 1)  # 40 rows / (4 warps x 2 rows)


def test_argmax_split_shares_the_merge_counters(launches, monkeypatch):
    """Few rows split the vocabulary (a chunk grid, the last block merging through the shared
    last-block counters also the split-KV attention uses); batches, one-chunk rows and a capture
    with too small a counter array take one block per row."""
    import functools

    monkeypatch.setattr(cuda_ops, "_counter_arrays", functools.lru_cache(maxsize=None)(lambda device: []))
    capturing = [False]
    monkeypatch.setattr(cuda_ops, "_capturing", lambda device: capturing[0])
    cuda_ops.argmax(torch.zeros(2, 49152, dtype=torch.float16))
    (counters,) = cuda_ops._counter_arrays(torch.device("cpu"))
    name, grid, block, args = launches[-1]
    assert name == "argmax_split_f16_v8" and grid == (12, 2, 1) and block == (256, 1, 1)
    assert args[2] == counters.data_ptr() and args[-1] == 4096 and not counters.any()
    cuda_ops.argmax(torch.zeros(3, 50001, dtype=torch.float32))  # odd vocabulary: the scalar split
    assert launches[-1][0] == "argmax_split_f32_v1" and launches[-1][1] == (25, 3, 1)
    cuda_ops.argmax(torch.zeros(cuda_ops.ARGMAX_SPLIT_ROWS + 1, 4096, dtype=torch.float32))
    cuda_ops.argmax(torch.zeros(2, 4096, dtype=torch.float16))  # one chunk
    assert [c[0] for c in launches[-2:]] == ["argmax_f32_v4", "argmax_f16_v8"]
    capturing[0] = True  # under capture the array is reused, never allocated
    cuda_ops.argmax(torch.zeros(2, 49152, dtype=torch.float16))
    assert launches[-1][0] == "argmax_split_f16_v8" and launches[-1][3][2] == counters.data_ptr()
    cuda_ops._counter_arrays(torch.device("cpu")).clear()
    cuda_ops.argmax(torch.zeros(2, 49152, dtype=torch.float16))
    assert launches[-1][0] == "argmax_f16_v8" and cuda_ops._counter_arrays(torch.device("cpu")) == []


def test_bench_table_format():
    from onecat.kernels import bench

    rows = [bench.Row("linear q4_0", "M=1 N=4096 K=4096", "cuda", 10.0, 9.5, 12.0, 950.0, 0.22, 30.0, 1e-4)]
    text = bench.format_rows(rows, 4250.0, "fake")
    assert text.splitlines()[-1].split()[:3] == ["linear", "q4_0", "M=1"] and "22%" in text
    assert {(n, k) for n, k in bench.LLAMA3_8B_GEMV} == {(4096, 4096), (14336, 4096), (4096, 14336), (128256, 4096)}


@pytest.mark.parametrize("setting, pdl, want_gp", [(None, True, True), (None, False, False), (True, False, True),
                                                   (False, True, False)])
def test_norm_weight_first_choice(setting, pdl, want_gp, launches, monkeypatch):
    """linear_fused_ops.NORM_WEIGHT_FIRST: None (the default) takes q4_0's _gp entries where PDL runs, True / False
    take them or the wait-first ones on any device (A/Bs and tests force a form)."""
    from onecat.kernels import linear_fused_ops as lf
    from onecat.kernels.weights import random_packed
    monkeypatch.setattr(lf, "NORM_WEIGHT_FIRST", setting)
    monkeypatch.setattr(lf, "_pdl_runs", lambda device: pdl)
    w = random_packed(256, 512, "q4_0", torch.Generator().manual_seed(0))
    x, nw = torch.zeros(1, 512, dtype=torch.float16), torch.ones(512, dtype=torch.float16)
    lf.rms_norm_linear_cuda(x, nw, 1e-5, w, None, None, "silu_and_mul")
    lf.rms_norm_linear_cuda(x, nw, 1e-5, w)
    names = [c[0] for c in launches]
    assert len(names) == 2 and names[0].endswith("_rn_glu" + ("_gp" if want_gp else "")), names
    assert names[1].endswith("_rn" + ("_gp" if want_gp else "")), names
