"""s29: tensor-core issue rates on this GPU, one block per SM, operands fixed (no memory traffic):
mma.sync m16n8k16 f32 (W warps x 8 independent accumulators) and wgmma m64nNk16 f32 with A from registers,
B from shared memory (K-major, no swizzle: gemm_wg.cu's descriptor), G warpgroups per block, 8 wgmma per commit.
Prints FMA / clock / SM at the clock read by clock64 (SM 0)."""
from __future__ import annotations

import ctypes
import statistics

import torch

from onecat.kernels import build
from onecat.kernels.driver import _check, _ensure_context, libcuda

N_LIST = (32, 64, 128, 256)


def wg_asm(n: int) -> str:
    nd = n // 2  # accumulators per thread
    outs = ", ".join(f"%{i}" for i in range(nd))
    return (f'asm volatile("{{\\n wgmma.mma_async.sync.aligned.m64n{n}k16.f32.f16.f16 {{{outs}}}, '
            f'{{%{nd}, %{nd + 1}, %{nd + 2}, %{nd + 3}}}, %{nd + 4}, 1, 1, 1, 0;\\n}}" : '
            + ", ".join(f'"+f"(d[{i}])' for i in range(nd))
            + ' : "r"(a[0]), "r"(a[1]), "r"(a[2]), "r"(a[3]), "l"(desc) : "memory");')


def source() -> str:
    s = ['#include "common.cuh"',
         'ONECAT_DEVICE unsigned long long desc_of(unsigned saddr) { return (unsigned long long)((saddr & 0x3FFFFu) >> 4) | (8ull << 16) | (16ull << 32); }']
    for n in N_LIST:
        nd = n // 2
        s.append(f'''
extern "C" __global__ void wg_n{n}(float* out, long long* clk, int iters) {{
  __shared__ __align__(128) unsigned char sb[4 * {n} * 32];
  for (int i = threadIdx.x; i < 4 * {n} * 32 / 4; i += blockDim.x) reinterpret_cast<unsigned*>(sb)[i] = 0x3c003c00u ^ (i & 0x0f0f);
  __syncthreads();
  float d[{nd}];
  for (int i = 0; i < {nd}; ++i) d[i] = 0.f;
  unsigned a[4] = {{0x3c003c00u, 0x3c003c00u ^ threadIdx.x, 0x3c003c00u, 0x3c003c00u}};
  const unsigned base = (unsigned)__cvta_generic_to_shared(sb);
  long long t0 = clock64();
  for (int it = 0; it < iters; ++it) {{
    asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
#pragma unroll
    for (int j = 0; j < 8; ++j) {{
      const unsigned long long desc = desc_of(base + (j & 3) * {n} * 32);
      {wg_asm(n)}
    }}
    asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
    asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
  }}
  long long t1 = clock64();
  float s = 0.f;
  for (int i = 0; i < {nd}; ++i) s += d[i];
  out[blockIdx.x * blockDim.x + threadIdx.x] = s;
  if (threadIdx.x == 0 && blockIdx.x == 0) clk[0] = t1 - t0;
}}''')
    s.append('''
extern "C" __global__ void mma_sync(float* out, long long* clk, int iters) {
  float acc[8][4];
  for (int b = 0; b < 8; ++b) for (int i = 0; i < 4; ++i) acc[b][i] = 0.f;
  unsigned a0 = 0x3c003c00u ^ threadIdx.x, a1 = 0x3c003c00u, b0 = 0x3c003c00u, b1 = 0x3c003c00u ^ (threadIdx.x << 3);
  long long t0 = clock64();
  for (int it = 0; it < iters; ++it) {
#pragma unroll
    for (int b = 0; b < 8; ++b) mma_16816(acc[b], a0, a1, a0, a1, b0, b1);
  }
  long long t1 = clock64();
  float s = 0.f;
  for (int b = 0; b < 8; ++b) for (int i = 0; i < 4; ++i) s += acc[b][i];
  out[blockIdx.x * blockDim.x + threadIdx.x] = s;
  if (threadIdx.x == 0 && blockIdx.x == 0) clk[0] = t1 - t0;
}''')
    s.append('''
extern "C" __global__ void mma_sync_f16acc(float* out, long long* clk, int iters) {
  unsigned acc[8][2];
  for (int b = 0; b < 8; ++b) acc[b][0] = acc[b][1] = 0u;
  unsigned a0 = 0x3c003c00u ^ threadIdx.x, a1 = 0x3c003c00u, b0 = 0x3c003c00u, b1 = 0x3c003c00u ^ (threadIdx.x << 3);
  long long t0 = clock64();
  for (int it = 0; it < iters; ++it) {
#pragma unroll
    for (int b = 0; b < 8; ++b)
      asm volatile("mma.sync.aligned.m16n8k16.row.col.f16.f16.f16.f16 {%0,%1}, {%2,%3,%4,%5}, {%6,%7}, {%0,%1};"
                   : "+r"(acc[b][0]), "+r"(acc[b][1]) : "r"(a0), "r"(a1), "r"(a0), "r"(a1), "r"(b0), "r"(b1));
  }
  long long t1 = clock64();
  unsigned s = 0u;
  for (int b = 0; b < 8; ++b) s ^= acc[b][0] ^ acc[b][1];
  out[blockIdx.x * blockDim.x + threadIdx.x] = __uint_as_float(s);
  if (threadIdx.x == 0 && blockIdx.x == 0) clk[0] = t1 - t0;
}''')
    return "\n".join(s) + "\n"


def main() -> None:
    import pathlib
    from onecat.kernels import gemm_ops
    p = pathlib.Path(gemm_ops.__file__).parent / "csrc" / "_mma_rate.cu"
    p.write_text(source())
    arch = torch.cuda.get_device_capability()
    build.ARCH_FEATURES["_mma_rate.cu"] = frozenset({90})
    c = build.compile_source("_mma_rate.cu", arch[0] * 10 + arch[1])
    for k, v in sorted(c.usage.items()):
        print(k, v)
    torch.cuda.init()
    _ensure_context(0)
    mod = ctypes.c_void_p()
    _check(libcuda().cuModuleLoadData(ctypes.byref(mod), c.cubin), "load")
    sms = torch.cuda.get_device_properties(0).multi_processor_count
    out = torch.empty(sms * 1024, device="cuda")
    clk = torch.zeros(1, dtype=torch.int64, device="cuda")

    def run(name, threads, iters, fma_per_iter_per_block):
        fn = ctypes.c_void_p()
        _check(libcuda().cuModuleGetFunction(ctypes.byref(fn), mod, name.encode()), name)
        args = [ctypes.c_void_p(out.data_ptr()), ctypes.c_void_p(clk.data_ptr()), ctypes.c_int(iters)]
        params = (ctypes.c_void_p * 3)(*[ctypes.addressof(a) for a in args])
        stream = torch.cuda.current_stream().cuda_stream
        times = []
        for _ in range(5):
            a, b = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
            a.record()
            _check(libcuda().cuLaunchKernel(fn, sms, 1, 1, threads, 1, 1, 0, ctypes.c_void_p(stream), params, None), name)
            b.record()
            torch.cuda.synchronize()
            times.append(a.elapsed_time(b) * 1e-3)
        t = statistics.median(times)
        cycles = clk.item()
        fma = fma_per_iter_per_block * iters
        print(f"{name:10} threads {threads:4}: {t * 1e6:8.1f} us, {fma / cycles:7.0f} FMA/clk/SM (clock64), "
              f"{fma * sms / t / 1e12 * 2:6.1f} TFLOP/s, clock {cycles / t / 1e9:.2f} GHz", flush=True)

    for warps in (4, 8, 16):
        run("mma_sync", 32 * warps, 20000, warps * 8 * 16 * 8 * 16)
        run("mma_sync_f16acc", 32 * warps, 20000, warps * 8 * 16 * 8 * 16)
    for n in N_LIST:
        for g in (1, 2):
            run(f"wg_n{n}", 128 * g, 4000, g * 8 * 64 * n * 16)
    p.unlink()


if __name__ == "__main__":
    main()
