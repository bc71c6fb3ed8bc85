"""The tensor-pipe peak of the one instruction onecat's attention and GEMM kernels issue (PTX
wmma.mma.sync m16n16k16 row.col, FP16 inputs, FP32 accumulation: HMMA.884 on sm_70), measured on
this GPU with operands in registers and 8 independent accumulators per warp. A kernel's TFLOP/s over
this peak is the tensor-pipe fraction `f` that ../shared/v100.md's projection asks to be justified:
V100 TFLOP/s projected = 125 x f (the same fraction of Volta's HMMA peak). Device-only tool (CuPy).

    python3 tools/gpu/wmma_peak.py [--json out.json]
"""

from __future__ import annotations

import argparse
import json

import cupy as cp
import torch

SRC = r"""
struct AB { unsigned r[8]; };
struct C { float r[8]; };
__device__ __forceinline__ void mma(C& d, const AB& a, const AB& b) {
  asm volatile("wmma.mma.sync.aligned.row.col.m16n16k16.f32.f32 {%0,%1,%2,%3,%4,%5,%6,%7}, "
               "{%8,%9,%10,%11,%12,%13,%14,%15}, {%16,%17,%18,%19,%20,%21,%22,%23}, {%0,%1,%2,%3,%4,%5,%6,%7};"
               : "+f"(d.r[0]), "+f"(d.r[1]), "+f"(d.r[2]), "+f"(d.r[3]), "+f"(d.r[4]), "+f"(d.r[5]), "+f"(d.r[6]), "+f"(d.r[7])
               : "r"(a.r[0]), "r"(a.r[1]), "r"(a.r[2]), "r"(a.r[3]), "r"(a.r[4]), "r"(a.r[5]), "r"(a.r[6]), "r"(a.r[7]),
                 "r"(b.r[0]), "r"(b.r[1]), "r"(b.r[2]), "r"(b.r[3]), "r"(b.r[4]), "r"(b.r[5]), "r"(b.r[6]), "r"(b.r[7]));
}
extern "C" __global__ void wmma_loop(const unsigned* seed, float* out, int iters) {
  AB a, b;
  for (int i = 0; i < 8; ++i) { a.r[i] = seed[(threadIdx.x + i) & 31]; b.r[i] = seed[(threadIdx.x * 3 + i) & 31]; }
  C acc[8];
  for (int j = 0; j < 8; ++j) for (int i = 0; i < 8; ++i) acc[j].r[i] = 0.f;
  for (int it = 0; it < iters; ++it) {
#pragma unroll
    for (int j = 0; j < 8; ++j) mma(acc[j], a, b);
  }
  float s = 0.f;
  for (int j = 0; j < 8; ++j) for (int i = 0; i < 8; ++i) s += acc[j].r[i];
  if (s == 1234.5f) out[0] = s;  // keeps the math alive
}
"""


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("--iters", type=int, default=4096)
    ap.add_argument("--json", default="")
    a = ap.parse_args()
    props = torch.cuda.get_device_properties(0)
    kern = cp.RawModule(code=SRC, options=("-std=c++17",)).get_function("wmma_loop")
    seed = cp.full(32, 0x2C002C00, dtype=cp.uint32)  # fp16 pairs (0.0625, 0.0625): sums stay finite
    out = cp.zeros(1, dtype=cp.float32)
    best = {}
    for warps in (4, 8):
        blocks = props.multi_processor_count * 8
        args = (seed, out, cp.int32(a.iters))
        kern((blocks,), (32 * warps,), args)
        cp.cuda.runtime.deviceSynchronize()
        times = []
        for _ in range(5):
            e0, e1 = cp.cuda.Event(), cp.cuda.Event()
            e0.record()
            kern((blocks,), (32 * warps,), args)
            e1.record()
            e1.synchronize()
            times.append(cp.cuda.get_elapsed_time(e0, e1) * 1e-3)
        flops = blocks * warps * a.iters * 8 * 2 * 16 * 16 * 16
        best[warps] = flops / min(times) / 1e12
    peak = max(best.values())
    print(f"{props.name} (sm_{props.major}{props.minor}, {props.multi_processor_count} SMs): "
          f"wmma m16n16k16 row.col f16 -> f32, operands in registers: {peak:.1f} TFLOP/s "
          f"(4 warps/block {best[4]:.1f}, 8 warps/block {best[8]:.1f}; clocks as found)")
    if a.json:
        with open(a.json, "w") as f:
            json.dump({"device": props.name, "wmma_tflops": peak, "by_warps": best}, f, indent=1)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
