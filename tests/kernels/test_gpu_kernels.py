"""GPU: every CUDA provider against its op's torch reference on fresh random inputs (generated
cases + llama3-8b-sized ones; odd sizes and non-multiples of tiles included), outputs poisoned
with NaN before each run, error ||out - ref|| / ||ref|| within the op's tolerance; one CUDA-graph
capture + replay. Seed: $ONECAT_TEST_SEED, else random (printed on failure)."""

from __future__ import annotations

import math
import os
import random

import pytest
import torch

from onecat.kernels import GGUFWeight, cuda_ops, ops
from onecat.kernels.inputs import clone_arg
from onecat.kernels.weights import random_packed
from onecat.kernels.registry import REFERENCE, Case

from .packed_gemm_cases import rel_err

pytestmark = pytest.mark.gpu
SEED = int(os.environ.get("ONECAT_TEST_SEED", random.randrange(2**31)))
CUDA_OPS = sorted(op for op, provs in ops.registry.providers.items() if set(provs) - {REFERENCE})


def _randn(gen, *shape, scale=1.0):
    """fp16 normal values drawn on the GPU (model-sized weights would take seconds on the host)."""
    cuda_gen = torch.Generator("cuda").manual_seed(int(torch.randint(0, 2**62, (1,), generator=gen)))
    return (torch.randn(*shape, generator=cuda_gen, device="cuda") * scale).half()


def _row_parts_cases(op: str, gen: torch.Generator) -> list[Case]:
    """cuda_gemv_mix's case: one row, [q | k] in q4_k and v in q6_k (a Q4_K_M file's layers), the norm in front
    (rms_norm_qkv_rotary_cache) or joined to a q4_k projection (linear_rms_norm_qkv_rotary_cache)."""
    from .test_gemv_mixed import _down_mixed_args, _mixed_qkv_args
    seed = int(torch.randint(0, 2**31, (1,), generator=gen))
    args = (_mixed_qkv_args(512, 4, 2, 64, 64, device="cuda", seed=seed) if op == "rms_norm_qkv_rotary_cache"
            else _down_mixed_args(512, 1024, 4, 2, 64, 64, device="cuda", seed=seed))
    return [Case("M=1 row parts q4_k + q6_k Hq=4 Hk=2 D=64", tuple(args))]


def extra_cases(op: str, gen: torch.Generator) -> list[Case]:
    """Model-sized shapes (llama3-8b) on top of the generated ones."""
    if op == "linear":
        cases = []
        for m in (1, 4, 16):
            for n, k in ((4096, 4096), (14336, 4096), (4096, 14336)):
                cases.append(Case(f"dense M={m} N={n} K={k}", (_randn(gen, m, k), _randn(gen, n, k, scale=k ** -0.5), None)))
        for m, n, k, t in ((1, 14336, 4096, "q4_0"), (16, 4096, 14336, "q4_0"), (4, 4096, 4096, "q8_0")):
            cases.append(Case(f"{t} M={m} N={n} K={k}", (_randn(gen, m, k), GGUFWeight.random(n, k, t, gen, "cuda"), None)))
        for m, n, k, t in ((1, 4096, 4096, "q4_0"), (4, 1024, 14336, "q4_k"), (16, 2048, 4096, "awq"),
                           (2, 512, 4096, "q4_1"), (8, 512, 4096, "q6_k"), (3, 512, 4096, "q8_0")):
            cases.append(Case(f"packed_{t} M={m} N={n} K={k}", (_randn(gen, m, k), random_packed(n, k, t, gen, "cuda"), None)))
        return cases
    if op == "rms_norm_linear":  # llama3-8b qkv (q4_0, first layer: no residual) and gate_up (q4_k, GLU)
        def norm_w(k):
            return (1 + 0.1 * torch.randn(k, generator=gen)).half().cuda()
        x, res = _randn(gen, 1, 4096), _randn(gen, 1, 4096)
        return [Case("q4_0 M=1 N=6144 K=4096", (x, norm_w(4096), 1e-5, random_packed(6144, 4096, "q4_0", gen, "cuda"),
                                                None, None, None)),
                Case("q4_k M=1 N=28672 K=4096 res glu", (x, norm_w(4096), 1e-5,
                                                         random_packed(28672, 4096, "q4_k", gen, "cuda"), res, None,
                                                         "silu_and_mul")),
                # decode batches' gate_up: the register-direct GEMM with the GLU epilogue (sm_80+)
                Case("q4_0 M=32 N=28672 K=4096 res glu", (_randn(gen, 32, 4096), norm_w(4096), 1e-5,
                                                          random_packed(28672, 4096, "q4_0", gen, "cuda"),
                                                          _randn(gen, 32, 4096), None, "silu_and_mul")),
                # batch 2: cuda_gemv_glu (the GLU case) and the unfused route, both over the two-row GEMV
                Case("q4_k M=2 N=28672 K=4096 res glu", (_randn(gen, 2, 4096), norm_w(4096), 1e-5,
                                                         random_packed(28672, 4096, "q4_k", gen, "cuda"),
                                                         _randn(gen, 2, 4096), None, "silu_and_mul")),
                Case("q4_0 M=2 N=6144 K=4096 res", (_randn(gen, 2, 4096), norm_w(4096), 1e-5,
                                                    random_packed(6144, 4096, "q4_0", gen, "cuda"), _randn(gen, 2, 4096),
                                                    None, None)),
                Case("q4_0 M=40 N=384 K=1280 glu", (_randn(gen, 40, 1280), norm_w(1280), 1e-5,
                                                    random_packed(384, 1280, "q4_0", gen, "cuda"), None, None,
                                                    "silu_and_mul"))]
    if op == "rms_norm_qkv_rotary_cache":  # llama3-8b's attention input, q4_0, GPT-J and NeoX, 16-token pages
        from onecat.kernels.reference import rope_cos_sin
        kc, vc = _randn(gen, 64, 16, 8, 128), _randn(gen, 64, 16, 8, 128)
        nw = (1 + 0.1 * torch.randn(4096, generator=gen)).half().cuda()
        return [Case(f"q4_0 M=1 Hq=32 Hk=8 D=128 {'neox' if neox else 'gptj'}",
                     (_randn(gen, 1, 4096), nw, 1e-5, random_packed(6144, 4096, "q4_0", gen, "cuda"),
                      _randn(gen, 1, 4096), None, torch.tensor([4000], device="cuda"), 128,
                      rope_cos_sin(128, 128, 8192, 500000.0).cuda(), neox, kc, vc,
                      torch.tensor([517], device="cuda"), 32, 8)) for neox in (False, True)] + [
            Case("q4_0 M=2 Hq=32 Hk=8 D=128 neox", (_randn(gen, 2, 4096), nw, 1e-5, random_packed(6144, 4096, "q4_0", gen, "cuda"),
                                                    _randn(gen, 2, 4096), None, torch.tensor([4000, 9], device="cuda"), 128,
                                                    rope_cos_sin(128, 128, 8192, 500000.0).cuda(), True, kc, vc,
                                                    torch.tensor([517, 30], device="cuda"), 32, 8)),
            # decode batches, GPT-J (GGUF llama): the register-direct GEMM with the rotary epilogue (sm_80+);
            # a padding slot (-1) in the middle
            Case("q4_0 M=32 Hq=32 Hk=8 D=128 gptj", (_randn(gen, 32, 4096), nw, 1e-5,
                                                     random_packed(6144, 4096, "q4_0", gen, "cuda"),
                                                     _randn(gen, 32, 4096), None,
                                                     torch.randint(0, 8192, (32,), generator=gen).cuda(), 128,
                                                     rope_cos_sin(128, 128, 8192, 500000.0).cuda(), False, kc, vc,
                                                     torch.cat([torch.arange(100, 116), torch.tensor([-1]),
                                                                torch.arange(700, 715)]).cuda(), 32, 8))
        ] + _row_parts_cases(op, gen)
    if op == "linear_rms_norm_qkv_rotary_cache":
        return _row_parts_cases(op, gen)
    if op == "rms_norm":
        return [Case("T=64 H=4096 +res", (_randn(gen, 64, 4096), _randn(gen, 4096), 1e-5, _randn(gen, 64, 4096)))]
    if op in ("silu_and_mul", "gelu_and_mul"):
        return [Case("T=64 d=14336", (_randn(gen, 64, 2 * 14336),))]
    if op == "argmax":
        return [Case("B=8 V=128256", (_randn(gen, 8, 128256),)), Case("B=64 V=32000", (_randn(gen, 64, 32000),))]
    if op == "rotary_embedding":
        from onecat.kernels.reference import rope_cos_sin
        qkv = _randn(gen, 256, 48 * 128)
        pos = torch.randint(0, 8192, (256,), generator=gen).cuda()
        return [Case("T=256 Hq=32 Hk=8 D=128 fused", (pos, qkv[:, :4096], qkv[:, 4096:5120], 128,
                                                       rope_cos_sin(128, 128, 8192, 500000.0).cuda(), True))]
    if op == "reshape_and_cache":
        kc, vc = _randn(gen, 64, 16, 8, 128), _randn(gen, 64, 16, 8, 128)
        slots = torch.randperm(64 * 16, generator=gen)[:256].cuda()
        k8, v8 = kc.to(torch.float8_e4m3fn), vc.to(torch.float8_e4m3fn)
        return [Case("T=256 Hk=8 D=128", (_randn(gen, 256, 8, 128), _randn(gen, 256, 8, 128), kc, vc, slots)),
                Case("T=256 Hk=8 D=128 fp8 e4m3", (_randn(gen, 256, 8, 128), _randn(gen, 256, 8, 128), k8, v8, slots,
                                                   0.01, 0.02))]
    if op == "paged_attention":  # a prefill-phase batch (> 16 new tokens): prefix hit + fresh prompt + decode
        from onecat.kernels.inputs import paged_metadata
        md = paged_metadata([40, 1, 24], [300, 77, 24], 16, 48, gen, "cuda")
        return [Case("prefill Hq=8 Hk=2 D=128", (_randn(gen, 65, 8, 128), _randn(gen, 48, 16, 2, 128),
                                                 _randn(gen, 48, 16, 2, 128), md, 128 ** -0.5, None, None))]
    return []




def _fp32_reference(spec, case: Case, i: int) -> torch.Tensor:
    """Output i of the op's reference evaluated in FP32: FP16 tensor arguments widened, packed weights as they
    are (their codecs dequantize to the activation dtype)."""
    args = tuple(clone_arg(a).float() if isinstance(a, torch.Tensor) and a.dtype == torch.float16 else clone_arg(a)
                 for a in case.args)
    return spec.tensors_out(Case(case.label, args), spec.reference(*args, **case.kwargs))[i]


def _check(out: torch.Tensor, ref: torch.Tensor, tol: float, what: str, ref32=None) -> None:
    """out within tol of the reference. An FP16 output over tol is measured again against the reference in FP32
    (ref32: a callable giving it): a chain of FP16 roundings in the reference (GLU, norms between GEMVs) can put
    the FP16 reference itself further from the exact value than the kernel (H200 s36/s37: the q4_k GLU case at
    seed 25, FP16 reference 3.7e-3 from FP32)."""
    assert out.shape == ref.shape and out.dtype == ref.dtype, what
    if out.element_size() == 1 and out.is_floating_point():  # FP8: compare bytes
        out, ref = out.view(torch.uint8), ref.view(torch.uint8)
    if tol == 0:
        torch.testing.assert_close(out, ref, rtol=0, atol=0, equal_nan=True, msg=what)
        return
    err = rel_err(out, ref)
    if err > tol and ref32 is not None and out.dtype == torch.float16 and not bool(torch.isnan(out).any()):
        err32 = rel_err(out, ref32())
        assert err32 <= tol, f"{what}: rel err {err:.3g} (FP32 reference: {err32:.3g}) > {tol}"
        return
    assert err <= tol, f"{what}: rel err {err:.3g} > {tol} (NaN: unwritten output)"


def test_cuda_providers_available():
    assert cuda_ops.available() == [], cuda_ops.available()


@pytest.mark.parametrize("op", CUDA_OPS)
def test_kernel_vs_reference(op):
    spec = ops.registry.ops[op]
    gen = torch.Generator().manual_seed(SEED + len(op))
    cases = [(c, "float16") for c in spec.make_inputs(torch.float16, "cuda", gen) + extra_cases(op, gen)]
    if "float32" in spec.tolerances and op == "argmax":
        cases += [(c, "float32") for c in spec.make_inputs(torch.float32, "cuda", gen)]
    for name, prov in ops.registry.providers[op].items():
        if name == REFERENCE:
            continue
        admitted = []
        for case, dtype in cases:
            if op == "reshape_and_cache":  # poison the caches: unwritten slots stay NaN on both sides
                for c in case.args[2:4]:  # FP8 caches: the NaN byte 0x7f
                    c.view(torch.uint8).fill_(0x7F) if c.element_size() == 1 else c.fill_(float("nan"))
            p = ops.problem(op, *case.args, **case.kwargs)
            if prov.refusal(p):
                continue
            admitted.append(case.label)
            a_k = tuple(clone_arg(a) for a in case.args)
            a_r = tuple(clone_arg(a) for a in case.args)
            with cuda_ops.poison_outputs():
                got = spec.tensors_out(Case(case.label, a_k), prov.fn(*a_k, **case.kwargs))
            want = spec.tensors_out(Case(case.label, a_r), spec.reference(*a_r, **case.kwargs))
            torch.cuda.synchronize()
            for i, (g, w) in enumerate(zip(got, want)):
                _check(g, w, spec.tolerances[dtype], f"{op}/{name} [{case.label}] output {i} seed={SEED}",
                       ref32=lambda c=case, i=i: _fp32_reference(spec, c, i))
        assert admitted, f"{op}/{name}: no case admitted"


def test_dispatch_picks_cuda():
    x = torch.randn(2, 4096, device="cuda", dtype=torch.float16)
    w = torch.randn(1024, 4096, device="cuda", dtype=torch.float16)
    assert ops.registry.select(ops.problem("linear", x, w)).provider.name == "cuda"
    assert ops.registry.select(ops.problem("linear", x.repeat(5, 1), w)).provider.name == "cuda_hmma"
    assert ops.registry.select(ops.problem("rms_norm", x, w[0], 1e-6)).provider.name == "cuda"
    assert ops.registry.select(ops.problem("linear", x.bfloat16(), w.bfloat16())).provider.name == REFERENCE


def test_cuda_graph_capture_replay():
    gen = torch.Generator().manual_seed(SEED)
    x, res = _randn(gen, 4, 4096), _randn(gen, 4, 4096)
    nw = _randn(gen, 4096)
    w = GGUFWeight.random(1024, 4096, "q4_0", gen, "cuda")
    w2 = _randn(gen, 1000, 512, scale=1 / 16)  # [N, K]: silu_and_mul halves 1024 -> 512

    def step():
        h, r = ops.rms_norm(x, nw, 1e-6, res)
        y = ops.linear(h, w)
        return ops.argmax(ops.linear(ops.silu_and_mul(y), w2)), r

    s = torch.cuda.Stream()
    s.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(s):  # warm up: compiles and loads every kernel before capture
        step()
    torch.cuda.current_stream().wait_stream(s)
    g = torch.cuda.CUDAGraph()
    with torch.cuda.graph(g):
        out_tok, out_res = step()
    for _ in range(2):  # new inputs in the captured buffers, replay, compare with eager
        x.copy_(_randn(gen, 4, 4096))
        res.copy_(_randn(gen, 4, 4096))
        g.replay()
        torch.cuda.synchronize()
        eager_tok, eager_res = step()
        assert torch.equal(out_tok, eager_tok) and torch.equal(out_res, eager_res)
    h, r = ops.registry.ops["rms_norm"].reference(x, nw, 1e-6, res)
    torch.testing.assert_close(out_res, r, rtol=0, atol=0)
    assert math.isfinite(float(h.float().norm()))
