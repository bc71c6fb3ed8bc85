"""The sm_70 gate (CPU, runs in CI): every csrc/*.cu kernel compiles with NVRTC 12.9 to cubin for
sm_70 and sm_90; no local memory (spills, stack) in any kernel, shared memory <= 96 KB, registers
<= 255; on sm_70 the tensor-core GEMV, the packed GEMM and every paged-attention kernel (decode/verify
and prefill) show HMMA.884 and the vectorized kernels 128-bit loads in
SASS (cuobjdump from the triton==3.6.0 wheel; the CUDA 13 tools refuse sm_70). Missing tools fail.
"""

from __future__ import annotations

import functools
import re
import subprocess
from pathlib import Path

import pytest

from onecat.kernels import (attention_ops, build, cuda_ops, embedding_ops, gemm_ops, linear_fused_ops,
                            linear_norm_ops, rotary_cache_ops, sampling_ops)
from onecat.kernels.driver import Kernel

MODULES = (cuda_ops, gemm_ops, attention_ops, sampling_ops, rotary_cache_ops, linear_fused_ops,
           linear_norm_ops, embedding_ops)  # hold Kernels
PINS = "nvidia-cuda-nvrtc-cu12==12.9.86 nvidia-cuda-runtime-cu12==12.9.79 triton==3.6.0"
SMEM_LIMIT = 96 * 1024
ATTENTION = {k.name for k in [*attention_ops._DECODE.values(),
                               *attention_ops._PREFILL.values()]}
GEMM = {k.name for k in [*gemm_ops._GEMM.values(), *gemm_ops._GEMM_TL.values()]}  # packed GEMM (M > 16)
TENSOR_CORE = {"gemv_f16_hmma", *ATTENTION, *GEMM}
VECTORIZED = {"rms_norm_v8", "rms_norm_add_v8", "rotary_neox_v8", "rotary_gptj_v8", "silu_and_mul_v8",
              "gelu_tanh_and_mul_v8", "reshape_and_cache_v8", "gemv_f16_m1", "gemv_f16_m16",
              "gemv_q4_0_m1", "gemv_q8_0_m1", "argmax_f16_v8", "argmax_f32_v4", "argmax_split_f16_v8",
              "argmax_split_f32_v4", "embedding_f16",
              *ATTENTION, "reshape_and_cache_e4m3", "reshape_and_cache_e5m2"}
VECTORIZED |= {f"gemv_p_{f}_m{m}" for f in cuda_ops.PACKED_FORMATS for m in (4, 16)}
VECTORIZED |= {cuda_ops.gemv_m1_kernel(f, *s).name for f in cuda_ops.PACKED_FORMATS for s in cuda_ops.GEMV_M1_SHAPES}
VECTORIZED |= {k.name for k in [*linear_fused_ops._PLAIN.values(), *linear_fused_ops._GLU.values(),
                                  *linear_fused_ops._ROPE.values()]}
VECTORIZED |= {"sample_f16_v8", "sample_f32_v4", "rotary_cache_neox_v8", "rotary_cache_gptj_v8"} | GEMM


def _tool(name: str) -> Path:
    assert name == "cuobjdump", name
    try:
        return build.cuobjdump()
    except build.ToolchainError as e:
        pytest.fail(f"{e} (the gate pins {PINS})")


@functools.lru_cache(maxsize=None)
def compiled(source: str, arch: int) -> build.Compiled:
    return build.compile_source(source, arch, use_cache=False)  # always a real compile here


def test_nvrtc_12_9_installed():
    try:
        tc = build.toolchain(70)
    except build.ToolchainError as e:
        pytest.fail(f"{e} (CI needs: pip install {PINS})")
    assert tc.version == (12, 9), f"{tc.describe()}: pin {PINS}"
    assert 70 in tc.archs and 90 in tc.archs


def _kernels_by_source() -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for k in [v for m in MODULES for v in vars(m).values()]:
        for kern in (k.values() if isinstance(k, dict) else [k]):
            if isinstance(kern, Kernel):
                out.setdefault(kern.source, set()).add(kern.name)
    return out


def test_every_source_is_used():
    assert set(_kernels_by_source()) == set(build.sources())


@pytest.mark.parametrize("arch", [70, 90])
@pytest.mark.parametrize("source", build.sources())
def test_compiles_without_spills(source, arch):
    c = compiled(source, arch)
    assert c.cubin[:4] == b"\x7fELF"
    missing = _kernels_by_source()[source] - set(c.usage)
    assert not missing, f"providers launch kernels the cubin lacks: {missing}"
    for name, u in c.usage.items():
        assert u.get("spill_stores", 0) == 0 and u.get("spill_loads", 0) == 0, (name, u)
        assert u.get("stack", 0) == 0, f"{name}: local-memory stack frame {u}"
        assert u.get("smem", 0) <= SMEM_LIMIT, (name, u)
        if name.startswith("_Z"):  # a non-inlined __device__ function: runs on its caller's registers
            continue
        assert 0 < u.get("registers", 0) <= 255, (name, u)


@functools.lru_cache(maxsize=None)
def cubin_file(source: str, tmp: str, arch: int = 70) -> Path:
    path = Path(tmp) / f"{source}.sm_{arch}.cubin"
    path.write_bytes(compiled(source, arch).cubin)
    return path


@pytest.fixture(scope="module")
def tmpdir_sass(tmp_path_factory) -> str:
    return str(tmp_path_factory.mktemp("sass"))


def _sass(source: str, arch: int = 70) -> dict[str, str]:
    """{kernel name: its SASS} of `source` built for sm_`arch` (sm_70 unless asked)."""
    _tool("cuobjdump")
    return build.sass(compiled(source, arch).cubin, arch)


@pytest.mark.parametrize("source", build.sources())
def test_sm70_sass(source):
    funcs = _sass(source)
    assert set(funcs) >= _kernels_by_source()[source]
    for name, body in funcs.items():
        if name in TENSOR_CORE:
            assert "HMMA.884" in body, f"{name}: no HMMA.884 in sm_70 SASS"
        else:
            assert "HMMA" not in body, f"{name}: unexpected tensor-core code"
        if name in VECTORIZED:
            assert re.search(r"\bLDG?\.E\.128\b", body), f"{name}: no 128-bit global load"
        assert "LDL" not in body and "STL" not in body, f"{name}: local-memory access in SASS"


@pytest.mark.parametrize("source", build.sources())
def test_sm70_resource_usage_cuobjdump(source, tmpdir_sass):
    out = subprocess.run([str(_tool("cuobjdump")), "--dump-resource-usage", str(cubin_file(source, tmpdir_sass))],
                         capture_output=True, text=True, check=True).stdout
    rows = re.findall(r"Function (\w+):\s*\n\s*REG:(\d+) STACK:(\d+) SHARED:(\d+) LOCAL:(\d+)", out)
    assert {r[0] for r in rows} >= _kernels_by_source()[source]
    for name, reg, stack, shared, local in rows:
        assert int(local) == 0 and int(stack) == 0, f"{name}: LOCAL:{local} STACK:{stack}"
        assert int(shared) <= SMEM_LIMIT and int(reg) <= 255, name
        assert int(reg) == compiled(source, 70).usage[name]["registers"], name


# register-direct GEMM, sm_80+ only (csrc/gemm_rd.cu): the routed tiles (plain, GLU, rotary, norm) and their traced entries
RD = {k.name for k in [*gemm_ops._RD.values(), *gemm_ops._RD_GLU.values(), *gemm_ops._RD_ROPE.values(),
                       *gemm_ops._RD_NORM.values(), *gemm_ops._RD_TRACE.values()]}


def test_register_direct_gemm_is_sm80_only():
    """gemm_rd_* use mma.sync m16n8k16 (sm_80+); their sm_70 build only traps (gemm_ops never admits
    them below RD_MIN_CAPABILITY: the V100 keeps gemm_packed.cu). On sm_90: HMMA.16816 with FP32
    accumulation, 128-bit shared loads of x, 128-bit loads of W, two 128-thread blocks per SM of
    registers."""
    sm70 = _sass("gemm_rd.cu")
    assert set(sm70) == RD and gemm_ops.RD_MIN_CAPABILITY == (8, 0)
    for name, body in sm70.items():
        assert "HMMA" not in body and "BPT.TRAP" in body, name
    sm90, usage = _sass("gemm_rd.cu", 90), compiled("gemm_rd.cu", 90).usage
    assert set(sm90) == RD
    for name, body in sm90.items():
        assert "HMMA.16816.F32" in body and "LDS.128" in body and "LDG.E.128" in body, name
        assert 2 * 128 * usage[name]["registers"] <= 65536, (name, usage[name])


def test_wgmma_gemm_is_sm90a_only():
    """gemm_wg_* (csrc/gemm_wg.cu) use wgmma: built for sm_90a where the arch is 9.0 (build.ARCH_FEATURES),
    admitted there only (gemm_ops.WG_CAPABILITY); their sm_70 build has no tensor-core code and traps. On
    sm_90a: HGMMA 64x64x16 with FP32 accumulation, 128-bit loads of W and x (none of W in the _nw / _nwx / _nwxb[h]
    diagnostics, none of x in _nx / _nwx / _nwxb[h]; x by a bulk copy in the XB entries: _xb, _glu_xb, _glu_xb_xs,
    _norm_xb), one 192-thread block per SM; the traced entries alike; no entry's wgmma serialized by ptxas."""
    names = {k.name for k in [*gemm_ops._WG.values(), *gemm_ops._WG_GLU.values(), *gemm_ops._WG_NORM.values(),
                              *gemm_ops._WG_TRACE.values(), *gemm_ops.WG_XL1.values(),
                              *gemm_ops.WG_DIAG.values(), *gemm_ops.WG_XB.values()]}
    assert build.ARCH_FEATURES["gemm_wg.cu"] == {90} and gemm_ops.WG_CAPABILITY == (9, 0)
    sm70 = _sass("gemm_wg.cu")
    assert set(sm70) == names
    for name, body in sm70.items():
        assert "HMMA" not in body and "GMMA" not in body and "BPT.TRAP" in body, name
    sm90, usage = _sass("gemm_wg.cu", 90), compiled("gemm_wg.cu", 90).usage
    assert set(sm90) == names
    for name, body in sm90.items():
        suffix = name.rsplit("_", 1)[1]  # the diagnostics: no W / x loads by design
        diag = suffix if suffix in gemm_ops.WG_DIAG else ""
        assert "HGMMA.64x64x16.F32" in body, name
        x_load = "LDG.E.128.CONSTANT"  # (x by __ldg; the split-K merge's partials are LDG.E.128.STRONG.GPU)
        bulk = "_xb" in name  # x's stages by a bulk copy on an mbarrier, not loaded by the producer warps
        assert ("LDG.E.LTC128B.128" in body) != ("w" in diag), name
        if not name.endswith("_norm_xb"):  # (there the _norm epilogue's residual and gamma loads are x_load's kind)
            assert (x_load in body) != ("x" in diag or bulk), name
        assert ("UBLKCP" in body and "SYNCS.PHASECHK" in body) == bulk, name
        assert 192 * usage[name]["registers"] <= 65536, (name, usage[name])
    # ptxas serializes a function's wgmma when other instructions write their input registers inside the pipeline:
    # the tile then loses the MMA / dequantization overlap it exists for, and says so only in its log (C7513)
    log = compiled("gemm_wg.cu", 90).log
    assert "C7513" not in log, [line for line in log.splitlines() if "C7513" in line]


def test_register_direct_decode_is_sm80_only():
    """attn_decode_rd_* (csrc/attention_decode_rd.cu) use mma.sync m16n8k16: on sm_70 they only trap
    (attention_ops admits them from sm_80: the V100 decodes with attention_decode.cu); on sm_90
    HMMA.16816 with FP32 accumulation, E4M3 by the FP8 conversion (F2FP), three 128-thread blocks per
    SM of registers (twelve of the one-warp form, two of the deep one and of D 256); the trace entries alike."""
    shape = {k.name: attention_ops.DECODE_RD_FORMS[key[:2]][1:] for entries in (attention_ops._DECODE_RD,
             attention_ops._DECODE_RD_TRACE) for key, k in entries.items()}  # name -> (threads, blocks per SM)
    names = set(shape)
    sm70 = _sass("attention_decode_rd.cu")
    assert set(sm70) >= names
    for name in names:
        assert "HMMA" not in sm70[name] and "BPT.TRAP" in sm70[name], name
    sm90, usage = _sass("attention_decode_rd.cu", 90), compiled("attention_decode_rd.cu", 90).usage
    for name in names:
        assert "HMMA.16816.F32" in sm90[name], name
        assert ("F2FP.F16.E4M3" in sm90[name]) == ("_e4m3" in name), name
        threads, blocks = shape[name]
        assert blocks * threads * usage[name]["registers"] <= 65536, (name, usage[name])


def test_attention_kernels_fit_volta():
    """Paged attention on sm_70: two 128-thread blocks per SM fit Volta's 64K registers and 96 KB of
    shared memory (static shared memory only: no dynamic opt-in needed below 48 KB)."""
    c = {src: compiled(src, 70) for src in ("attention_decode.cu", "attention_prefill.cu")}
    for name in ATTENTION:
        u = next(cc.usage[name] for cc in c.values() if name in cc.usage)
        assert u["smem"] <= 48 * 1024 and 2 * u["smem"] <= SMEM_LIMIT, (name, u)
        assert 2 * 128 * u["registers"] <= 65536, (name, u)


def test_packed_gemm_fits_volta():
    """Packed GEMM on sm_70: static shared memory <= 48 KB (no opt-in) and two 128-thread blocks per
    SM fit Volta's 96 KB of shared memory and 64K registers."""
    c = compiled("gemm_packed.cu", 70)
    for name in GEMM:
        u = c.usage[name]
        assert u["smem"] <= 48 * 1024 and 2 * u["smem"] <= SMEM_LIMIT, (name, u)
        assert 2 * 128 * u["registers"] <= 65536, (name, u)


def _pdl_kernels() -> dict[str, set[str]]:
    out: dict[str, set[str]] = {}
    for k in [v for m in MODULES for v in vars(m).values()]:
        for kern in (k.values() if isinstance(k, dict) else [k]):
            if isinstance(kern, Kernel) and kern.pdl:
                out.setdefault(kern.source, set()).add(kern.name)
    for f in cuda_ops.PACKED_FORMATS:  # built on demand (gemv_m1_kernel)
        for shape in cuda_ops.GEMV_M1_SHAPES:
            kern = cuda_ops.gemv_m1_kernel(f, *shape)
            assert kern.pdl
            out.setdefault(kern.source, set()).add(kern.name)
    return out


@pytest.mark.parametrize("source", sorted(_pdl_kernels()))
def test_pdl_kernels_wait(source):
    """Kernels the host launches with programmatic dependent launch on sm_90 (Kernel(pdl=True)) wait
    on the previous grid (griddepcontrol.wait = ACQBULK) and release the next (PREEXIT) in their
    sm_90 SASS; their sm_70 SASS has neither (common.cuh compiles them out for Volta)."""
    names = _pdl_kernels()[source]
    for arch, present in ((90, True), (70, False)):
        funcs = _sass(source, arch)
        for name in names:
            body = funcs[name]
            assert ("ACQBULK" in body and "PREEXIT" in body) == present, (arch, name)
