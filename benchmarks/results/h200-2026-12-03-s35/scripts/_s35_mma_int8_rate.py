"""s35, prepared for a later session (not run: the device time was spent): does mma.sync's int8 shape issue at
twice the FP16 shape's multiply-adds on this GPU? G3's GEMM K loop is bound by issuing mma.sync m16n8k16 (s29:
26.5 us of gate_up's 40.7 at M 32); m16n8k32.s8 does twice the multiply-adds an instruction, which would halve that
if it issues at the same interval. One block per SM, operands fixed, no memory traffic, as s29's _s29_mma_rate.py,
whose FP16 kernel (mma_sync, f32 accumulate) runs beside it for the ratio. From the repo root on the GPU machine:

    python3 benchmarks/results/h200-2026-12-03-s35/scripts/_s35_mma_int8_rate.py
"""
from __future__ import annotations

import ctypes
import importlib.util
import pathlib
import statistics

import torch

from onecat.kernels import build, gemm_ops
from onecat.kernels.driver import _check, _ensure_context, libcuda

S29 = pathlib.Path(__file__).resolve().parents[2] / "h200-2026-12-02-s29" / "scripts" / "_s29_mma_rate.py"

INT8_KERNEL = '''
extern "C" __global__ void mma_sync_s8(float* out, long long* clk, int iters) {
  int acc[8][4];
  for (int b = 0; b < 8; ++b) for (int i = 0; i < 4; ++i) acc[b][i] = 0;
  unsigned a0 = 0x01020304u ^ threadIdx.x, a1 = 0x05060708u, b0 = 0x01010101u, b1 = 0x02020202u ^ (threadIdx.x << 3);
  long long t0 = clock64();
  for (int it = 0; it < iters; ++it) {
#pragma unroll
    for (int b = 0; b < 8; ++b)
      asm volatile("mma.sync.aligned.m16n8k32.row.col.s32.s8.s8.s32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, "
                   "{%0,%1,%2,%3};"
                   : "+r"(acc[b][0]), "+r"(acc[b][1]), "+r"(acc[b][2]), "+r"(acc[b][3])
                   : "r"(a0), "r"(a1), "r"(a0), "r"(a1), "r"(b0), "r"(b1));
  }
  long long t1 = clock64();
  int s = 0;
  for (int b = 0; b < 8; ++b) for (int i = 0; i < 4; ++i) s ^= acc[b][i];
  out[blockIdx.x * blockDim.x + threadIdx.x] = (float)s;
  if (threadIdx.x == 0 && blockIdx.x == 0) clk[0] = t1 - t0;
}
'''


def source() -> str:
    """s29's kernels without its wgmma ones, plus mma_sync_s8."""
    spec = importlib.util.spec_from_file_location("_s29_mma_rate", S29)
    s29 = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(s29)
    s29.N_LIST = ()
    return s29.source() + INT8_KERNEL


def compile_module(arch: int):
    p = pathlib.Path(gemm_ops.__file__).parent / "csrc" / "_mma_rate.cu"
    p.write_text(source())
    try:
        build.ARCH_FEATURES["_mma_rate.cu"] = frozenset({80, 86, 89, 90})
        return build.compile_source("_mma_rate.cu", arch, use_cache=False)
    finally:
        p.unlink()


def main() -> None:
    major, minor = torch.cuda.get_device_capability()
    c = compile_module(major * 10 + minor)
    for k, v in sorted(c.usage.items()):
        print(k, v)
    torch.cuda.init()
    _ensure_context(0)
    mod = ctypes.c_void_p()
    _check(libcuda().cuModuleLoadData(ctypes.byref(mod), c.cubin), "load")
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    out = torch.empty(sms * 1024, device="cuda")
    clk = torch.zeros(1, dtype=torch.int64, device="cuda")
    iters = 20000
    for name, k in (("mma_sync", 16), ("mma_sync_s8", 32)):
        fn = ctypes.c_void_p()
        _check(libcuda().cuModuleGetFunction(ctypes.byref(fn), mod, name.encode()), name)
        for warps in (4, 8, 16):
            args = [ctypes.c_void_p(out.data_ptr()), ctypes.c_void_p(clk.data_ptr()), ctypes.c_int(iters)]
            params = (ctypes.c_void_p * 3)(*[ctypes.addressof(a) for a in args])
            stream = ctypes.c_void_p(torch.cuda.current_stream().cuda_stream)
            times = []
            for _ in range(5):
                a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
                a.record()
                _check(libcuda().cuLaunchKernel(fn, sms, 1, 1, 32 * warps, 1, 1, 0, stream, params, None), name)
                b.record()
                torch.cuda.synchronize()
                times.append(a.elapsed_time(b) * 1e-3)
            t, cycles = statistics.median(times), clk.item()
            mac = warps * 8 * 16 * 8 * k * iters  # per block (SM): 8 MMAs of 16 x 8 x k a warp per iteration
            print(f"{name:12} k{k} {warps:2} warps: {t * 1e6:8.1f} us, {mac / cycles:7.0f} MAC/clk/SM (clock64), "
                  f"{mac * sms / t / 1e12 * 2:6.1f} TOP/s, {8 * warps * iters / cycles:.3f} MMA/clk/SM", flush=True)


if __name__ == "__main__":
    main()
