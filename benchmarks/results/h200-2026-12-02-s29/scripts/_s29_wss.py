"""s29 call 7 (prototype, not routed): a warp-specialized q4_0 GEMM for decode batches on sm_90a. MMA warps only
issue wgmma (SS: W dequantized into shared memory as A, 64 features per m64 tile; x as B, N = 32 tokens); two
dequantizing groups of 4 warps take alternate K steps (group g owns stage g), each issuing its next W loads right
after its proxy fence, so its loads stay in flight across the MMA warpgroup's work. Checked against the route's
r32w tile (plain, split 1), then timed beside it on gate_up's shape (28672 x 4096) at M 32 / 16."""
from __future__ import annotations

import ctypes
import pathlib
import statistics
import sys

import torch

from onecat.kernels import build, gemm_ops
from onecat.kernels.bench import ROTATE_BYTES, packed_gpu, time_sets
from onecat.kernels.driver import _check, _ensure_context, libcuda

SRC = r'''
#include "gemm_dequant.cuh"
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900 && defined(__CUDA_ARCH_FEAT_SM90_ALL)
#define WS_OK 1
#else
#define WS_OK 0
#endif
ONECAT_DEVICE unsigned long long ws_desc(unsigned saddr) {  // K-major, no swizzle, LBO 128 (k halves), SBO 256 (8-row groups)
  return (unsigned long long)((saddr & 0x3FFFFu) >> 4) | (8ull << 16) | (16ull << 32);
}
ONECAT_DEVICE void ws_bar_sync(int id, int n) { asm volatile("bar.sync %0, %1;" ::"r"(id), "r"(n) : "memory"); }
ONECAT_DEVICE void ws_bar_arrive(int id, int n) { asm volatile("bar.arrive %0, %1;" ::"r"(id), "r"(n) : "memory"); }
ONECAT_DEVICE void ws_mma(float (&d)[16], unsigned long long a, unsigned long long b) {
#if WS_OK
  asm volatile(
      "wgmma.mma_async.sync.aligned.m64n32k16.f32.f16.f16 {%0, %1, %2, %3, %4, %5, %6, %7, %8, %9, %10, %11, %12, "
      "%13, %14, %15}, %16, %17, 1, 1, 1, 0, 0;"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3]), "+f"(d[4]), "+f"(d[5]), "+f"(d[6]), "+f"(d[7]), "+f"(d[8]),
        "+f"(d[9]), "+f"(d[10]), "+f"(d[11]), "+f"(d[12]), "+f"(d[13]), "+f"(d[14]), "+f"(d[15])
      : "l"(a), "l"(b)
      : "memory");
#endif
}
#define WS_A 32768
#define WS_B 8192
#define WS_STAGE (WS_A + WS_B)
extern "C" __global__ void __launch_bounds__(384, 2) wss_q4_0(__half* __restrict__ out, const __half* __restrict__ x,
                                                          const unsigned char* __restrict__ q,
                                                          const unsigned char* __restrict__ meta, int M, int N, int K) {
#if WS_OK
  extern __shared__ __align__(128) unsigned char smem[];
  const int t = threadIdx.x, warp = t >> 5, lane = t & 31;
  const int n0 = blockIdx.x * 128, nch = K >> 5, nsteps = nch >> 2;
  const unsigned sbase = (unsigned)__cvta_generic_to_shared(smem);
  if (warp < 4) {  // the MMA warpgroup
    float acc[2][16];
#pragma unroll
    for (int T = 0; T < 2; ++T)
#pragma unroll
      for (int i = 0; i < 16; ++i) acc[T][i] = 0.f;
    for (int st = 0; st < nsteps; ++st) {
      const int g = st & 1;
      ws_bar_sync(1 + g, 256);
      asm volatile("wgmma.fence.sync.aligned;" ::: "memory");
      const unsigned sa = sbase + g * WS_STAGE, sb = sa + WS_A;
#pragma unroll
      for (int s = 0; s < 8; ++s)
#pragma unroll
        for (int T = 0; T < 2; ++T) ws_mma(acc[T], ws_desc(sa + s * 4096 + T * 2048), ws_desc(sb + s * 1024));
      asm volatile("wgmma.commit_group.sync.aligned;" ::: "memory");
      asm volatile("wgmma.wait_group.sync.aligned 0;" ::: "memory");
#pragma unroll
      for (int T = 0; T < 2; ++T)
#pragma unroll
        for (int i = 0; i < 16; ++i) asm volatile("" : "+f"(acc[T][i])::"memory");
      if (st + 2 < nsteps) ws_bar_arrive(3 + g, 256);
    }
    const int g8 = lane >> 2, qd = lane & 3;
#pragma unroll
    for (int T = 0; T < 2; ++T)
#pragma unroll
      for (int j = 0; j < 4; ++j)
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const int f = n0 + T * 64 + 16 * warp + g8 + (e >= 2 ? 8 : 0), tok = 8 * j + 2 * qd + (e & 1);
          if (tok < M) out[(i64)tok * N + f] = __float2half_rn(acc[T][4 * j + e]);
        }
  } else {  // dequantizing group gi (warps 4-7 / 8-11) owns stage gi and steps gi, gi + 2, ...
    const int gi = (warp - 4) >> 2, tt = t - 128 - 128 * gi;
    const int r = tt;  // this thread's W row in the tile
    const uint4* wrow = reinterpret_cast<const uint4*>(q + (i64)(n0 + r) * nch * 16);
    const uint2* srow = reinterpret_cast<const uint2*>(reinterpret_cast<const unsigned short*>(meta) + (i64)(n0 + r) * nch);
    const int xn = tt & 31, xc = tt >> 5;  // this thread's x token and chunk (64 bytes a step)
    const uint4* xrow = reinterpret_cast<const uint4*>(x + (i64)min(xn, M - 1) * K + 32 * xc);
    uint4 w[4];
    uint2 sc;
    unsigned magic = 0x64006400u;
    asm volatile("" : "+r"(magic));
    int st = gi;
    if (st < nsteps) {
#pragma unroll
      for (int c = 0; c < 4; ++c) w[c] = __ldg(wrow + 4 * st + c);
      sc = __ldg(srow + st);
    }
    for (; st < nsteps; st += 2) {
      if (st >= 2) ws_bar_sync(3 + gi, 256);  // the MMA warpgroup is done with this stage (step st - 2)
      unsigned char* sa = smem + gi * WS_STAGE;
      unsigned char* sb = sa + WS_A;
      uint4 xv[4];
#pragma unroll
      for (int i = 0; i < 4; ++i) xv[i] = __ldg(xrow + st * 16 + i);  // x[n][128 st + 32 xc .. + 31]
#pragma unroll
      for (int c = 0; c < 4; ++c) {
        const __half2 d = __half2half2(__ushort_as_half((unsigned short)((c < 2 ? sc.x : sc.y) >> (16 * (c & 1)))));
        const unsigned wv[4] = {w[c].x, w[c].y, w[c].z, w[c].w};
#pragma unroll
        for (int j = 0; j < 4; ++j) {
          unsigned p[4];
          q4_0_word(wv[j], d, magic, p);
          const int s = 2 * c + (j >> 1), h = j & 1;
          *reinterpret_cast<uint4*>(sa + s * 4096 + (r >> 3) * 256 + h * 128 + (r & 7) * 16) = make_uint4(p[0], p[1], p[2], p[3]);
        }
      }
      const unsigned X[16] = {xv[0].x, xv[0].y, xv[0].z, xv[0].w, xv[1].x, xv[1].y, xv[1].z, xv[1].w,
                              xv[2].x, xv[2].y, xv[2].z, xv[2].w, xv[3].x, xv[3].y, xv[3].z, xv[3].w};
#pragma unroll
      for (int j = 0; j < 4; ++j) {  // word j of chunk xc: slice 2 xc + j / 2, k half j % 2
        const unsigned lx = X[2 * j], ly = X[2 * j + 1], hx = X[2 * j + 8], hy = X[2 * j + 9];
        const int s = 2 * xc + (j >> 1), h = j & 1;
        *reinterpret_cast<uint4*>(sb + s * 1024 + (xn >> 3) * 256 + h * 128 + (xn & 7) * 16) =
            make_uint4(__byte_perm(lx, ly, 0x5410), __byte_perm(hx, hy, 0x5410), __byte_perm(lx, ly, 0x7632),
                       __byte_perm(hx, hy, 0x7632));
      }
      asm volatile("fence.proxy.async.shared::cta;" ::: "memory");
      ws_bar_arrive(1 + gi, 256);
      if (st + 2 < nsteps) {
#pragma unroll
        for (int c = 0; c < 4; ++c) w[c] = __ldg(wrow + 4 * (st + 2) + c);
        sc = __ldg(srow + st + 2);
      }
    }
  }
#else
  __trap();
#endif
}
'''


def main() -> int:
    dev = torch.device("cuda")
    path = pathlib.Path(gemm_ops.__file__).parent / "csrc" / "_wss.cu"
    path.write_text(SRC)
    build.ARCH_FEATURES["_wss.cu"] = frozenset({90})
    c = build.compile_source("_wss.cu", 90)
    print("wss_q4_0", c.usage.get("wss_q4_0"), flush=True)
    torch.cuda.init()
    _ensure_context(0)
    mod = ctypes.c_void_p()
    _check(libcuda().cuModuleLoadData(ctypes.byref(mod), c.cubin), "load")
    fn = ctypes.c_void_p()
    _check(libcuda().cuModuleGetFunction(ctypes.byref(fn), mod, b"wss_q4_0"), "get")
    smem = 2 * (32768 + 8192)
    _check(libcuda().cuFuncSetAttribute(fn, 8, smem), "smem attribute")

    def wss(x, w, out):
        m, k = x.shape
        n = w.shape[0]
        args = [ctypes.c_void_p(out.data_ptr()), ctypes.c_void_p(x.data_ptr()), ctypes.c_void_p(w.q.data_ptr()),
                ctypes.c_void_p(w.meta.data_ptr()), ctypes.c_int(m), ctypes.c_int(n), ctypes.c_int(k)]
        params = (ctypes.c_void_p * len(args))(*[ctypes.addressof(a) for a in args])
        _check(libcuda().cuLaunchKernel(fn, n // 128, 1, 1, 384, 1, 1, smem,
                                        ctypes.c_void_p(torch.cuda.current_stream().cuda_stream), params, None), "launch")
        return out

    gen = torch.Generator(device="cuda").manual_seed(0)
    for n, k in ((28672, 4096), (14336, 4096)):
        first = packed_gpu(n, k, "q4_0", gen)
        nsets = max(1, min(16, -(-ROTATE_BYTES // first.nbytes)))
        ws = [first] + [packed_gpu(n, k, "q4_0", gen) for _ in range(nsets - 1)]
        for m in (32, 16, 7):
            xs = [torch.randn(m, k, device=dev, generator=gen).half() for _ in range(nsets)]
            outs = [torch.empty(m, n, device=dev, dtype=torch.float16) for _ in range(nsets)]
            want = gemm_ops.gemm_launch(xs[0], ws[0], None, "r32w", 1)
            got = wss(xs[0], ws[0], outs[0])
            torch.cuda.synchronize()
            err = ((got.float() - want.float()).abs().max() / want.float().abs().max()).item()
            bad = (~torch.isfinite(got)).sum().item()
            t_route = statistics.median(time_sets(lambda i: gemm_ops.gemm_launch(xs[i], ws[i], None, "r32w", 1), nsets, 30))
            t_wss = statistics.median(time_sets(lambda i: wss(xs[i], ws[i], outs[i]), nsets, 30))
            print(f"N {n} K {k} M {m:2}: max |wss - r32w| / max |r32w| = {err:.2e} (non-finite {bad}); "
                  f"r32w x1 {t_route:6.1f} us, wss {t_wss:6.1f} us ({first.nbytes / t_wss / 1e3:.0f} GB/s)", flush=True)
    path.unlink()
    return 0


if __name__ == "__main__":
    sys.exit(main())
