"""s28 experiment: does the register-direct GEMM's W access pattern cap the HBM read rate? A read-only
kernel with r32w's per-thread loads (lane g, q of warp w: rows n0 + 32 w + 8 b + g, b < 4; per 128-K step
16 bytes of nibbles at step * 64 + 16 q and, lanes q == 0, the row's 8 meta bytes), PD steps ahead in a
register ring, blocks of 128 threads held to 2 per SM (dynamic shared memory), grid = tiles x splits as
the route launches gate_up (224 x 1) and down (32 x 8). Layouts: rowmajor (the route's planes) and tiled
(each 128-row tile's step contiguous: 8 KB of nibbles, 1 KB of meta). Baseline: a contiguous streaming read
of the same bytes (264 blocks). Rotating weight sets (> 250 MB: HBM), CUDA events, median of 30."""

import statistics
import sys

import cupy as cp

SRC = r"""
template <int PD, int TILED, int PF, int BPF = 0, int BPD = 0>
__device__ void walk(const unsigned char* __restrict__ q, const unsigned char* __restrict__ meta, int n_rows,
                     int row_bytes, int steps_total, int per, unsigned* out) {
  const int lane = threadIdx.x & 31, warp = threadIdx.x >> 5, g = lane >> 2, qq = lane & 3;
  const int tile = blockIdx.x, s0 = blockIdx.y * per, s1 = min(steps_total, s0 + per);
  const int mrow_bytes = row_bytes / 8;  // meta: 8 bytes per 64 nibble bytes
  unsigned acc = 0;
  uint4 w[PD][4];
  uint2 m[PD][4];
  auto load = [&](int s, int slot) {
#pragma unroll
    for (int b = 0; b < 4; ++b) {
      const int r = 32 * warp + 8 * b + g;
      long long qo, mo;
      if (TILED == 1) {
        qo = ((long long)tile * steps_total + s) * 8192 + r * 64 + 16 * qq;
        mo = ((long long)tile * steps_total + s) * 1024 + r * 8;
      } else {
        qo = (long long)(tile * 128 + r) * row_bytes + s * 64 + 16 * qq;
        mo = (long long)(tile * 128 + r) * mrow_bytes + s * 8;
      }
      if (PF) {
        uint4 v;
        asm volatile("ld.global.nc.L2::128B.v4.u32 {%0,%1,%2,%3}, [%4];" : "=r"(v.x), "=r"(v.y), "=r"(v.z), "=r"(v.w) : "l"(q + qo));
        w[slot][b] = v;
      } else {
        w[slot][b] = __ldg(reinterpret_cast<const uint4*>(q + qo));
      }
      m[slot][b] = qq == 0 ? __ldg(reinterpret_cast<const uint2*>(meta + mo)) : make_uint2(0, 0);
    }
  };
#pragma unroll
  for (int u = 0; u < PD; ++u)
    if (s0 + u < s1) load(s0 + u, u);
  for (int s = s0; s < s1; s += PD) {
#pragma unroll
    for (int u = 0; u < PD; ++u) {
      if (s + u >= s1) break;
      if (BPF && ((s + u - s0) % BPF) == 0) {  // rows' next BPF steps sent to L2, BPD steps ahead
        const int ps = s + u + BPD;
        if (ps < s1) {
#pragma unroll
          for (int b = 0; b < 4; ++b) {
            const int r = 32 * warp + 8 * b + g;
            const int n = min(BPF, s1 - ps);
            if (qq == 0) {
              const unsigned char* a = q + (long long)(tile * 128 + r) * row_bytes + ps * 64;
              if (TILED == 2) {
                asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" :: "l"(a), "r"(64 * n) : "memory");
              } else {
                for (int i = 0; i < n; i += 2) asm volatile("prefetch.global.L2 [%0];" :: "l"(a + 64 * i));
              }
            } else if (qq == 1) {
              const unsigned char* a = meta + (long long)(tile * 128 + r) * mrow_bytes + ps * 8;
              if (TILED == 2) asm volatile("cp.async.bulk.prefetch.L2.global [%0], %1;" :: "l"(a), "r"(8 * n) : "memory");
              else asm volatile("prefetch.global.L2 [%0];" :: "l"(a));
            }
          }
        }
      }
#pragma unroll
      for (int b = 0; b < 4; ++b) acc ^= w[u][b].x ^ w[u][b].y ^ w[u][b].z ^ w[u][b].w ^ m[u][b].x ^ m[u][b].y;
      if (s + u + PD < s1) load(s + u + PD, u);
    }
  }
  if (acc == 0x9e3779b9u) out[blockIdx.x] = acc;
}
#define E(PD, T, PF, BPF, BPD) extern "C" __global__ void __launch_bounds__(128) walk_##PD##_##T##_##PF##_##BPF##_##BPD( \
  const unsigned char* q, const unsigned char* meta, int n, int rb, int st, int per, unsigned* out) { \
  walk<PD, T, PF, BPF, BPD>(q, meta, n, rb, st, per, out); }
E(2, 0, 0, 0, 0) E(2, 0, 1, 0, 0) E(2, 1, 0, 0, 0) E(3, 1, 0, 0, 0)
E(2, 2, 0, 8, 4) E(2, 2, 0, 8, 8) E(2, 2, 0, 16, 8) E(2, 2, 0, 16, 16) E(2, 2, 0, 32, 16) E(2, 2, 1, 8, 8) E(2, 2, 1, 16, 16)
E(2, 3, 0, 8, 8) E(2, 3, 0, 16, 16) E(2, 3, 1, 8, 8)

extern "C" __global__ void __launch_bounds__(128) stream(const uint4* __restrict__ p, long long n16, unsigned* out) {
  const long long per = (n16 + gridDim.x - 1) / gridDim.x, lo = blockIdx.x * per, hi = min(n16, lo + per);
  unsigned acc = 0;
  long long i = lo + threadIdx.x;
  for (; i + 7 * 128 < hi; i += 8 * 128) {
    uint4 v[8];
#pragma unroll
    for (int u = 0; u < 8; ++u) v[u] = __ldg(p + i + u * 128);
#pragma unroll
    for (int u = 0; u < 8; ++u) acc ^= v[u].x ^ v[u].y ^ v[u].z ^ v[u].w;
  }
  for (; i < hi; i += 128) { const uint4 v = __ldg(p + i); acc ^= v.x ^ v.y ^ v.z ^ v.w; }
  if (acc == 0x9e3779b9u) out[blockIdx.x] = acc;
}
"""

KERNELS = ["walk_" + "_".join(x.strip() for x in e.split(",")) for e in
           __import__("re").findall(r"E\(([0-9, ]+)\)", SRC.split("#define E")[1].split("\n", 2)[2])]
mod = cp.RawModule(code=SRC, options=("-std=c++17",))
SMEM = 100 * 1024  # two blocks per SM at most, as r32w's registers allow
out = cp.zeros(4096, dtype=cp.uint32)


def timed(fn, sets, reps=30):
    ev = [(cp.cuda.Event(), cp.cuda.Event()) for _ in range(reps)]
    for i in range(3):
        fn(sets[i % len(sets)])
    ts = []
    for i, (a, b) in enumerate(ev):
        s = sets[i % len(sets)]
        a.record()
        fn(s)
        b.record()
    b.synchronize()
    ts = [cp.cuda.get_elapsed_time(a, b) * 1000 for a, b in ev]
    return statistics.median(ts), min(ts), max(ts)


def main():
    copy_sets = None
    rows = []
    for name, n, k, splits in (("gate_up", 28672, 4096, 1), ("down", 4096, 14336, 8), ("qkv", 6144, 4096, 4)):
        rb = k // 2
        nbytes = n * rb + n * rb // 8
        nsets = max(4, -(-300_000_000 // nbytes))
        sets = [(cp.random.randint(0, 255, n * rb, dtype=cp.uint8), cp.random.randint(0, 255, n * rb // 8, dtype=cp.uint8))
                for _ in range(nsets)]
        steps = k // 128
        per = -(-steps // splits)
        grid = (n // 128, -(-steps // per))
        for kname in KERNELS:
                    _, pd, tiled, pf, bpf, bpd = kname.split("_")
                    pd, tiled, pf = int(pd), int(tiled), int(pf)
                    f = mod.get_function(kname)
                    f.max_dynamic_shared_size_bytes = SMEM
                    run = lambda s, f=f: f(grid, (128,), (s[0], s[1], cp.int32(n), cp.int32(rb), cp.int32(steps),
                                                          cp.int32(per), out), shared_mem=SMEM)
                    med, lo, hi = timed(run, sets)
                    lay = {0: 'rowmajor', 1: 'tiled', 2: f'row+bulkL2 {bpf}@{bpd}', 3: f'row+pfL2 {bpf}@{bpd}'}[tiled]
                    rows.append((name, f"PD{pd} {lay}{' pf128' if pf else ''}", grid,
                                 med, lo, hi, nbytes / med / 1e3))
        flat = [cp.random.randint(0, 255, nbytes // 16 * 16, dtype=cp.uint8) for _ in range(nsets)]
        f = mod.get_function("stream")
        for blocks in (264, 396):
            run = lambda s, f=f, b=blocks: f((b,), (128,), (s, cp.int64(s.size // 16), out))
            med, lo, hi = timed(run, flat)
            rows.append((name, f"contiguous stream", (blocks,), med, lo, hi, nbytes / med / 1e3))
        del sets, flat
        cp.get_default_memory_pool().free_all_blocks()
    big = [cp.empty(1 << 30, dtype=cp.uint8) for _ in range(2)]
    med, lo, hi = timed(lambda s: big[1].__setitem__(slice(None), s), [big[0]], reps=10)
    copy = 2 * (1 << 30) / med / 1e3
    print(f"copy (1 GiB device to device, read + write): {copy:.0f} GB/s", flush=True)
    print(f"{'matrix':8} {'pattern':24} {'grid':>10} {'median us':>10} {'min':>8} {'max':>8} {'GB/s':>7} {'% copy':>7}")
    for name, pat, grid, med, lo, hi, gbs in rows:
        print(f"{name:8} {pat:24} {str(grid):>10} {med:10.2f} {lo:8.2f} {hi:8.2f} {gbs:7.0f} {100 * gbs / copy:6.1f}%")


if __name__ == "__main__":
    sys.exit(main())
