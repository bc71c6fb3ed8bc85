"""NVRTC build plumbing on the CPU: disk cache hits, cache keys that follow the source, included
headers, options and arch, compile errors with the log, and the ptxas -v parser."""

from __future__ import annotations

import pytest

from onecat.kernels import build

SRC = '''#include "inc.cuh"
extern "C" __global__ void scale(float* x, int n) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) x[i] *= FACTOR;
}
'''


@pytest.fixture
def tc():
    try:
        return build.toolchain(70)
    except build.ToolchainError as e:
        pytest.fail(str(e))


def test_disk_cache_and_keys(tmp_path, monkeypatch, tc):
    monkeypatch.setenv("ONECAT_CACHE_DIR", str(tmp_path / "cache"))
    src = tmp_path / "k.cu"
    src.write_text(SRC)
    (tmp_path / "inc.cuh").write_text("#define FACTOR 2.f\n")
    inc = (f"-I{tmp_path}",)
    a = build.compile_source(str(src), 70, inc)
    assert not a.cached and a.cubin[:4] == b"\x7fELF" and a.usage["scale"]["registers"] > 0
    b = build.compile_source(str(src), 70, inc)
    assert b.cached and b.cubin == a.cubin and b.key == a.key and b.usage == a.usage
    assert (tmp_path / "cache" / a.key[:2] / f"{a.key}.cubin").exists()
    assert build.compile_source(str(src), 75, inc).key != a.key  # arch
    assert build.compile_source(str(src), 70, inc + ("-DX=1",)).key != a.key  # options
    (tmp_path / "inc.cuh").write_text("#define FACTOR 3.f\n")  # an included header
    c = build.compile_source(str(src), 70, inc)
    assert not c.cached and c.key != a.key
    src.write_text(SRC + "\n// edit\n")  # the source itself
    assert build.compile_source(str(src), 70, inc).key != c.key


def test_compile_error_carries_log(tmp_path, tc):
    src = tmp_path / "bad.cu"
    src.write_text('extern "C" __global__ void k() { undefined_thing(); }\n')
    with pytest.raises(RuntimeError, match="undefined_thing"):
        build.compile_source(str(src), 70, use_cache=False)


def test_resource_usage_parser():
    log = """ptxas info    : Compiling entry function 'a' for 'sm_70'
ptxas info    : Function properties for a
ptxas         .     8 bytes stack frame, 4 bytes spill stores, 4 bytes spill loads
ptxas info    : Used 40 registers, used 1 barriers, 256 bytes smem, 372 bytes cmem[0]
ptxas info    : Compiling entry function 'b' for 'sm_70'
ptxas info    : Function properties for b
ptxas         .     0 bytes stack frame, 0 bytes spill stores, 0 bytes spill loads
ptxas info    : Used 12 registers, 360 bytes cmem[0]
"""
    u = build.resource_usage(log)
    assert u["a"] == {"stack": 8, "spill_stores": 4, "spill_loads": 4, "registers": 40, "smem": 256}
    assert u["b"]["registers"] == 12 and "smem" not in u["b"]


def test_sm70_needs_nvrtc_12(monkeypatch):
    fake = build.Toolchain("libnvrtc.so.13", (13, 0), (75, 80, 90), ("/x",))
    monkeypatch.setattr(build, "toolchains", lambda: (fake,))
    build.toolchain.cache_clear()
    try:
        assert build.toolchain(90) is fake
        with pytest.raises(build.ToolchainError, match="nvidia-cuda-nvrtc-cu12==12.9.86"):
            build.toolchain(70)
    finally:
        build.toolchain.cache_clear()
