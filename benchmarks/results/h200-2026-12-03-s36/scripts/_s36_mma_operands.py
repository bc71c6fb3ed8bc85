"""s36: does mma.sync m16n8k16 keep its issue rate when every MMA of a slice reads different operand registers, as
gemm_rd's K loop does (MT = 2 A fragments x NB = 4 B fragments: 8 MMAs, 8 accumulators)? s29's rate kernel fed
all 8 MMAs the same A / B registers; the K loop with its loads and dequantization removed still ran at ~55% of
that rate (s29 variants 7 / 11). One block per SM, no memory traffic, clock64; "distinct" = the K loop's operand
pattern, "shared" = s29's. From the repo root on the GPU machine:

    python3 benchmarks/results/h200-2026-12-03-s36/scripts/_s36_mma_operands.py
"""
from __future__ import annotations

import ctypes
import pathlib
import statistics

import torch

from onecat.kernels import build, gemm_ops
from onecat.kernels.driver import _check, _ensure_context, libcuda

SOURCE = r'''
#define MMA(D, A0, A1, A2, A3, B0, B1) \
  asm volatile("mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0,%1,%2,%3}, {%4,%5,%6,%7}, {%8,%9}, {%0,%1,%2,%3};" \
               : "+f"(D[0]), "+f"(D[1]), "+f"(D[2]), "+f"(D[3]) : "r"(A0), "r"(A1), "r"(A2), "r"(A3), "r"(B0), "r"(B1))
template <bool DISTINCT>
__device__ void body(float* out, long long* clk, int iters) {
  float acc[8][4];
  for (int b = 0; b < 8; ++b) for (int i = 0; i < 4; ++i) acc[b][i] = 0.f;
  unsigned a[2][4], bb[4][2];
  for (int m = 0; m < 2; ++m) for (int i = 0; i < 4; ++i) a[m][i] = 0x3C003C00u ^ (threadIdx.x * (7 + m + 3 * i));
  for (int n = 0; n < 4; ++n) for (int i = 0; i < 2; ++i) bb[n][i] = 0x38003800u ^ (threadIdx.x * (5 + n + 11 * i));
#pragma unroll
  for (int m = 0; m < 2; ++m) for (int i = 0; i < 4; ++i) asm volatile("" : "+r"(a[m][i]));
#pragma unroll
  for (int n = 0; n < 4; ++n) for (int i = 0; i < 2; ++i) asm volatile("" : "+r"(bb[n][i]));
  long long t0 = clock64();
  for (int it = 0; it < iters; ++it) {
#pragma unroll
    for (int m = 0; m < 2; ++m)
#pragma unroll
      for (int n = 0; n < 4; ++n) {
        const int mm = DISTINCT ? m : 0, nn = DISTINCT ? n : 0;
        MMA(acc[4 * m + n], a[mm][0], a[mm][1], a[mm][2], a[mm][3], bb[nn][0], bb[nn][1]);
      }
  }
  long long t1 = clock64();
  float s = 0.f;
  for (int b = 0; b < 8; ++b) for (int i = 0; i < 4; ++i) s += acc[b][i];
  out[blockIdx.x * blockDim.x + threadIdx.x] = s;
  if (threadIdx.x == 0 && blockIdx.x == 0) clk[0] = t1 - t0;
}
extern "C" __global__ void mma_shared(float* out, long long* clk, int iters) { body<false>(out, clk, iters); }
extern "C" __global__ void mma_distinct(float* out, long long* clk, int iters) { body<true>(out, clk, iters); }
'''


def main() -> None:
    major, minor = torch.cuda.get_device_capability()
    p = pathlib.Path(gemm_ops.__file__).parent / "csrc" / "_mma_operands.cu"
    p.write_text(SOURCE)
    try:
        c = build.compile_source("_mma_operands.cu", major * 10 + minor, use_cache=False)
    finally:
        p.unlink()
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
    for name in ("mma_shared", "mma_distinct"):
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
            mac = warps * 8 * 16 * 8 * 16 * iters
            print(f"{name:13} {warps:2} warps: {t * 1e6:8.1f} us, {mac / cycles:7.0f} MAC/clk/SM (clock64), "
                  f"{8 * warps * iters / cycles:.3f} MMA/clk/SM", flush=True)


if __name__ == "__main__":
    main()
